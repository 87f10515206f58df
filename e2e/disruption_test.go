//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// assertJobsSurviveADrain stands in for a managed node group update draining a system node
// while a container-form runner holds a job there: a runner pod as ARC would create it (the
// pool's label), Running and Ready on a system node; the API server's eviction API, which a
// drain uses, and the real disruption controller (kube-controller-manager) with the stack's
// PodDisruptionBudget. The eviction is refused; a direct delete (ARC ending the job) is not.
func assertJobsSurviveADrain(t *testing.T, ctx context.Context, restCfg *rest.Config) {
	core, err := kubernetes.NewForConfig(restCfg)
	require.NoError(t, err)
	pods := core.CoreV1().Pods(wellknown.RunnersNamespace)
	runner, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "lux-gpu-t4-container-e2e-runner-x", Labels: map[string]string{wellknown.PoolLabel: "gpu-spot-container"}},
		Spec:       corev1.PodSpec{NodeName: "system-1", Containers: []corev1.Container{{Name: "runner", Image: "runner"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	defer func() {
		_ = pods.Delete(context.Background(), runner.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}()
	runner.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	_, err = pods.UpdateStatus(ctx, runner, metav1.UpdateOptions{})
	require.NoError(t, err)

	// The disruption controller counts the running job.
	pdbs := core.PolicyV1().PodDisruptionBudgets(wellknown.RunnersNamespace)
	require.Eventually(t, func() bool {
		pdb, err := pdbs.Get(ctx, k8s.RunningJobsBudget, metav1.GetOptions{})
		return err == nil && pdb.Status.ObservedGeneration >= pdb.Generation && pdb.Status.CurrentHealthy == 1 && pdb.Status.ExpectedPods == 1
	}, time.Minute, 500*time.Millisecond, "the disruption controller sees the runner under the stack's budget")

	err = pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: runner.Name, Namespace: wellknown.RunnersNamespace}})
	require.Error(t, err, "a drain must not evict a runner that holds a job")
	assert.True(t, apierrors.IsTooManyRequests(err), "refused by the disruption budget: %v", err)
	_, err = pods.Get(ctx, runner.Name, metav1.GetOptions{})
	assert.NoError(t, err, "the runner is still there")
}
