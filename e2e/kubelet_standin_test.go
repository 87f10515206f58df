//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeeks"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// kubeletStandIn is what the kubelets of the stack's nodes would do, as far as the control
// plane can see it. There is no container runtime; everything else about a pod (where it is
// placed, whether it may stay, when it goes) is the real scheduler's, the real Karpenter's and
// the real DaemonSet controller's.
//
//   - A system node: registered by EKS's stand-in (internal/testsupport/fakeeks), when the
//     e2e starts the node group's nodes and when the fake AWS rolls them; this heartbeats it
//     and runs its pods.
//   - A GPU node: once Karpenter has launched an instance for a NodeClaim (its providerID is
//     set), a Node registers for it as the kubelet does from the user data Karpenter writes:
//     the NodeClaim's labels, its taints and startup taints, Karpenter's
//     karpenter.sh/unregistered taint, and the instance type's capacity — except the GPUs,
//     which a kubelet reports only once the NVIDIA device plugin runs on the node and
//     registers them (k8s-device-plugin's ListAndWatch). So no GPU job schedules on a node
//     the device plugin does not reach.
//   - A GPU the device plugin withdraws (withdrawGPU: a critical XID) stays in the node's
//     capacity and leaves its allocatable, as the kubelet reports a plugin's unhealthy devices
//     (live.WithdrawnGPUs cites both).
//   - A pod bound to one of these nodes is marked Running, and Ready unless its readiness
//     asks whether it runs a job (probesAJob); a container told only to exit 0 has exited 0.
//     A pod asked to go (deletion timestamp set) is given its final phase and removed, as the
//     kubelet does once its containers stop (runPods says how each exits).
//   - A container whose command is a shell, in an image that has none (imagesWithoutShell),
//     cannot start: containerd reports it terminated, StartError, exit code 128 (containerd
//     v2.1 internal/cri/server/helpers.go errorStartReason, errorStartExitCode). An init
//     container that cannot start fails its pod (restartPolicy Never: kubelet
//     pkg/kubelet/kubelet_pods.go getPhase at v1.36.3, failedInitialization); a container
//     that cannot start ends alone, and the pod is Running while another runs (getPhase).
type kubeletStandIn struct {
	core kubernetes.Interface
	kube dynamic.Interface

	mu        sync.Mutex
	withdrawn map[string]int64 // node → GPUs its device plugin withdrew as unhealthy
}

func newKubeletStandIn(core kubernetes.Interface, kube dynamic.Interface) *kubeletStandIn {
	return &kubeletStandIn{core: core, kube: kube, withdrawn: map[string]int64{}}
}

// withdrawGPU is a critical XID on one of node's GPUs: NVIDIA's device plugin sends it to the
// kubelet as Unhealthy, for good (k8s-device-plugin v0.19.3 internal/plugin/server.go:276-280),
// and the kubelet's next status has it in capacity, not in allocatable.
func (k *kubeletStandIn) withdrawGPU(node string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.withdrawn[node]++
}

// Run reconciles until ctx ends.
func (k *kubeletStandIn) Run(ctx context.Context) {
	var renewed time.Time
	for ctx.Err() == nil {
		k.registerGPUNodes(ctx)
		k.runPods(ctx)
		if time.Since(renewed) > 5*time.Second {
			k.heartbeat(ctx)
			renewed = time.Now()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (k *kubeletStandIn) registerGPUNodes(ctx context.Context) {
	list, err := k.kube.Resource(nodeClaims).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	nodes, err := k.core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	byProvider := map[string]*corev1.Node{}
	for i := range nodes.Items {
		byProvider[nodes.Items[i].Spec.ProviderID] = &nodes.Items[i]
	}
	for _, u := range list.Items {
		var nc karpv1.NodeClaim
		// Karpenter writes the instance's ID and its capacity once it is launched; a kubelet
		// starts only then (it reads its capacity from the machine, here from the NodeClaim).
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc) != nil || nc.Status.ProviderID == "" ||
			nc.Status.Allocatable.Pods().IsZero() || nc.DeletionTimestamp != nil {
			continue
		}
		node, ok := byProvider[nc.Status.ProviderID]
		if !ok {
			_ = k.register(ctx, &nc)
			continue
		}
		// The kubelet's status: the machine's capacity (written again if a first write lost a
		// race with a controller), and the GPUs once a device plugin runs there: the stack's
		// DaemonSet on AL2023, the OS's own on Bottlerocket's NVIDIA variant, which runs NVIDIA's
		// device plugin as a host service from boot (its nvidia-k8s-device-plugin package; the
		// stack's keeps off those nodes, wellknown.NodeOSLabel).
		want := nc.Status.Capacity[wellknown.GPUResource]
		have := node.Status.Allocatable[wellknown.GPUResource]
		k.mu.Lock()
		withdrawn := min(k.withdrawn[node.Name], want.Value())
		k.mu.Unlock()
		healthy := *resource.NewQuantity(want.Value()-withdrawn, resource.DecimalSI)
		plugin := node.Labels[wellknown.NodeOSLabel] == config.NodeOSBottlerocket || k.devicePluginRunsOn(ctx, node.Name)
		gpus := !want.IsZero() && plugin && (have.IsZero() && withdrawn == 0 || withdrawn > 0 && have.Cmp(healthy) != 0)
		if node.Status.Allocatable.Pods().IsZero() || gpus {
			capacity, allocatable := machineCapacity(&nc)
			if gpus || !have.IsZero() {
				capacity[wellknown.GPUResource], allocatable[wellknown.GPUResource] = want, healthy
			}
			_ = k.ready(ctx, node, capacity, allocatable)
		}
	}
}

// register is the kubelet's first start on an instance Karpenter launched.
func (k *kubeletStandIn) register(ctx context.Context, nc *karpv1.NodeClaim) error {
	name := nodeNameFor(nc)
	labels := map[string]string{corev1.LabelHostname: name}
	for key, v := range nc.Labels {
		labels[key] = v
	}
	taints := append(append([]corev1.Taint{}, nc.Spec.Taints...), nc.Spec.StartupTaints...)
	taints = append(taints, karpv1.UnregisteredNoExecuteTaint)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: nc.Status.ProviderID, Taints: taints},
	}
	created, err := k.core.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	capacity, allocatable := machineCapacity(nc)
	return k.ready(ctx, created, capacity, allocatable)
}

// machineCapacity is what a kubelet reports before any device plugin registers: the
// instance type's capacity as Karpenter computed it, without the GPUs.
func machineCapacity(nc *karpv1.NodeClaim) (capacity, allocatable corev1.ResourceList) {
	capacity, allocatable = nc.Status.Capacity.DeepCopy(), nc.Status.Allocatable.DeepCopy()
	delete(capacity, wellknown.GPUResource)
	delete(allocatable, wellknown.GPUResource)
	return capacity, allocatable
}

// nodeNameFor names a GPU node after its instance, as EKS names nodes after the instance's
// private DNS name.
func nodeNameFor(nc *karpv1.NodeClaim) string {
	return "ip-" + instanceID(nc)
}

// instanceID is the EC2 instance of a launched NodeClaim (its provider ID is
// aws:///<zone>/<instance>).
func instanceID(nc *karpv1.NodeClaim) string {
	return nc.Status.ProviderID[strings.LastIndex(nc.Status.ProviderID, "/")+1:]
}

// ready is the kubelet's status once it runs: a GPU node's, from the AMI the e2e pins (1.35's,
// which a kubernetesVersion bump does not move here: see docs/operations.md › Upgrading).
func (k *kubeletStandIn) ready(ctx context.Context, node *corev1.Node, capacity, allocatable corev1.ResourceList) error {
	return fakeeks.MarkReady(ctx, k.core, node.Name, capacity, allocatable, "v1.35.0")
}

// heartbeat renews each node's Lease, as the kubelet does every 10 s (a quarter of the
// 40 s lease): kube-controller-manager's node lifecycle controller lifts the not-ready taint
// of a node whose kubelet beats and reports Ready, and taints (then evicts) one whose beat stops.
func (k *kubeletStandIn) heartbeat(ctx context.Context) {
	nodes, err := k.core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	leases := k.core.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	for _, n := range nodes.Items {
		now := metav1.NewMicroTime(time.Now())
		lease, err := leases.Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: n.Name, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &n.Name, LeaseDurationSeconds: new(int32(40)), RenewTime: &now},
			}, metav1.CreateOptions{})
		} else if err == nil {
			lease.Spec.RenewTime = &now
			_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			fmt.Printf("kubelet stand-in: lease of %s: %v\n", n.Name, err)
		}
	}
}

func (k *kubeletStandIn) devicePluginRunsOn(ctx context.Context, node string) bool {
	pods, err := k.core.CoreV1().Pods(wellknown.DevicePluginNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return false
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return true
		}
	}
	return false
}

// probesAJob: a container-form runner's readiness probe asks whether it runs a job
// (k8s.RunnerBusyProbe); the stand-in runs no process, so such a pod starts not Ready, as a
// kubelet reports a container before its readiness probe first succeeds (its initial result
// is Failure: pkg/kubelet/prober/worker.go:113-116 at v1.36.3; and this probe fails while the
// runner waits), and runnerTakesJob reports the probe's success once a job starts.
// Every other pod is Ready once it runs.
func probesAJob(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if c.ReadinessProbe != nil && equality.Semantic.DeepEqual(c.ReadinessProbe.Exec, k8s.RunnerBusyProbe().Exec) {
			return true
		}
	}
	return false
}

func conditionStatus(b bool) corev1.ConditionStatus {
	if b {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

// runPods starts the pods bound to these nodes and finishes the ones asked to go.
func (k *kubeletStandIn) runPods(ctx context.Context) {
	nodes, err := k.core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	known := map[string]bool{}
	for _, n := range nodes.Items {
		known[n.Name] = true
	}
	pods, err := k.core.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !known[p.Spec.NodeName] {
			continue
		}
		switch {
		case p.DeletionTimestamp != nil:
			// A kubelet stops a deleted pod's containers, then reports its phase, before it
			// removes the pod: a controller waits for that phase (the Job controller keeps its
			// finalizer on a pod until the pod is terminal, pkg/controller/job at v1.36.3). The
			// stand-in runs no process: a running container exits as one without a SIGTERM
			// handler does (143), unless its shell traps TERM to exit 0 (stopsCleanly: a warm
			// placeholder's hold); one that had ended keeps its exit. The pod is Succeeded if
			// every container exited 0, else Failed (pkg/kubelet/kubelet_pods.go getPhase).
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				now := metav1.Now()
				ended := map[string]corev1.ContainerStatus{}
				for _, c := range p.Status.ContainerStatuses {
					if c.State.Terminated != nil {
						ended[c.Name] = c
					}
				}
				p.Status.Phase = corev1.PodSucceeded
				p.Status.ContainerStatuses = nil
				for _, c := range p.Spec.Containers {
					st, done := ended[c.Name]
					if !done {
						exit, reason := int32(143), "Error"
						if stopsCleanly(c) {
							exit, reason = 0, "Completed"
						}
						st = corev1.ContainerStatus{Name: c.Name, Image: c.Image,
							State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: reason, FinishedAt: now}}}
					}
					if st.State.Terminated.ExitCode != 0 {
						p.Status.Phase = corev1.PodFailed
					}
					p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, st)
				}
				if _, err = k.core.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
					break
				}
			}
			err = k.core.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		case p.Status.Phase == corev1.PodPending && slices.ContainsFunc(p.Spec.InitContainers, cannotStart):
			now := metav1.Now()
			p.Status.Phase, p.Status.StartTime = corev1.PodFailed, &now
			p.Status.InitContainerStatuses = nil
			// The init containers before it ran to 0; it failed to start; none after it ran.
			for _, c := range p.Spec.InitContainers {
				if cannotStart(c) {
					p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: startError(c, now)})
					break
				}
				p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now}}})
			}
			_, err = k.core.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		case p.Status.Phase == corev1.PodPending:
			now := metav1.Now()
			ready := !probesAJob(p) && !slices.ContainsFunc(p.Spec.Containers, cannotStart)
			p.Status.Phase, p.Status.StartTime, p.Status.PodIP = corev1.PodRunning, &now, "10.0.9.9"
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: conditionStatus(ready), LastTransitionTime: now},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}}
			p.Status.ContainerStatuses = nil
			for _, c := range p.Spec.Containers {
				st := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
				switch {
				case cannotStart(c):
					st = startError(c, now)
				case exitsAtOnce(c):
					st = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}
				}
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: st.Running != nil && ready, State: st})
			}
			// No container running: getPhase says Succeeded if every one exited 0, else Failed.
			if !slices.ContainsFunc(p.Status.ContainerStatuses, func(c corev1.ContainerStatus) bool { return c.State.Running != nil }) {
				p.Status.Phase = corev1.PodSucceeded
				if slices.ContainsFunc(p.Status.ContainerStatuses, func(c corev1.ContainerStatus) bool { return c.State.Terminated.ExitCode != 0 }) {
					p.Status.Phase = corev1.PodFailed
				}
			}
			_, err = k.core.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			fmt.Printf("kubelet stand-in: pod %s/%s: %v\n", p.Namespace, p.Name, err)
		}
	}
}

// imagesWithoutShell are repositories (from the cache's or their own registry) whose images
// have no sh: hello-world is FROM scratch with one static binary (docker-library/hello-world,
// amd64/hello-world/Dockerfile).
var imagesWithoutShell = []string{"library/hello-world"}

// cannotStart is a container whose command runs a shell its image does not have.
func cannotStart(c corev1.Container) bool {
	if len(c.Command) == 0 || !slices.Contains([]string{"sh", "/bin/sh", "bash", "/bin/bash"}, c.Command[0]) {
		return false
	}
	named, err := reference.ParseNormalizedNamed(c.Image)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(imagesWithoutShell, func(repo string) bool { return strings.HasSuffix(reference.Path(named), repo) })
}

// startError is containerd's status of a container it could not start.
func startError(c corev1.Container, now metav1.Time) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", FinishedAt: now,
		Message: fmt.Sprintf("failed to create containerd task: exec: %q: executable file not found in $PATH", c.Command[0])}}
}

// exitsAtOnce is a container whose command is a shell told only to exit 0 (a warm
// placeholder's pull): it ends as soon as it starts.
func exitsAtOnce(c corev1.Container) bool {
	return len(c.Command) == 3 && c.Command[1] == "-c" && strings.TrimSpace(c.Command[2]) == "exit 0"
}

// stopsCleanly is a container whose shell traps SIGTERM to exit 0 (a warm placeholder's hold).
func stopsCleanly(c corev1.Container) bool {
	return len(c.Command) == 3 && c.Command[1] == "-c" && strings.Contains(c.Command[2], "trap 'exit 0' TERM")
}
