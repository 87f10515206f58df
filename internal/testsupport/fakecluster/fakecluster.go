// Package fakecluster is a live cluster for the tests of gpuci verify and doctor: the
// objects an idle, healthy dev stack shows, served by client-go's fake clientsets.
package fakecluster

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// Cluster is the objects of a fake cluster: core objects, and custom resources.
type Cluster struct {
	Objects []runtime.Object
	Custom  []runtime.Object
}

// Clients serves the cluster through client-go's fakes.
func (c Cluster) Clients() (kubernetes.Interface, dynamic.Interface) {
	kube := kubefake.NewClientset(c.Objects...)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		wellknown.NodePools:                 "NodePoolList",
		wellknown.NodeClaims:                "NodeClaimList",
		wellknown.EC2NodeClasses:            "EC2NodeClassList",
		wellknown.AutoscalingRunnerSets:     "AutoscalingRunnerSetList",
		wellknown.CustomResourceDefinitions: "CustomResourceDefinitionList",
	}, c.Custom...)
	return kube, dyn
}

// Node is a node with labels, Ready or not, with gpus nvidia.com/gpu allocatable.
func Node(name string, labels map[string]string, ready bool, gpus int64) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
	if gpus > 0 {
		n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return n
}

// Pod is a pod in a phase.
func Pod(ns, name string, labels map[string]string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Status: corev1.PodStatus{Phase: phase}}
}

// Custom is a custom resource with the given top-level fields (spec, status).
func Custom(gvk schema.GroupVersionKind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// ARCCRD is one of ARC's CRDs (spec.group only) whose fields managers own, each by Apply.
func ARCCRD(name string, managers ...string) *unstructured.Unstructured {
	u := Custom(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, "", name, map[string]any{
		"spec": map[string]any{"group": wellknown.ARCGroup},
	})
	var entries []metav1.ManagedFieldsEntry
	for _, m := range managers {
		entries = append(entries, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apiextensions.k8s.io/v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:group":{}}}`)}})
	}
	u.SetManagedFields(entries)
	return u
}

// Healthy is an idle, healthy dev cluster: one Ready system node, Karpenter and the ARC
// controller Running, the NodePools of dev's pools Ready (gpu-spot, its twin
// gpu-spot-on-demand, gpu-spot-container), their scale sets with their labels and no runners.
func Healthy() Cluster {
	return Cluster{
		Objects: []runtime.Object{
			Node("ip-10-0-1-1", map[string]string{"lux-gpu-ci.luxfi.com/node-role": "system", "node.kubernetes.io/instance-type": "t3.medium"}, true, 0),
			Pod("kube-system", "karpenter-abc", map[string]string{"app.kubernetes.io/name": "karpenter"}, corev1.PodRunning),
			Pod("arc-systems", "arc-gha-rs-controller-xyz", map[string]string{"app.kubernetes.io/part-of": "gha-rs-controller"}, corev1.PodRunning),
		},
		Custom: []runtime.Object{
			Custom(schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, "", "gpu-spot", map[string]any{
				"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready"}}},
			}),
			Custom(schema.GroupVersionKind{Group: "actions.github.com", Version: "v1alpha1", Kind: "AutoscalingRunnerSet"}, "arc-runners", "lux-gpu-t4", map[string]any{
				"spec":   map[string]any{"runnerScaleSetLabels": []any{"self-hosted", "linux", "amd64", "cuda", "gpu", "t4"}},
				"status": map[string]any{"currentRunners": int64(0)},
			}),
			Custom(schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, "", "gpu-spot-on-demand", map[string]any{
				"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready"}}},
			}),
			Custom(schema.GroupVersionKind{Group: "actions.github.com", Version: "v1alpha1", Kind: "AutoscalingRunnerSet"}, "arc-runners", "lux-gpu-t4-on-demand", map[string]any{
				"spec":   map[string]any{"runnerScaleSetLabels": []any{"self-hosted", "linux", "amd64", "cuda", "gpu", "t4-on-demand"}},
				"status": map[string]any{"currentRunners": int64(0)},
			}),
			Custom(schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, "", "gpu-spot-container", map[string]any{
				"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready"}}},
			}),
			Custom(schema.GroupVersionKind{Group: "actions.github.com", Version: "v1alpha1", Kind: "AutoscalingRunnerSet"}, "arc-runners", "lux-gpu-t4-container", map[string]any{
				"spec":   map[string]any{"runnerScaleSetLabels": []any{"self-hosted", "linux", "amd64", "cuda", "gpu", "t4-container"}},
				"status": map[string]any{"currentRunners": int64(0)},
			}),
			ARCCRD("autoscalingrunnersets.actions.github.com", wellknown.ARCCRDFieldManager),
		},
	}
}
