package k8s

// The retry runner (config.RetryRunner): a scale set of the stack's own where a retry
// workflow (examples/workflows/retry-interrupted.yml) runs `gpuci retry --cluster`. Only the
// cluster knows that a container-form job's pod lost its spot node — its runner survived and
// reported an ordinary step failure — so the decision must run where the cluster can be read,
// not on a GitHub-hosted runner. One small runner at most, on the system nodes, in a runner
// group of its own, whose account reads events and nothing else: whatever job runs there has
// that account, so it must read no pod (a container-form job pod's spec holds its job's
// container.env) and write nothing gpuci retry would trust.

import (
	k8scorev1 "k8s.io/api/core/v1"
	k8srbacv1 "k8s.io/api/rbac/v1"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/apiobject"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// RetryReaderRules are what gpuci retry --cluster reads (live.ReadInterruptions), by
// namespace: Karpenter's SpotInterrupted events on Nodes (a cluster-scoped object's events
// are recorded in "default"), and where the pools' pods run (config.RunnerPodNamespaces: the
// runners' namespace, each container-form pool's jobs') the scheduler's Scheduled events that
// say where each runner's or job's pod ran. Events only: no pod, no Secret, no write.
func RetryReaderRules(pools []config.GPUPool) map[string][]k8srbacv1.PolicyRule {
	events := []k8srbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list"}}}
	out := map[string][]k8srbacv1.PolicyRule{k8smeta.NamespaceDefault: events}
	for _, ns := range config.RunnerPodNamespaces(pools) {
		out[ns] = events
	}
	return out
}

// RetryRunnerTemplate is the retry runner's pod: the current runner image (pulled on each
// start, as it is :latest), on the system nodes, under the retry account; with it set, the
// chart creates no account of its own.
func RetryRunnerTemplate(cache ImageCache) k8scorev1.PodTemplateSpec {
	return systemRunnerPod(wellknown.RetryServiceAccount, cache.Pull(versions.RunnerImage), k8scorev1.PullAlways)
}

// RetryScaleSetValues are the gha-runner-scale-set values of the retry runner: reached by its
// name only (`runs-on: <name>`), one runner at most, none idle, in its own runner group.
func RetryScaleSetValues(retry config.RetryRunner, gh config.GitHub, cache ImageCache) (map[string]any, error) {
	t, err := apiobject.ToMap(RetryRunnerTemplate(cache))
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"githubConfigUrl":    gh.ConfigURL,
		"githubConfigSecret": wellknown.GitHubSecretName,
		"runnerScaleSetName": retry.ScaleSetName,
		// Looked up by name at the org (config refuses the Default group): the org limits it
		// to the repositories, and where its plan allows the workflow, that re-run jobs.
		"runnerGroup": retry.RunnerGroup,
		"minRunners":  0,
		"maxRunners":  1,
		"controllerServiceAccount": map[string]any{
			"namespace": wellknown.ARCNamespace,
			"name":      wellknown.ARCServiceAccount,
		},
		"template": t,
	}, nil
}
