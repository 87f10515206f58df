package k8s

// Warm capacity (a pool's warm windows, config.Warm): in each window a CronJob of the pool
// starts a Job of placeholder pods, one per warm node. A placeholder asks for exactly what a
// job's GPU pod asks for (RunnerResources) on the pool's nodes, so Karpenter launches a node
// for it, and it pulls the images a job will run there. Its priority is below every job's, so
// a job's pod preempts it: the scheduler nominates the warm node for the job's pod (Karpenter
// makes no node for a pod the scheduler nominated: sigs.k8s.io/karpenter v1.14.1
// pkg/utils/pod/scheduling.go IsProvisionable and IsPreempting), deletes the placeholder,
// binds the pod, and its containers start from images already on the node. The Job replaces
// the placeholder, which Karpenter gives a node of its own within the pool's gpuLimit, or which
// waits for the job's node once the job is done. At the window's end the Job's deadline
// deletes the placeholders, and the empty nodes are consolidated as any other.
//
// Why these pieces, each cited to the pinned source:
//   - No controller of our own, no RBAC, no extra image: the CronJob and Job controllers are
//     Kubernetes' own, and the window's time zone is CronJob's spec.timeZone.
//   - Priority -10, not lower: Karpenter v1.14 counts a node empty when no pod on it has a
//     positive eviction cost, 1 + priority/2^25 (pkg/utils/disruption/disruption.go
//     EvictionCost, pkg/controllers/disruption/types.go); at -10 a placeholder's node is not
//     empty, so WhenEmpty never consolidates a warm node mid-window, and no placeholder is
//     moved between nodes in a loop (karpenter-provider-aws#4452 was consolidation of
//     under-used nodes, which WhenEmpty never does).
//   - A placeholder exits 0 when it is told to stop: the Job counts a success and replaces it
//     at once. A failure would be replaced after the Job controller's pod backoff, which grows
//     from 10 s to 10 minutes and never resets for pods that never succeed (kubernetes
//     pkg/controller/job/backoff_utils.go at v1.36.3).
//   - The Job's completions are far more than a window's preemptions; its deadline, not its
//     completions, ends it.

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// WarmPriority is the placeholders' priority: below a job's (0, the default), above the
// value at which Karpenter would take a placeholder's node for empty (-2^25).
const WarmPriority = -10

// warmCompletions is a window's Job's completions: each preemption completes one placeholder.
const warmCompletions = 10000

// warmStartingDeadline bounds how late a window may open (a CronJob controller that was down
// at its start): its Job's deadline counts from when it starts, so a late window ends late.
const warmStartingDeadline = 300

// warmStopGrace is how long a placeholder has to exit when preempted or at the window's end;
// its shell's trap exits at once, and the job's pod is bound as soon as it has.
const warmStopGrace = 5

// WarmPriorityClass is the placeholders' PriorityClass: they preempt nothing.
func WarmPriorityClass() schedulingv1.PriorityClass {
	never := corev1.PreemptNever
	return schedulingv1.PriorityClass{
		TypeMeta:         k8smeta.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
		ObjectMeta:       k8smeta.ObjectMeta{Name: wellknown.WarmPriorityClass},
		Value:            WarmPriority,
		PreemptionPolicy: &never,
		Description:      "lux-gpu-ci's warm-capacity placeholders: any job's pod preempts them.",
	}
}

// WarmNamespaceLabels enforce the restricted Pod Security level: a placeholder runs nothing
// but sleep, as nobody.
func WarmNamespaceLabels() map[string]string {
	return map[string]string{
		psaapi.EnforceLevelLabel: string(psaapi.LevelRestricted),
		psaapi.AuditLevelLabel:   string(psaapi.LevelRestricted),
		psaapi.WarnLevelLabel:    string(psaapi.LevelRestricted),
	}
}

// WarmPlaceholder is a warm node's placeholder pod for pool: a job's GPU share, on the pool's
// nodes, holding it with the runner image (a runner-form job's, and a container-form job pod's
// first container's, the hooks' fs-init) and, in the container form, pulling the images the
// pool's jobs run.
//
// The pulls are containers beside "hold", after it, not init containers: the kubelet starts a
// pod's containers in order, pulling each image as it starts its container (the runner image
// first, so a job that comes while the node still pulls finds its fs-init's image there), and a
// container that cannot start once its image is there (an image without sh: containerd reports
// StartError, exit code 128: containerd v2.1 internal/cri/server/helpers.go) only ends itself;
// the pod runs on while hold does (kubelet pkg/kubelet/kubelet_pods.go getPhase at v1.36.3: a
// pod with a running container is Running). An init container that failed would fail the pod,
// the Job would count it, and six of them would end the day's window. The Job's pod failure
// policy ignores a pull's failure when the pod ends (WarmPullFailureRules).
func WarmPlaceholder(pool config.GPUPool, cache ImageCache) (corev1.PodTemplateSpec, error) {
	res, err := RunnerResources(pool)
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	restricted := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	hold := corev1.Container{
		Name:            "hold",
		Image:           cache.Pull(pool.RunnerImage),
		ImagePullPolicy: runnerPullPolicy(pool),
		// Exit 0 when told to stop (preempted, or the window's end): see the file's comment.
		Command:         []string{"sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"},
		Resources:       res,
		SecurityContext: restricted,
	}
	containers := []corev1.Container{hold}
	for i, img := range warmImages(pool) {
		containers = append(containers, corev1.Container{
			Name:            warmPullName(i),
			Image:           cache.Pull(img),
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{"sh", "-c", "exit 0"},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
			}},
			SecurityContext: restricted,
		})
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: k8smeta.ObjectMeta{Labels: map[string]string{wellknown.WarmPoolLabel: pool.Name}},
		Spec: corev1.PodSpec{
			PriorityClassName:             wellknown.WarmPriorityClass,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr(int64(warmStopGrace)),
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			NodeSelector:                  map[string]string{wellknown.PoolLabel: pool.Name},
			Tolerations:                   []corev1.Toleration{gpuToleration},
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr(true),
				RunAsUser:      ptr(int64(65534)),
				RunAsGroup:     ptr(int64(65534)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: containers,
		},
	}, nil
}

func warmImages(pool config.GPUPool) []string {
	if pool.Warm == nil {
		return nil
	}
	return pool.Warm.Images
}

func warmPullName(i int) string { return fmt.Sprintf("pull-%d", i) }

// WarmPullFailureRules are the Job's pod failure policy rules for the pulls: a pull that
// failed (an image without sh cannot start its container) is no failure of the placeholder,
// which held its node and pulled the image all the same. Without them a placeholder that
// ended with no DisruptionTarget (deleted by hand) would count against the Job's
// backoffLimit, and six would end the day's window. They do not spare it the Job
// controller's backoff: a Failed pod delays its replacement, ignored or not (make e2e logs
// 11 s for the container pool's, 1 s for a placeholder that exited 0). Config caps
// warm.images: Kubernetes allows 20 rules.
func WarmPullFailureRules(pool config.GPUPool) []batchv1.PodFailurePolicyRule {
	var rules []batchv1.PodFailurePolicyRule
	for i := range warmImages(pool) {
		rules = append(rules, batchv1.PodFailurePolicyRule{
			Action: batchv1.PodFailurePolicyActionIgnore,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: ptr(warmPullName(i)), Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0},
			},
		})
	}
	return rules
}

// WarmCronJobName is the CronJob of a pool's window i (config refuses a pool name too long
// for it: a CronJob's name is at most 52 characters).
func WarmCronJobName(pool config.GPUPool, i int) string {
	return fmt.Sprintf("%s-warm-%d", pool.Name, i)
}

// WarmCronJob opens pool's window i: its lead before the window's start (so its nodes are up
// and pulled at the start), in the schedule's zone, a Job of window.Nodes placeholders whose
// deadline is the window's end.
func WarmCronJob(pool config.GPUPool, i int, cache ImageCache) (batchv1.CronJob, error) {
	if pool.Warm == nil || i >= len(pool.Warm.Windows) {
		return batchv1.CronJob{}, fmt.Errorf("pool %s has no warm window %d", pool.Name, i)
	}
	window := pool.Warm.Windows[i]
	placeholder, err := WarmPlaceholder(pool, cache)
	if err != nil {
		return batchv1.CronJob{}, err
	}
	labels := map[string]string{wellknown.WarmPoolLabel: pool.Name}
	tz := pool.Warm.TimeZone
	return batchv1.CronJob{
		TypeMeta:   k8smeta.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: k8smeta.ObjectMeta{Name: WarmCronJobName(pool, i), Namespace: wellknown.WarmNamespace, Labels: labels},
		Spec: batchv1.CronJobSpec{
			Schedule:                   window.Schedule(pool.Warm.Lead),
			TimeZone:                   &tz,
			StartingDeadlineSeconds:    ptr(int64(warmStartingDeadline)),
			ConcurrencyPolicy:          batchv1.ReplaceConcurrent,
			SuccessfulJobsHistoryLimit: ptr(int32(0)),
			FailedJobsHistoryLimit:     ptr(int32(1)),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: k8smeta.ObjectMeta{Labels: labels},
				Spec: batchv1.JobSpec{
					Parallelism:           ptr(int32(window.Nodes)),
					Completions:           ptr(int32(warmCompletions)),
					ActiveDeadlineSeconds: ptr(int64((pool.Warm.Lead + window.Length()).Seconds())),
					BackoffLimit:          ptr(int32(6)),
					// A placeholder that lost its node (a spot interruption, Karpenter's drain of
					// a drifted node) is replaced without counting as a failure.
					PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: append([]batchv1.PodFailurePolicyRule{{
						Action:          batchv1.PodFailurePolicyActionIgnore,
						OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
					}}, WarmPullFailureRules(pool)...)},
					TTLSecondsAfterFinished: ptr(int32(3600)),
					Template:                placeholder,
				},
			},
		},
	}, nil
}
