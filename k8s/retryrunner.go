package k8s

// The retry runner (config.RetryScaleSetName): a scale set of the stack's own where a retry
// workflow (examples/workflows/retry-interrupted.yml) runs `gpuci retry --cluster`. Only the
// cluster knows that a container-form job's pod lost its spot node — its runner survived and
// reported an ordinary step failure — so the decision must run where the cluster can be read,
// not on a GitHub-hosted runner. One small runner at most, on the system nodes, whose account
// reads Karpenter's events and the runners' pods and writes one ConfigMap, its memory of the
// cluster's evidence for jobs re-run on a later attempt, and nothing else.

import (
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	k8scorev1 "k8s.io/api/core/v1"
	k8srbacv1 "k8s.io/api/rbac/v1"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// RetryReaderRules are what gpuci retry --cluster reads (live.ReadInterruptions), by
// namespace: Karpenter's SpotInterrupted events on Nodes (a cluster-scoped object's events
// are recorded in "default"), and in the runners' namespace the pods and the scheduler's
// Scheduled events that say where each ran. It writes one object, the evidence ConfigMap
// (by name; the program creates it), and reads no Secret.
func RetryReaderRules() map[string][]k8srbacv1.PolicyRule {
	return map[string][]k8srbacv1.PolicyRule{
		k8smeta.NamespaceDefault: {
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list"}},
		},
		wellknown.RunnersNamespace: {
			{APIGroups: []string{""}, Resources: []string{"events", "pods"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{wellknown.RetryEvidenceConfigMap}, Verbs: []string{"get", "update"}},
		},
	}
}

// RetryRunnerTemplate is the retry runner's pod: the current runner image (pulled on each
// start, as it is :latest), on the system nodes, under the retry account; with it set, the
// chart creates no account of its own.
func RetryRunnerTemplate(cache ImageCache) k8scorev1.PodTemplateSpec {
	return systemRunnerPod(wellknown.RetryServiceAccount, cache.Pull(versions.RunnerImage), k8scorev1.PullAlways)
}

// RetryScaleSetValues are the gha-runner-scale-set values of the retry runner: reached by its
// name only (`runs-on: <name>`), one runner at most, none idle.
func RetryScaleSetValues(name string, gh config.GitHub, cache ImageCache) (map[string]any, error) {
	t, err := unstructured(RetryRunnerTemplate(cache))
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"githubConfigUrl":    gh.ConfigURL,
		"githubConfigSecret": wellknown.GitHubSecretName,
		"runnerScaleSetName": name,
		"minRunners":         0,
		"maxRunners":         1,
		"controllerServiceAccount": map[string]any{
			"namespace": wellknown.ARCNamespace,
			"name":      wellknown.ARCServiceAccount,
		},
		"template": t,
	}, nil
}

// newRetryReader creates the retry runner's account, the evidence ConfigMap and, in each
// namespace it reads, a Role and RoleBinding (RetryReaderRules).
func newRetryReader(ctx *pulumi.Context, name string, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	sa, err := corev1.NewServiceAccount(ctx, name+"-retry", &corev1.ServiceAccountArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.RetryServiceAccount), Namespace: pulumi.String(wellknown.RunnersNamespace)},
	}, opts...)
	if err != nil {
		return nil, err
	}
	// Its data is gpuci retry's: the program declares none, so an up never touches it (and
	// the account needs no create, which cannot be limited to one name).
	evidence, err := corev1.NewConfigMap(ctx, name+"-retry-evidence", &corev1.ConfigMapArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.RetryEvidenceConfigMap), Namespace: pulumi.String(wellknown.RunnersNamespace)},
	}, opts...)
	if err != nil {
		return nil, err
	}
	out := []pulumi.Resource{sa, evidence}
	for _, ns := range []string{k8smeta.NamespaceDefault, wellknown.RunnersNamespace} {
		rbac, err := newAccountRole(ctx, name+"-retry-"+ns, wellknown.RetryServiceAccount, ns, RetryReaderRules()[ns], sa, opts...)
		if err != nil {
			return nil, err
		}
		out = append(out, rbac...)
	}
	return out, nil
}
