package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/retry"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// retrierSilentAfter is how long the in-cluster retrier may go without printing a pass (it
// prints one a minute: k8s.RetrierSweepEvery) before doctor says it stopped.
const retrierSilentAfter = 5 * time.Minute

// retrierHealth: the in-cluster retrier's pod runs, its last pass is recent, and GitHub took
// its token at the last check (hourly: retry.Sweep.CheckToken). A retrier whose token expired
// re-runs nothing, and no job says so; nor does a pod that cannot fetch its gpuci.
func (d Doctor) retrierHealth(ctx context.Context) Finding {
	f := Finding{Symptom: "Spot re-runs stopped: the in-cluster retrier", Fix: "a refused token: make a new fine-grained token (docs/operations.md, \"With nothing in any repository\"), printf %s \"$TOKEN\" | pulumi config set --secret retrierGitHubToken, pulumi up; a token that reaches too much or too little: in its settings, Repository access → Only select repositories, the ones the pools serve; a pod that does not run: kubectl -n " + wellknown.RetrierNamespace + " describe pod (its init container fetches gpuci from the stack's bucket)"}
	if !d.Cfg.Retrier.Enabled() {
		f.Evidence = append(f.Evidence, "not configured (retrierGitHubToken unset): nothing to check")
		return f
	}
	pods, err := d.Kube.CoreV1().Pods(wellknown.RetrierNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + wellknown.RetrierName})
	if err != nil {
		f.Problem = true
		f.Evidence = append(f.Evidence, "reading the retrier's pods: "+err.Error())
		return f
	}
	var running *corev1.Pod
	for i, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = &pods.Items[i]
		}
	}
	if running == nil {
		f.Problem = true
		f.Evidence = append(f.Evidence, fmt.Sprintf("no running pod of %s/%s (%d pod(s))", wellknown.RetrierNamespace, wellknown.RetrierName, len(pods.Items)))
		for _, p := range pods.Items {
			f.Evidence = append(f.Evidence, fmt.Sprintf("pod %s: %s %s", p.Name, p.Status.Phase, waiting(p)))
		}
		return f
	}
	raw, err := d.logs(ctx, *running, 20)
	if err != nil {
		f.Problem = true
		f.Evidence = append(f.Evidence, "reading its log: "+err.Error())
		return f
	}
	var last *retry.Pass
	for _, line := range strings.Split(string(raw), "\n") {
		var p retry.Pass
		if json.Unmarshal([]byte(line), &p) == nil && !p.At.IsZero() {
			last = &p
		}
	}
	if last == nil {
		f.Problem = d.Now().Sub(running.CreationTimestamp.Time) > retrierSilentAfter
		f.Evidence = append(f.Evidence, "pod "+running.Name+": no pass in its last 20 log lines")
		return f
	}
	if ago := d.Now().Sub(last.At); ago > retrierSilentAfter {
		f.Problem = true
		f.Evidence = append(f.Evidence, fmt.Sprintf("pod %s: its last pass was at %s, %s ago", running.Name, last.At.Format(time.RFC3339), ago.Round(time.Second)))
	} else {
		f.Evidence = append(f.Evidence, fmt.Sprintf("pod %s: last pass at %s (%d interruption(s) in the cluster's events)", running.Name, last.At.Format(time.RFC3339), last.Interruptions))
	}
	if len(last.Errors) > 0 {
		f.Problem = true
		f.Evidence = append(f.Evidence, "its last pass's errors: "+strings.Join(last.Errors, "; "))
	}
	switch {
	case strings.HasPrefix(last.Token, retry.TokenRefused):
		f.Problem = true
		f.Evidence = append(f.Evidence, fmt.Sprintf("GitHub refused its token at %s: %s", last.TokenChecked.Format(time.RFC3339), strings.TrimPrefix(last.Token, retry.TokenRefused)))
	case last.Token == "":
		f.Evidence = append(f.Evidence, "its last pass says nothing of its token (a gpuci before the check)")
	default:
		f.Evidence = append(f.Evidence, fmt.Sprintf("GitHub took its token at %s", last.TokenChecked.Format(time.RFC3339)))
		d.tokenReach(ctx, &f, last.TokenReach)
	}
	return f
}

// tokenReach holds the retrier token's reach (the private repositories it could see at its
// last check) to the repositories the pools serve: one it reaches beyond them is a repository
// whose workflows it may dispatch and whose logs it may delete for nothing; one it misses is
// a repository whose interrupted jobs it cannot re-run.
func (d Doctor) tokenReach(ctx context.Context, f *Finding, reach []string) {
	if reach == nil {
		f.Evidence = append(f.Evidence, "its last pass says nothing of its token's reach (a gpuci before the check)")
		return
	}
	if d.Served == nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("its token reaches %d private repositories (not compared with the pools' runner groups: GITHUB_TOKEN is not set)", len(reach)))
		return
	}
	served, err := d.Served(ctx)
	if err != nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("its token reaches %d private repositories (not compared: the pools' runner groups cannot be read: %v)", len(reach), err))
		return
	}
	beyond := slices.DeleteFunc(slices.Clone(reach), func(r string) bool { return slices.Contains(served, r) })
	missed := slices.DeleteFunc(slices.Clone(served), func(r string) bool { return slices.Contains(reach, r) })
	if len(beyond) > 0 {
		f.Problem = true
		f.Evidence = append(f.Evidence, fmt.Sprintf("its token reaches %d private repositories no pool serves (it may dispatch their workflows and delete their logs): %s", len(beyond), strings.Join(beyond, ", ")))
	}
	if len(missed) > 0 {
		f.Problem = true
		f.Evidence = append(f.Evidence, fmt.Sprintf("its token does not reach %d repositories the pools serve, whose interrupted jobs it cannot re-run: %s", len(missed), strings.Join(missed, ", ")))
	}
	if len(beyond)+len(missed) == 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("its token reaches the %d private repositories the pools serve, and no other", len(served)))
	}
}

// waiting says why a pod's containers wait (an init container's included).
func waiting(p corev1.Pod) string {
	var out []string
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := s.State.Waiting; w != nil {
			out = append(out, s.Name+": "+w.Reason)
		}
		if t := s.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
			out = append(out, fmt.Sprintf("%s last exited %d (%s)", s.Name, t.ExitCode, t.Reason))
		}
	}
	return strings.Join(out, ", ")
}
