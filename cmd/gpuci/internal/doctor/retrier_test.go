package doctor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/doctor"
	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// The in-cluster retrier is checked from what it prints: a pass a minute, each with its
// token's last check. An expired token, a retrier gone silent, or a pod that cannot start
// (its init container cannot fetch gpuci) is a problem; a healthy one is not. A pass that
// printed no token (a gpuci from before the check) is said so, not a problem.
func TestDoctorChecksTheRetrier(t *testing.T) {
	const symptom = "Spot re-runs stopped: the in-cluster retrier"
	recent := doctorNow.Add(-40 * time.Second).Format(time.RFC3339)
	pod := func(phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "gpuci-retrier", Name: "gpuci-retrier-5d9f7-abcde",
			Labels: map[string]string{"app.kubernetes.io/name": "gpuci-retrier"}, CreationTimestamp: metav1.NewTime(doctorNow.Add(-2 * time.Hour))},
			Status: corev1.PodStatus{Phase: phase}}
		if phase == corev1.PodPending {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "fetch-gpuci", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
		}
		return p
	}
	for name, tc := range map[string]struct {
		pod      *corev1.Pod
		log      string
		problem  bool
		evidence string
	}{
		"healthy": {pod(corev1.PodRunning), `{"at":"` + recent + `","interruptions":0,"repos":0,"token":"ok","tokenChecked":"2026-12-03T11:20:00Z"}`,
			false, "GitHub took its token at 2026-12-03T11:20:00Z"},
		"token refused": {pod(corev1.PodRunning), "gpuci retry: noise\n" + `{"at":"` + recent + `","interruptions":0,"repos":0,"token":"refused: GET https://api.github.com/orgs/luxfi/repos?per_page=1: 401 Bad credentials []","tokenChecked":"2026-12-03T11:20:00Z"}`,
			true, "GitHub refused its token at 2026-12-03T11:20:00Z: GET https://api.github.com/orgs/luxfi/repos?per_page=1: 401 Bad credentials"},
		"silent": {pod(corev1.PodRunning), `{"at":"2026-12-03T11:40:00Z","interruptions":0,"repos":0,"token":"ok","tokenChecked":"2026-12-03T11:20:00Z"}`,
			true, "its last pass was at 2026-12-03T11:40:00Z, 20m0s ago"},
		"a pass that failed": {pod(corev1.PodRunning), `{"at":"` + recent + `","interruptions":0,"repos":0,"errors":["the cluster cannot be read"],"token":"ok","tokenChecked":"2026-12-03T11:20:00Z"}`,
			true, "its last pass's errors: the cluster cannot be read"},
		"an older gpuci": {pod(corev1.PodRunning), `{"at":"` + recent + `","interruptions":0,"repos":0}`,
			false, "its last pass says nothing of its token"},
		"not started": {pod(corev1.PodPending), "", true, "fetch-gpuci: CrashLoopBackOff, fetch-gpuci last exited 1 (Error)"},
	} {
		t.Run(name, func(t *testing.T) {
			c := doctorCluster()
			c.Objects = append(c.Objects, tc.pod)
			kube, dyn := c.Clients()
			cfg := testkit.DevConfig(t)
			cfg.Retrier.GitHubToken = &config.Secret{}
			d := doctor.Doctor{Kube: kube, Dyn: dyn, Cfg: cfg, Now: func() time.Time { return doctorNow },
				Logs: func(context.Context, corev1.Pod, int64) ([]byte, error) { return []byte(tc.log), nil }}
			var f *doctor.Finding
			for _, x := range d.Examine(context.Background()) {
				if x.Symptom == symptom {
					f = &x
				}
			}
			require.NotNil(t, f, "doctor examines the retrier")
			assert.Equal(t, tc.problem, f.Problem, strings.Join(f.Evidence, "\n"))
			assert.Contains(t, strings.Join(f.Evidence, "\n"), tc.evidence)
		})
	}
}
