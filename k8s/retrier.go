package k8s

// The in-cluster retrier (config.Retrier): one small pod on the system nodes that re-runs,
// once, every job a spot interruption ended, in every repository of the organization, with
// nothing in any repository. It runs `gpuci retry --org` (cmd/gpuci/internal/retry, its Sweep):
// each minute it reads the cluster's events with its own account (RetryReaderRules: events in
// default and where the runner and job pods run) and, only after an interruption, the
// organization's failed runs with its GitHub token. Between passes it takes a broken GPU's
// node out of service (OutOfServiceRules: list Nodes, list and delete NodeClaims, record its
// event in default), and it may end a pool's spot cool-down (CoolDownRules: get and patch the
// pools' cool-down NodePools, by name). No pod, no Secret. The token lives in the retrier's
// own namespace: no account of the runners' namespace can read it.
//
// It runs the stack's own gpuci build, or a pinned release (gpuci.go).

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s/nodepools"
)

// RetrierNamespaceLabels: Pod Security's restricted level.
func RetrierNamespaceLabels() map[string]string {
	return map[string]string{psaapi.EnforceLevelLabel: string(psaapi.LevelRestricted)}
}

// RetrierBucketConfigMap holds the stack bucket's name in the retrier's namespace, where its
// stored gpuci is (gpuci.go).
const RetrierBucketConfigMap = "stack-bucket"

// retrierTokenKey is the token's key in its Secret, read as GITHUB_TOKEN.
const retrierTokenKey = "token"

// RetrierSweepEvery is how often the retrier reads the cluster's events: a re-run starts
// within about a minute of its run's failure, and a quiet minute costs one list of events.
const RetrierSweepEvery = "1m"

// RetrierCommandArgs are what `gpuci retry --org` is given: the organization, the scale sets
// whose lost runners count (every pool's and twin's), the namespaces their pods run in, and,
// where pools cool down, for how long and each one's scale set and cool-down NodePool.
func RetrierCommandArgs(r config.Retrier, gh config.GitHub, pools []config.GPUPool) []string {
	var names, cool []string
	for _, p := range pools {
		names = append(names, p.RunnerScaleSetName)
		if nodepools.CoolsDown(p, r) {
			cool = append(cool, p.RunnerScaleSetName+"="+wellknown.CoolDownNodePool(p.Name))
		}
	}
	args := []string{"retry", "--org", gh.Org, "--scale-sets", strings.Join(names, ","),
		"--pod-namespaces", strings.Join(config.RunnerPodNamespaces(pools), ",")}
	if len(cool) > 0 {
		args = append(args, "--spot-cool-down", r.SpotCoolDown.String(), "--cool-down-node-pools", strings.Join(cool, ","))
	}
	return append(args, "--gpu-pools", strings.Join(poolNames(pools), ","), "--every", RetrierSweepEvery)
}

func poolNames(pools []config.GPUPool) []string {
	var names []string
	for _, p := range pools {
		names = append(names, p.Name)
	}
	return names
}

// OutOfServiceRules are the retrier's rights to take a broken GPU's node out of service
// (live.OutOfService): cluster-wide, to list Nodes (to read their GPUs' capacity and
// allocatable) and to list and delete NodeClaims (Karpenter then drains and replaces the
// node; NodeClaims have generated names, so no resourceNames can narrow it); in "default",
// to record its GPUOutOfService event on the Node. Only the retrier's account has them: the
// retry runner's, where a job runs, reads events and writes none, so no job can make the
// evidence the retrier re-runs on.
func OutOfServiceRules() (cluster []rbacv1.PolicyRule, inDefault rbacv1.PolicyRule) {
	return []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}},
			{APIGroups: []string{"karpenter.sh"}, Resources: []string{"nodeclaims"}, Verbs: []string{"list", "delete"}},
		},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}
}

// CoolDownRules are the retrier's cluster-wide rights: to read and patch its pools'
// cool-down NodePools (by name: no other NodePool, nothing else of Karpenter's), or none.
func CoolDownRules(r config.Retrier, pools []config.GPUPool) []rbacv1.PolicyRule {
	var names []string
	for _, p := range pools {
		if nodepools.CoolsDown(p, r) {
			names = append(names, wellknown.CoolDownNodePool(p.Name))
		}
	}
	if len(names) == 0 {
		return nil
	}
	return []rbacv1.PolicyRule{{APIGroups: []string{"karpenter.sh"}, Resources: []string{"nodepools"}, ResourceNames: names, Verbs: []string{"get", "patch"}}}
}

// RetrierDeployment is the retrier: one replica, non-root, with its gpuci fetched and checked
// by an init container into a volume only the pod sees, all in one pinned image (gpuciImage).
func RetrierDeployment(r config.Retrier, gh config.GitHub, pools []config.GPUPool, cache ImageCache, gpuci Gpuci, region string) appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": wellknown.RetrierName}
	user := gpuciUser
	restricted := restrictedReadOnly()
	small := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	image := gpuciImage(cache)
	one := int32(1)
	return appsv1.Deployment{
		TypeMeta:   k8smeta.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: k8smeta.ObjectMeta{Name: wellknown.RetrierName, Namespace: wellknown.RetrierNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			// One retrier at a time: two passes at once would race to re-run the same job
			// (GitHub refuses the second, but says so as an error).
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Selector: &k8smeta.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: k8smeta.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: wellknown.RetrierServiceAccount,
					NodeSelector:       map[string]string{wellknown.SystemNodeLabel: wellknown.SystemNodeValue},
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr(true), RunAsUser: &user, RunAsGroup: &user,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					InitContainers: []corev1.Container{fetchGpuci(gpuci, cache, region, RetrierBucketConfigMap, small)},
					Containers: []corev1.Container{{
						Name:            "retrier",
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{gpuciBinary},
						Args:            RetrierCommandArgs(r, gh, pools),
						Env: []corev1.EnvVar{{Name: "GITHUB_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: wellknown.RetrierTokenSecret}, Key: retrierTokenKey,
						}}}},
						Resources:       small,
						SecurityContext: restricted,
						VolumeMounts:    []corev1.VolumeMount{gpuciMount()},
					}},
					Volumes: gpuciVolumes(),
				},
			},
		},
	}
}
