package live

import (
	"context"
	"fmt"
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

// jobPodSuffix names a container-form runner's job pod: <runner pod>-workflow
// (runner-container-hooks packages/k8s/src/hooks/constants.ts getJobPodName).
const jobPodSuffix = "-workflow"

// Interruption is one spot interruption Karpenter recorded, and the runner pods (runners, or
// the job pods of container-form runners) that were on the node then.
type Interruption struct {
	Node    string
	At      time.Time
	Message string
	Pods    []string
}

// Interruptions is what the cluster knows of recent spot interruptions. Kubernetes keeps
// events about an hour, and a runner's pods go once its job ends, so it can only vouch for
// what is recent and still there.
type Interruptions struct {
	Events []Interruption
	// nodeOf maps each pod in the runners' namespace to its node.
	nodeOf map[string]string
}

// ReadInterruptions reads Karpenter's SpotInterrupted events on Nodes and the pods in the
// runners' namespace.
func ReadInterruptions(ctx context.Context, kube kubernetes.Interface) (*Interruptions, error) {
	events, err := kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading events: %w", err)
	}
	pods, err := kube.CoreV1().Pods(wellknown.RunnersNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the runners' pods: %w", err)
	}
	in := &Interruptions{nodeOf: map[string]string{}}
	for _, p := range pods.Items {
		in.nodeOf[p.Name] = p.Spec.NodeName
	}
	for _, e := range events.Items {
		if e.Reason != SpotInterrupted || e.InvolvedObject.Kind != "Node" {
			continue
		}
		i := Interruption{Node: e.InvolvedObject.Name, At: eventTime(e).UTC(), Message: e.Message}
		for _, p := range pods.Items {
			if p.Spec.NodeName == i.Node {
				i.Pods = append(i.Pods, p.Name)
			}
		}
		in.Events = append(in.Events, i)
	}
	return in, nil
}

func eventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}

// Runner is what the cluster knows of the runner GitHub names (ARC's runner name is its pod's
// name): known when its pod, or its job pod, is still there; interrupted when that pod's node
// had a spot interruption. The evidence says which pod, node and event.
func (in *Interruptions) Runner(name string) (evidence string, known, interrupted bool) {
	for _, pod := range []string{name, name + jobPodSuffix} {
		node, ok := in.nodeOf[pod]
		if !ok {
			continue
		}
		known = true
		for _, e := range in.Events {
			if e.Node == node {
				return fmt.Sprintf("cluster: pod %s was on node %s, spot-interrupted at %s (%s)", pod, node, e.At.Format(time.RFC3339), strings.TrimSpace(e.Message)), true, true
			}
		}
		evidence = fmt.Sprintf("cluster: pod %s is on node %s, which had no spot interruption", pod, node)
	}
	if !known {
		evidence = fmt.Sprintf("cluster: no pod %s or %s%s any more", name, name, jobPodSuffix)
	}
	return evidence, known, false
}
