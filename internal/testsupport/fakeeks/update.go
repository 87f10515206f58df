package fakeeks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// What EKS marks an old node with at the start of an update: the taint that keeps new pods
// off it, and the label that takes it out of external load balancers.
const (
	UnschedulableTaintKey = "eks.amazonaws.com/nodegroup"
	ExcludeFromLBLabel    = "node.kubernetes.io/exclude-from-external-load-balancers"
)

// UnschedulableTaint is eks.amazonaws.com/nodegroup=unschedulable:NoSchedule.
var UnschedulableTaint = corev1.Taint{Key: UnschedulableTaintKey, Value: "unschedulable", Effect: corev1.TaintEffectNoSchedule}

// UpdateError is a failed update's error detail, as DescribeUpdate gives it (errorCode,
// errorMessage, resourceIds).
type UpdateError struct {
	Code, Message string
	ResourceIDs   []string
}

// Error is terraform-provider-aws's rendering of the detail (errorDetailsError).
func (e *UpdateError) Error() string {
	return fmt.Sprintf("%s: %s: %s", strings.Join(e.ResourceIDs, ", "), e.Code, e.Message)
}

// Update is UpdateNodegroupVersion, run to its end as the provider waits for it. The rules are
// EKS's "managed node update behavior" (docs.aws.amazon.com/eks/latest/userguide/
// managed-node-update-behavior.html):
//
//  1. scale up: new nodes launched from the new configuration, so that the group has its
//     desired size of them (EKS launches up to twice its zones' count and scales back at
//     the end; the fake launches what it keeps);
//  2. every old node (not launched from the new configuration: a node a failed update
//     already replaced is spared) tainted eks.amazonaws.com/nodegroup=unschedulable:NoSchedule,
//     so no new pod lands there, and labelled to leave external load balancers;
//  3. the old nodes drained one at a time (maxUnavailable 1, the default; EKS picks at
//     random, the fake by name): every pod but DaemonSets' and finished ones is evicted
//     through the eviction API, retried while a PodDisruptionBudget refuses, until it is
//     gone; then the node is cordoned and its instance terminates (its Node goes; the pod
//     garbage collector takes what was left on it). A drain that has not ended within
//     evictionTimeout (EKS: 15 minutes) fails the update with PodEvictionFailure, unless
//     Force, which deletes the pods it could not evict;
//  4. a failed update leaves everything as it is: the new nodes, the old ones tainted, the
//     pods a drain could not move where they are. The next update goes on from there.
//
// Not modelled: the 60 s EKS waits after cordoning a drained node (the e2e's time budget).
func Update(ctx context.Context, core kubernetes.Interface, g NodeGroup, evictionTimeout time.Duration) error {
	nodes, err := Nodes(ctx, core, g.Name)
	if err != nil {
		return err
	}
	var old []corev1.Node
	current := 0
	for _, n := range nodes {
		if n.Annotations[LaunchAnnotation] == g.LaunchedFrom {
			current++
		} else {
			old = append(old, n)
		}
	}
	if len(old) == 0 {
		return nil
	}
	if missing := g.DesiredSize - current; missing > 0 {
		if _, err := Launch(ctx, core, g, missing); err != nil {
			return fmt.Errorf("fakeeks: scaling up %s: %w", g.Name, err)
		}
	}
	for _, n := range old {
		if err := markOld(ctx, core, n.Name); err != nil {
			return err
		}
	}
	for _, n := range old {
		left, err := drain(ctx, core, n.Name, evictionTimeout)
		if err != nil {
			return err
		}
		if len(left) > 0 && !g.Force {
			return &UpdateError{Code: "PodEvictionFailure", Message: "Reached max retries while trying to evict pods from nodes in node group " + g.Name, ResourceIDs: []string{n.Name}}
		}
		for _, p := range left {
			if err := core.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		if err := cordon(ctx, core, n.Name); err != nil {
			return err
		}
		if err := core.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// markOld taints an old node and takes it out of external load balancers.
func markOld(ctx context.Context, core kubernetes.Interface, name string) error {
	return updateNode(ctx, core, name, func(n *corev1.Node) {
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&UnschedulableTaint) }) {
			n.Spec.Taints = append(n.Spec.Taints, UnschedulableTaint)
		}
		n.Labels[ExcludeFromLBLabel] = "true"
	})
}

// cordon marks a drained node unschedulable, before its instance goes.
func cordon(ctx context.Context, core kubernetes.Interface, name string) error {
	return updateNode(ctx, core, name, func(n *corev1.Node) { n.Spec.Unschedulable = true })
}

func updateNode(ctx context.Context, core kubernetes.Interface, name string, change func(n *corev1.Node)) error {
	nodes := core.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// drain evicts the node's pods until none is left, or the timeout ends; it returns the pods
// still there then. An error is one of the API server's, not a refused eviction.
func drain(ctx context.Context, core kubernetes.Interface, node string, timeout time.Duration) ([]corev1.Pod, error) {
	deadline := time.Now().Add(timeout)
	for {
		pods, err := core.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return nil, err
		}
		var left []corev1.Pod
		for _, p := range pods.Items {
			if !drained(&p) {
				continue
			}
			left = append(left, p)
			if p.DeletionTimestamp != nil {
				continue // evicted, its containers stopping
			}
			err := core.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
			// 429: a budget refuses it for now; 500: more than one budget selects it.
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsTooManyRequests(err) && !apierrors.IsInternalError(err) {
				return nil, fmt.Errorf("evicting %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// drained: a drain moves the pod (kubectl drain's rules, which EKS's follow): not a
// DaemonSet's, which stays with its node, and not one that has finished.
func drained(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return false
		}
	}
	return true
}
