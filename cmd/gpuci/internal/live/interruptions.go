package live

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// SpotInterrupted is the reason of the event Karpenter records on a Node (and its NodeClaim)
// when AWS announces a spot interruption (karpenter-provider-aws pkg/controllers/interruption
// events.go).
const SpotInterrupted = "SpotInterrupted"

// jobPodName is a container-form runner's job pod: the runner pod's name cut to fit, then
// -workflow (runner-container-hooks packages/k8s/src/hooks/constants.ts getJobPodName,
// MAX_POD_NAME_LENGTH 63).
func jobPodName(runner string) string {
	const suffix = "-workflow"
	return runner[:min(len(runner), 63-len(suffix))] + suffix
}

// scheduledRE reads the scheduler's Scheduled event: "Successfully assigned <ns>/<pod> to <node>".
var scheduledRE = regexp.MustCompile(`^Successfully assigned [^/ ]+/(\S+) to (\S+)$`)

// Interruption is one spot interruption Karpenter recorded, or a GPU node the retrier took
// out of service, and the runner pods (runners, or the job pods of container-form runners)
// that had been placed on the node before it.
type Interruption struct {
	Node    string
	At      time.Time
	Message string
	Pods    []string
	// Cause is SpotInterrupted or GPUOutOfService.
	Cause string
}

// outOfServiceLag is how long after a job ended the retrier may take its node out of service
// for the GPU that failed it: the device plugin's report, the kubelet's next status (10 s),
// and the retrier's next pass (RetrierSweepEvery, a minute), with room. A job's failure in
// that time on a node whose GPU was found broken is counted as the GPU's, and re-run once.
const outOfServiceLag = 3 * time.Minute

// placement is where a pod ran, since when.
type placement struct {
	node  string
	since time.Time
}

// Interruptions is what the cluster's events say of recent spot interruptions and of where
// the runners' pods ran. Kubernetes keeps events about an hour, so the cluster can only vouch
// for what is recent.
type Interruptions struct {
	Events []Interruption
	placed map[string]placement // pod name → where it ran
}

// ReadInterruptions reads Karpenter's SpotInterrupted events on Nodes (a cluster-scoped
// object's events are recorded in "default") and the scheduler's Scheduled events of the
// pods in podNamespaces (where the pools' runner and job pods run: config.RunnerPodNamespaces).
// Events only, never a pod: a container-form job's pod carries the job's container.env in its
// spec, so an account that reads pods reads other repositories' secrets. This is all the retry
// runner's account may read (k8s.RetryReaderRules).
func ReadInterruptions(ctx context.Context, kube kubernetes.Interface, podNamespaces []string) (*Interruptions, error) {
	events := &corev1.EventList{}
	for _, ns := range append([]string{metav1.NamespaceDefault}, podNamespaces...) {
		list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading the events in namespace %s: %w", ns, err)
		}
		events.Items = append(events.Items, list.Items...)
	}
	in := &Interruptions{placed: map[string]placement{}}
	for _, e := range events.Items {
		if e.Reason != "Scheduled" || e.InvolvedObject.Kind != "Pod" || !slices.Contains(podNamespaces, e.InvolvedObject.Namespace) || !reportedBy(e, schedulerReporter) {
			continue
		}
		if m := scheduledRE.FindStringSubmatch(strings.TrimSpace(e.Message)); m != nil && m[1] == e.InvolvedObject.Name {
			in.placed[m[1]] = placement{node: m[2], since: EventTime(e)}
		}
	}
	for _, e := range events.Items {
		spot := e.Reason == SpotInterrupted && reportedBy(e, karpenterReporter)
		gpu := e.Reason == GPUOutOfService && reportedBy(e, RetrierReporter)
		if e.InvolvedObject.Kind != "Node" || !spot && !gpu {
			continue
		}
		i := Interruption{Node: e.InvolvedObject.Name, At: EventTime(e).UTC(), Message: e.Message, Cause: e.Reason}
		for _, pod := range slices.Sorted(maps.Keys(in.placed)) {
			if at := in.placed[pod]; at.node == i.Node && !i.At.Before(at.since.Truncate(time.Second)) {
				i.Pods = append(i.Pods, pod)
			}
		}
		in.Events = append(in.Events, i)
	}
	return in, nil
}

// Who records the events the cluster's evidence rests on: Karpenter's controllers, through
// controller-runtime's recorder named "karpenter" (sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/controllers.go:145-188, mgr.GetEventRecorderFor), and the scheduler
// (kube-scheduler's profile name, "default-scheduler"), and the in-cluster retrier
// (RetrierReporter, its GPUOutOfService). An event anyone else wrote — an
// account that may create events in "default" or in a runners' namespace — is not evidence.
const (
	karpenterReporter = "karpenter"
	schedulerReporter = "default-scheduler"
)

// reportedBy tells whether e was recorded by component: the core/v1 recorder's source, or
// the events.k8s.io API's reporting controller.
func reportedBy(e corev1.Event, component string) bool {
	return e.Source.Component == component || e.ReportingController == component
}

// EventTime is when an event last happened: its last timestamp, else its event time (the
// events.k8s.io API's), else its first timestamp.
func EventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// Runner is what the cluster knows of the runner GitHub names (ARC's runner name is its pod's
// name): known when it knows where the runner's pod, or its job pod, ran; interrupted when
// that node had a spot interruption after the pod was placed there (node names, from private
// IPs, are reused) and while the job ran (from started to completed, GitHub's times of the
// job; a zero time leaves that side open): an interruption after the job ended did not end it.
// A node taken out of service for a broken GPU is seen after the job it failed ended, so it
// counts up to outOfServiceLag after. The evidence says which pod, node and event.
func (in *Interruptions) Runner(name string, started, completed time.Time) (evidence string, known bool, cause string) {
	during := func(e Interruption) bool {
		end := completed
		if e.Cause == GPUOutOfService && !end.IsZero() {
			end = end.Add(outOfServiceLag)
		}
		return (started.IsZero() || !e.At.Before(started.Truncate(time.Second))) && (end.IsZero() || !e.At.After(end))
	}
	for _, pod := range []string{name, jobPodName(name)} {
		at, ok := in.placed[pod]
		if !ok {
			continue
		}
		known = true
		for _, e := range in.Events {
			if e.Node == at.node && !e.At.Before(at.since.Truncate(time.Second)) && during(e) {
				what := "spot-interrupted"
				if e.Cause == GPUOutOfService {
					what = "taken out of service for a broken GPU"
				}
				return fmt.Sprintf("cluster: pod %s was on node %s, %s at %s (%s)", pod, at.node, what, e.At.Format(time.RFC3339), strings.TrimSpace(e.Message)), true, e.Cause
			}
		}
		evidence = fmt.Sprintf("cluster: pod %s ran on node %s, which had no spot interruption and no broken GPU while the job ran", pod, at.node)
	}
	if !known {
		evidence = fmt.Sprintf("cluster: no event left of pod %s or %s (the cluster keeps its events about an hour)", name, jobPodName(name))
	}
	return evidence, known, ""
}

// Interrupted lists when each spot interruption (and node taken out of service) the cluster
// still knows of happened: what starts an in-cluster retrier's pass (retry.Sweep).
func (in *Interruptions) Interrupted() []time.Time {
	var at []time.Time
	for _, e := range in.Events {
		at = append(at, e.At)
	}
	return at
}
