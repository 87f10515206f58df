package cachegate

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// PodCallers finds a caller's job through the API server: the running pod of the pool at the
// address, its runner, and the job ARC recorded on the runner's EphemeralRunner.
//
//   - A runner-form job runs in its runner's pod, which ARC names after its EphemeralRunner
//     and which that EphemeralRunner controls (controllers/actions.github.com/
//     resourcebuilder.go newEphemeralRunnerPod, gha-runner-scale-set-0.14.2): the owner's UID
//     must match.
//   - A container-form job runs in the pod the hooks create for its runner, in the pool's
//     jobs' namespace, labelled runner-pod=<runner pod> and named <runner pod, cut to 54>-workflow
//     (packages/k8s/src/hooks/constants.ts RunnerInstanceLabel, getJobPodName;
//     packages/k8s/src/k8s/index.ts createPod, runner-container-hooks v0.8.1). Only the
//     hooks' account creates pods there.
//
// The pool's label (wellknown.CompilerCacheLabel) must name the pool: a pod of another pool at
// the address is not this pool's caller.
type PodCallers struct {
	Core    kubernetes.Interface
	Dynamic dynamic.Interface
	// Pool is the cache service's name (the pools' label value).
	Pool string
	// Namespaces are where the pool's job-running pods are: the runners' namespace and, for a
	// container-form pool, its jobs' namespace.
	Namespaces []string
	// TTL is how long an address's job is remembered (a build asks many times a second).
	TTL time.Duration

	mu   sync.Mutex
	seen map[string]seenJob
}

type seenJob struct {
	job   Job
	until time.Time
}

// JobAt is the job of the pool's running pod at ip.
func (c *PodCallers) JobAt(ctx context.Context, ip string) (Job, error) {
	now := time.Now()
	c.mu.Lock()
	if s, ok := c.seen[ip]; ok && now.Before(s.until) {
		c.mu.Unlock()
		return s.job, nil
	}
	c.mu.Unlock()
	job, err := c.lookUp(ctx, ip)
	if err != nil {
		return Job{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]seenJob{}
	}
	for k, s := range c.seen {
		if now.After(s.until) {
			delete(c.seen, k)
		}
	}
	c.seen[ip] = seenJob{job, now.Add(c.TTL)}
	return job, nil
}

func (c *PodCallers) lookUp(ctx context.Context, ip string) (Job, error) {
	var found []corev1.Pod
	for _, ns := range c.Namespaces {
		pods, err := c.Core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
			FieldSelector: "status.podIP=" + ip + ",status.phase=Running",
			LabelSelector: wellknown.CompilerCacheLabel + "=" + c.Pool,
		})
		if err != nil {
			return Job{}, fmt.Errorf("listing the pool's pods at %s: %w", ip, err)
		}
		for _, p := range pods.Items {
			// The selector's terms again: what the list answered is checked, not assumed.
			if p.Status.PodIP == ip && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Labels[wellknown.CompilerCacheLabel] == c.Pool {
				found = append(found, p)
			}
		}
	}
	if len(found) != 1 {
		return Job{}, fmt.Errorf("%w (%d running pods of pool %s at %s)", ErrUnknownCaller, len(found), c.Pool, ip)
	}
	pod := found[0]
	runner, uid := "", ""
	if pod.Namespace == wellknown.RunnersNamespace {
		owner := metav1.GetControllerOf(&pod)
		if owner == nil || owner.Kind != "EphemeralRunner" || owner.Name != pod.Name {
			return Job{}, fmt.Errorf("%w: pod %s is not an EphemeralRunner's", ErrUnknownCaller, pod.Name)
		}
		runner, uid = owner.Name, string(owner.UID)
	} else {
		runner = pod.Labels["runner-pod"]
		if runner == "" || pod.Name != runner[:min(len(runner), 63-len("-workflow"))]+"-workflow" {
			return Job{}, fmt.Errorf("%w: pod %s/%s is not a job pod the hooks made", ErrUnknownCaller, pod.Namespace, pod.Name)
		}
	}
	er, err := c.Dynamic.Resource(wellknown.EphemeralRunners).Namespace(wellknown.RunnersNamespace).Get(ctx, runner, metav1.GetOptions{})
	if err != nil {
		return Job{}, fmt.Errorf("%w: runner %s: %v", ErrUnknownCaller, runner, err)
	}
	if uid != "" && string(er.GetUID()) != uid {
		return Job{}, fmt.Errorf("%w: runner %s is not the pod's owner", ErrUnknownCaller, runner)
	}
	status, _ := er.Object["status"].(map[string]any)
	repo, _ := status["jobRepositoryName"].(string)
	ref, _ := status["jobWorkflowRef"].(string)
	if repo == "" || ref == "" {
		return Job{}, fmt.Errorf("%w: runner %s has no job yet", ErrUnknownCaller, runner)
	}
	return Job{Repository: repo, WorkflowRef: ref}, nil
}
