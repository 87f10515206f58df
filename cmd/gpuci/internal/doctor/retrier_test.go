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
// token's last check and reach, held to the repositories the pools serve (here luxfi/app and
// luxfi/kernels): a token that reaches beyond them, or misses one, is a problem. An expired token, a retrier gone silent, or a pod that cannot start
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
		"healthy": {pod(corev1.PodRunning), `{"at":"` + recent + `","interruptions":0,"repos":0,"token":"ok","tokenChecked":"2026-12-03T11:20:00Z","tokenReach":["luxfi/app","luxfi/kernels"]}`,
			false, "GitHub took its token at 2026-12-03T11:20:00Z\nits token reaches the 2 private repositories the pools serve, and no other"},
		"a token that reaches beyond the pools": {pod(corev1.PodRunning), `{"at":"` + recent + `","interruptions":0,"repos":0,"token":"ok","tokenChecked":"2026-12-03T11:20:00Z","tokenReach":["luxfi/app","luxfi/kernels","luxfi/payroll"]}`,
			true, "its token reaches 1 private repositories no pool serves (it may dispatch their workflows and delete their logs): luxfi/payroll"},
		"a token that misses a served repository": {pod(corev1.PodRunning), `{"at":"` + recent + `","interruptions":0,"repos":0,"token":"ok","tokenChecked":"2026-12-03T11:20:00Z","tokenReach":["luxfi/app"]}`,
			true, "its token does not reach 1 repositories the pools serve, whose interrupted jobs it cannot re-run: luxfi/kernels"},
		"a token that reaches none": {pod(corev1.PodRunning), `{"at":"` + recent + `","interruptions":0,"repos":0,"token":"ok","tokenChecked":"2026-12-03T11:20:00Z","tokenReach":[]}`,
			true, "its token does not reach 2 repositories the pools serve, whose interrupted jobs it cannot re-run: luxfi/app, luxfi/kernels"},
		"token refused": {pod(corev1.PodRunning), "gpuci retry: noise\n" + `{"at":"` + recent + `","interruptions":0,"repos":0,"token":"refused: GET https://api.github.com/orgs/luxfi/repos?per_page=1: 401 Bad credentials []","tokenChecked":"2026-12-03T11:20:00Z"}`,
			true, "GitHub refused its token at 2026-12-03T11:20:00Z: GET https://api.github.com/orgs/luxfi/repos?per_page=1: 401 Bad credentials"},
		"silent": {pod(corev1.PodRunning), `{"at":"2026-12-03T11:40:00Z","interruptions":0,"repos":0,"token":"ok","tokenChecked":"2026-12-03T11:20:00Z"}`,
			true, "its last pass was at 2026-12-03T11:40:00Z, 20m0s ago"},
		"a pass that failed": {pod(corev1.PodRunning), `{"at":"` + recent + `","interruptions":0,"repos":0,"errors":["the cluster cannot be read"],"token":"ok","tokenChecked":"2026-12-03T11:20:00Z"}`,
			true, "its last pass's errors: the cluster cannot be read"},
		"an older gpuci": {pod(corev1.PodRunning), `{"at":"` + recent + `","interruptions":0,"repos":0}`,
			false, "its last pass says nothing of its token"},
		"a gpuci before the reach": {pod(corev1.PodRunning), `{"at":"` + recent + `","interruptions":0,"repos":0,"token":"ok","tokenChecked":"2026-12-03T11:20:00Z"}`,
			false, "its last pass says nothing of its token's reach"},
		"not started": {pod(corev1.PodPending), "", true, "fetch-gpuci: CrashLoopBackOff, fetch-gpuci last exited 1 (Error)"},
	} {
		t.Run(name, func(t *testing.T) {
			c := doctorCluster()
			c.Objects = append(c.Objects, tc.pod)
			kube, dyn := c.Clients()
			cfg := testkit.DevConfig(t)
			cfg.Retrier.GitHubToken = &config.Secret{}
			d := doctor.Doctor{Kube: kube, Dyn: dyn, Cfg: cfg, Now: func() time.Time { return doctorNow },
				Logs:   func(context.Context, corev1.Pod, int64) ([]byte, error) { return []byte(tc.log), nil },
				Served: func(context.Context) ([]string, error) { return []string{"luxfi/app", "luxfi/kernels"}, nil }}
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

// Without a GitHub token doctor cannot read the pools' runner groups: the reach is counted and
// said not compared, not taken for a problem.
func TestTheRetriersReachUncomparedWithoutAGitHubToken(t *testing.T) {
	recent := doctorNow.Add(-40 * time.Second).Format(time.RFC3339)
	c := doctorCluster()
	c.Objects = append(c.Objects, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "gpuci-retrier", Name: "gpuci-retrier-5d9f7-abcde",
		Labels: map[string]string{"app.kubernetes.io/name": "gpuci-retrier"}, CreationTimestamp: metav1.NewTime(doctorNow.Add(-2 * time.Hour))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	kube, dyn := c.Clients()
	cfg := testkit.DevConfig(t)
	cfg.Retrier.GitHubToken = &config.Secret{}
	log := `{"at":"` + recent + `","interruptions":0,"repos":0,"token":"ok","tokenChecked":"2026-12-03T11:20:00Z","tokenReach":["luxfi/app","luxfi/payroll"]}`
	d := doctor.Doctor{Kube: kube, Dyn: dyn, Cfg: cfg, Now: func() time.Time { return doctorNow },
		Logs: func(context.Context, corev1.Pod, int64) ([]byte, error) { return []byte(log), nil }}
	var f *doctor.Finding
	for _, x := range d.Examine(context.Background()) {
		if x.Symptom == "Spot re-runs stopped: the in-cluster retrier" {
			f = &x
		}
	}
	require.NotNil(t, f)
	assert.False(t, f.Problem, strings.Join(f.Evidence, "\n"))
	assert.Contains(t, f.Evidence, "its token reaches 2 private repositories (not compared with the pools' runner groups: GITHUB_TOKEN is not set)")
}
