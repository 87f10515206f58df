// Package live reads what gpuci verify and gpuci doctor both look at in a running cluster:
// the GPU nodes of the stack's pools, what ARC's AutoscalingRunnerSet says of a scale set,
// and the conditions of Karpenter's custom resources.
package live

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// GPUNodes are the nodes Karpenter launched for the pools.
func GPUNodes(ctx context.Context, kube kubernetes.Interface, pools []config.GPUPool) ([]corev1.Node, error) {
	var names []string
	for _, p := range pools {
		names = append(names, p.Name)
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: wellknown.NodePoolLabel + " in (" + strings.Join(names, ",") + ")"})
	if err != nil {
		return nil, err
	}
	return nodes.Items, nil
}

// ScaleSet is what ARC's AutoscalingRunnerSet says of a runner scale set.
type ScaleSet struct {
	// Labels are the labels the scale set was created with (fixed from then on).
	Labels         []string
	CurrentRunners int64
	// RunnerGroup is the runner group GitHub has the scale set in, as ARC last recorded it
	// (wellknown.ARCRunnerGroupAnnotation); empty before ARC has registered the scale set.
	RunnerGroup string
}

// GetScaleSet reads a runner scale set's AutoscalingRunnerSet.
func GetScaleSet(ctx context.Context, dyn dynamic.Interface, name string) (ScaleSet, error) {
	rs, err := dyn.Resource(wellknown.AutoscalingRunnerSets).Namespace(wellknown.RunnersNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ScaleSet{}, err
	}
	labels, _, _ := unstructured.NestedStringSlice(rs.Object, "spec", "runnerScaleSetLabels")
	current, _, _ := unstructured.NestedInt64(rs.Object, "status", "currentRunners")
	return ScaleSet{Labels: labels, CurrentRunners: current, RunnerGroup: rs.GetAnnotations()[wellknown.ARCRunnerGroupAnnotation]}, nil
}

// Condition returns the status and reason of a custom resource's condition of type typ.
func Condition(u *unstructured.Unstructured, typ string) (status, reason string) {
	for _, m := range conditions(u) {
		if m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			return status, reason
		}
	}
	return "", "no status yet"
}

// Conditions describes all of a custom resource's conditions on one line.
func Conditions(u *unstructured.Unstructured) string {
	var parts []string
	for _, m := range conditions(u) {
		// A condition without a reason or message leaves them out (not "<nil>").
		part := fmt.Sprintf("%v=%v", m["type"], m["status"])
		for _, k := range []string{"reason", "message"} {
			if v, ok := m[k].(string); ok && v != "" {
				part += " " + v
			}
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "no conditions"
	}
	return strings.Join(parts, "; ")
}

func conditions(u *unstructured.Unstructured) []map[string]any {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []map[string]any
	for _, c := range raw {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
