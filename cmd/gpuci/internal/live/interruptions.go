package live

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// SpotInterrupted is the reason of the event Karpenter records on a Node (and its NodeClaim)
// when AWS announces a spot interruption (karpenter-provider-aws pkg/controllers/interruption
// events.go).
const SpotInterrupted = "SpotInterrupted"

// jobPodName is a container-form runner's job pod: the runner pod's name cut to fit, then
// -workflow (runner-container-hooks packages/k8s/src/hooks/constants.ts getJobPodName,
// MAX_POD_NAME_LENGTH 63). The hooks also label their pods runner-pod=<runner pod>.
func jobPodName(runner string) string {
	const suffix = "-workflow"
	return runner[:min(len(runner), 63-len(suffix))] + suffix
}

const runnerPodLabel = "runner-pod"

// scheduledRE reads the scheduler's Scheduled event: "Successfully assigned <ns>/<pod> to <node>".
var scheduledRE = regexp.MustCompile(`^Successfully assigned [^/ ]+/(\S+) to (\S+)$`)

// Interruption is one spot interruption Karpenter recorded, and the runner pods (runners, or
// the job pods of container-form runners) that were on the node then.
type Interruption struct {
	Node    string
	At      time.Time
	Message string
	Pods    []string
}

// placement is where a pod ran, since when.
type placement struct {
	node  string
	since time.Time
}

// Interruptions is what the cluster knows of recent spot interruptions and of where the
// runners' pods ran. A runner's pods are deleted once its job ends (and with their node), so
// their placement comes from the pods still there and from the scheduler's Scheduled events;
// Kubernetes keeps events about an hour, so the cluster can only vouch for what is recent.
type Interruptions struct {
	Events []Interruption
	placed map[string]placement // pod name → where it ran
	jobOf  map[string][]string  // runner pod → the hooks' pods labelled for it
}

// ReadInterruptions reads Karpenter's SpotInterrupted events on Nodes, the pods in the
// runners' namespace and the Scheduled events of the pods that were there. It reads only
// those two namespaces (a Node's events are recorded in "default"), which is all the retry
// runner's account may read (k8s.RetryReaderRules).
func ReadInterruptions(ctx context.Context, kube kubernetes.Interface) (*Interruptions, error) {
	events := &corev1.EventList{}
	for _, ns := range []string{metav1.NamespaceDefault, wellknown.RunnersNamespace} {
		list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading the events in namespace %s: %w", ns, err)
		}
		events.Items = append(events.Items, list.Items...)
	}
	pods, err := kube.CoreV1().Pods(wellknown.RunnersNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the runners' pods: %w", err)
	}
	in := &Interruptions{placed: map[string]placement{}, jobOf: map[string][]string{}}
	for _, e := range events.Items {
		if e.Reason != "Scheduled" || e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Namespace != wellknown.RunnersNamespace {
			continue
		}
		if m := scheduledRE.FindStringSubmatch(strings.TrimSpace(e.Message)); m != nil && m[1] == e.InvolvedObject.Name {
			in.placed[m[1]] = placement{node: m[2], since: eventTime(e)}
		}
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			in.placed[p.Name] = placement{node: p.Spec.NodeName, since: scheduledAt(p)}
		}
		if r := p.Labels[runnerPodLabel]; r != "" {
			in.jobOf[r] = append(in.jobOf[r], p.Name)
		}
	}
	for _, e := range events.Items {
		if e.Reason != SpotInterrupted || e.InvolvedObject.Kind != "Node" {
			continue
		}
		i := Interruption{Node: e.InvolvedObject.Name, At: eventTime(e).UTC(), Message: e.Message}
		for _, p := range pods.Items {
			if p.Spec.NodeName == i.Node && !i.At.Before(scheduledAt(p).Truncate(time.Second)) {
				i.Pods = append(i.Pods, p.Name)
			}
		}
		in.Events = append(in.Events, i)
	}
	return in, nil
}

// scheduledAt is when a pod was bound to its node (its PodScheduled condition), else when it
// was created.
func scheduledAt(p corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return p.CreationTimestamp.Time
}

func eventTime(e corev1.Event) time.Time {
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
// The evidence says which pod, node and event.
func (in *Interruptions) Runner(name string, started, completed time.Time) (evidence string, known, interrupted bool) {
	during := func(at time.Time) bool {
		return (started.IsZero() || !at.Before(started.Truncate(time.Second))) && (completed.IsZero() || !at.After(completed))
	}
	candidates := append([]string{name, jobPodName(name)}, in.jobOf[name]...)
	for _, pod := range candidates {
		at, ok := in.placed[pod]
		if !ok {
			continue
		}
		known = true
		for _, e := range in.Events {
			if e.Node == at.node && !e.At.Before(at.since.Truncate(time.Second)) && during(e.At) {
				return fmt.Sprintf("cluster: pod %s was on node %s, spot-interrupted at %s (%s)", pod, at.node, e.At.Format(time.RFC3339), strings.TrimSpace(e.Message)), true, true
			}
		}
		evidence = fmt.Sprintf("cluster: pod %s ran on node %s, which had no spot interruption while the job ran", pod, at.node)
	}
	if !known {
		evidence = fmt.Sprintf("cluster: nothing left of pod %s or %s (pods and events are gone)", name, jobPodName(name))
	}
	return evidence, known, false
}
