// Package verify is `gpuci verify`: the facts a healthy lux-gpu-ci cluster shows, checked
// against the live cluster with client-go, each with its evidence.
package verify

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/live"
	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// Check is one verified fact.
type Check struct {
	Name     string `json:"name"`
	OK       bool   `json:"ok"`
	Evidence string `json:"evidence"`
}

// Run checks the cluster against the stack's configuration.
func Run(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, cfg *config.Config) []Check {
	checks := []Check{systemNodes(ctx, kube, cfg.SystemNodes)}
	checks = append(checks, runningPod(ctx, kube, "Karpenter controller running", wellknown.KarpenterNamespace, wellknown.KarpenterPods))
	for _, pool := range cfg.Pools() {
		checks = append(checks, nodePoolReady(ctx, dyn, pool.Name))
	}
	checks = append(checks, gpuNodes(ctx, kube, cfg.Pools()))
	checks = append(checks, runningPod(ctx, kube, "ARC controller running", wellknown.ARCNamespace, wellknown.ARCControllerPods))
	for _, pool := range cfg.Pools() {
		checks = append(checks, runnerSet(ctx, dyn, pool))
	}
	if r := cfg.RetryRunner.ScaleSetName; r != "" {
		checks = append(checks, retrySet(ctx, dyn, cfg.RetryRunner))
	}
	return checks
}

// AllOK tells whether every check held.
func AllOK(checks []Check) bool {
	return !slices.ContainsFunc(checks, func(c Check) bool { return !c.OK })
}

// Write prints one line per check.
func Write(w io.Writer, checks []Check) {
	for _, c := range checks {
		mark := "✓"
		if !c.OK {
			mark = "✗"
		}
		fmt.Fprintf(w, "%s %s — %s\n", mark, c.Name, c.Evidence)
	}
}

func systemNodes(ctx context.Context, kube kubernetes.Interface, want config.SystemNodes) Check {
	c := Check{Name: fmt.Sprintf("%d system node(s) of type %s, Ready", want.Count, want.InstanceType)}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: wellknown.SystemNodeLabel + "=" + wellknown.SystemNodeValue})
	if err != nil {
		c.Evidence = err.Error()
		return c
	}
	var seen []string
	ready := 0
	for _, n := range nodes.Items {
		typ := n.Labels[corev1.LabelInstanceTypeStable]
		seen = append(seen, n.Name+" ("+typ+", "+readiness(n)+")")
		if typ == want.InstanceType && readiness(n) == "Ready" {
			ready++
		}
	}
	c.OK = ready == want.Count && len(nodes.Items) == want.Count
	c.Evidence = fmt.Sprintf("%d found: %s", len(nodes.Items), listOrNone(seen))
	return c
}

func readiness(n corev1.Node) string {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			return "Ready"
		}
	}
	return "NotReady"
}

func runningPod(ctx context.Context, kube kubernetes.Interface, name, namespace, selector string) Check {
	c := Check{Name: name}
	pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		c.Evidence = err.Error()
		return c
	}
	var seen []string
	for _, p := range pods.Items {
		seen = append(seen, fmt.Sprintf("%s/%s %s", namespace, p.Name, p.Status.Phase))
		if p.Status.Phase == corev1.PodRunning {
			c.OK = true
		}
	}
	c.Evidence = fmt.Sprintf("pods %s: %s", selector, listOrNone(seen))
	return c
}

func nodePoolReady(ctx context.Context, dyn dynamic.Interface, name string) Check {
	c := Check{Name: "NodePool " + name + " Ready"}
	np, err := dyn.Resource(wellknown.NodePools).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.Evidence = err.Error()
		return c
	}
	status, reason := live.Condition(np, "Ready")
	c.OK = status == "True"
	c.Evidence = fmt.Sprintf("Ready=%s %s", orUnknown(status), reason)
	return c
}

func gpuNodes(ctx context.Context, kube kubernetes.Interface, pools []config.GPUPool) Check {
	// Informational: zero is the expected idle state, so this check always holds.
	c := Check{Name: "GPU nodes up (0 when idle)", OK: true}
	nodes, err := live.GPUNodes(ctx, kube, pools)
	if err != nil {
		c.OK, c.Evidence = false, err.Error()
		return c
	}
	var seen []string
	for _, n := range nodes {
		gpus := n.Status.Allocatable[wellknown.GPUResource]
		seen = append(seen, fmt.Sprintf("%s (%s, %s, %s GPU allocatable)", n.Name, n.Labels[wellknown.NodePoolLabel], n.Labels[corev1.LabelInstanceTypeStable], gpus.String()))
	}
	c.Evidence = fmt.Sprintf("%d: %s", len(nodes), listOrNone(seen))
	return c
}

func runnerSet(ctx context.Context, dyn dynamic.Interface, pool config.GPUPool) Check {
	c := Check{Name: "runner scale set " + pool.RunnerScaleSetName}
	rs, err := live.GetScaleSet(ctx, dyn, pool.RunnerScaleSetName)
	if err != nil {
		c.Evidence = err.Error()
		return c
	}
	c.OK = slices.Equal(rs.Labels, pool.RunnerLabels)
	c.Evidence = fmt.Sprintf("%d runner(s); labels %v", rs.CurrentRunners, rs.Labels)
	if !c.OK {
		c.Evidence += fmt.Sprintf(", configured %v (labels are fixed when the scale set is created: recreate it)", pool.RunnerLabels)
	}
	return c
}

// retrySet: the retry runner's scale set (retryScaleSetName) is there, where the retry
// workflow's runs-on sends it, and in its own runner group (retryRunnerGroup): its runner
// holds an account that reads the cluster's events, so only the repositories that group
// admits may send it a job. ARC leaves a scale set in the group it had when GitHub has none
// of the configured name, and up succeeds all the same: this is where that shows.
func retrySet(ctx context.Context, dyn dynamic.Interface, retry config.RetryRunner) Check {
	c := Check{Name: "retry runner scale set " + retry.ScaleSetName + " in runner group " + retry.RunnerGroup}
	rs, err := live.GetScaleSet(ctx, dyn, retry.ScaleSetName)
	if err != nil {
		c.Evidence = err.Error()
		return c
	}
	c.OK = strings.EqualFold(rs.RunnerGroup, retry.RunnerGroup) // as ARC compares them
	c.Evidence = fmt.Sprintf("%d runner(s); in runner group %s", rs.CurrentRunners, orUnknown(rs.RunnerGroup))
	if !c.OK {
		c.Evidence += fmt.Sprintf(", not %s: create that group in the organization's Actions settings (Runner groups), "+
			"admit only the repositories that may retry, and ARC moves the scale set there (its controller logs "+
			"\"Failed to get runner group by name\" until then)", retry.RunnerGroup)
	}
	return c
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, "; ")
}
