// Package doctor is `gpuci doctor`: the troubleshooting table of docs/operations.md, automated. For each
// symptom it gathers the evidence an operator would gather by hand and says what to fix.
// It only reads, except two actions, each of which it says before it takes: Fix deletes the GPU
// NodePools so Karpenter drains and terminates their nodes before a destroy, and
// RestartListeners deletes ARC's stuck listener pods so the controller makes new ones.
package doctor

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/crdowners"
	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/live"
	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/quota"
	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/stats"
	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// StuckAfter is how long a deleting NodeClaim may take before it counts as stuck.
const StuckAfter = 15 * time.Minute

// Finding is one symptom examined.
type Finding struct {
	Symptom  string   `json:"symptom"`
	Problem  bool     `json:"problem"`
	Evidence []string `json:"evidence"`
	Fix      string   `json:"fix,omitempty"`
}

// Doctor examines a cluster.
type Doctor struct {
	Kube kubernetes.Interface
	Dyn  dynamic.Interface
	Cfg  *config.Config
	// Now is the clock (tests fix it).
	Now func() time.Time
	// Logs reads a pod's last lines; nil reads them from the API server (tests replace it:
	// client-go's fake answers every log request with the same text).
	Logs func(ctx context.Context, p corev1.Pod, lines int64) ([]byte, error)
	// Queue lists the jobs GitHub has queued now (stats.Collector.Queued); nil when doctor has
	// no GitHub token, and the stuck-listener check says it was not made.
	Queue func(ctx context.Context) ([]stats.QueuedJob, error)
	// QueuedFor is how long a job may wait with no runner coming before its listener counts
	// as stuck (DefaultQueuedFor when zero).
	QueuedFor time.Duration
	// Served lists the private repositories the pools' runner groups admit
	// (githubside.ServedRepositories), which the retrier's token should reach, and only
	// them; nil when doctor has no GitHub token.
	Served func(ctx context.Context) ([]string, error)
}

// DefaultQueuedFor: a cold start is about two minutes (gpuci cost), a spot shortage's
// fallback a little more; ten minutes without a runner pod is not a slow start.
const DefaultQueuedFor = 10 * time.Minute

// Examine runs every check.
func (d Doctor) Examine(ctx context.Context) []Finding {
	if d.Now == nil {
		d.Now = time.Now
	}
	claims, _ := d.Dyn.Resource(wellknown.NodeClaims).List(ctx, metav1.ListOptions{})
	if claims == nil {
		claims = &unstructured.UnstructuredList{}
	}
	gpuNodes, _ := live.GPUNodes(ctx, d.Kube, d.Cfg.Pools())
	return []Finding{
		d.jobQueued(ctx),
		d.stuckListener(ctx),
		d.staleRunner(ctx),
		d.imagePull(ctx),
		d.runnerPending(ctx, claims),
		d.gpuNotDetected(ctx, gpuNodes),
		d.spotCapacity(ctx, claims),
		d.spotInterruptions(ctx),
		d.gpusOutOfService(ctx, gpuNodes),
		d.retrierHealth(ctx),
		d.gpuQuota(claims),
		d.costSpike(ctx, gpuNodes),
		d.stuckTeardown(ctx, claims),
		d.arcCRDOwners(ctx),
		d.systemNodeUpdateHeld(ctx),
	}
}

// Write prints findings as symptom → evidence → fix.
func Write(w io.Writer, findings []Finding) {
	for _, f := range findings {
		mark := "ok "
		if f.Problem {
			mark = "!! "
		}
		fmt.Fprintf(w, "%s%s\n", mark, f.Symptom)
		for _, e := range f.Evidence {
			fmt.Fprintf(w, "     %s\n", e)
		}
		if f.Problem && f.Fix != "" {
			fmt.Fprintf(w, "   → %s\n", f.Fix)
		}
	}
}

// Problems counts findings that are problems.
func Problems(findings []Finding) int {
	n := 0
	for _, f := range findings {
		if f.Problem {
			n++
		}
	}
	return n
}

func (d Doctor) jobQueued(ctx context.Context) Finding {
	f := Finding{Symptom: "Job stuck in Queued", Fix: "use a runs-on that matches the scale set (stack output runsOn); labels are fixed when a scale set is created, so recreate it (rename runnerScaleSetName) after changing them; check the credentials Secret. The listener runs in " + wellknown.ARCNamespace + " with ARC 0.14, not in " + wellknown.RunnersNamespace + ": kubectl -n " + wellknown.ARCNamespace + " logs -l " + wellknown.ScaleSetLabel + "=<scale set>"}
	for _, pool := range d.Cfg.Pools() {
		rs, err := live.GetScaleSet(ctx, d.Dyn, pool.RunnerScaleSetName)
		if err != nil {
			f.Problem = true
			f.Evidence = append(f.Evidence, fmt.Sprintf("scale set %s: %v", pool.RunnerScaleSetName, err))
			continue
		}
		if !slices.Equal(rs.Labels, pool.RunnerLabels) {
			f.Problem = true
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("scale set %s labels %v (configured %v)", pool.RunnerScaleSetName, rs.Labels, pool.RunnerLabels))
		listeners, err := d.Kube.CoreV1().Pods(wellknown.ARCNamespace).List(ctx, metav1.ListOptions{LabelSelector: wellknown.ScaleSetLabel + "=" + pool.RunnerScaleSetName})
		if err != nil || len(listeners.Items) == 0 {
			f.Problem = true
			f.Evidence = append(f.Evidence, fmt.Sprintf("no listener pod for %s in %s: the controller cannot reach GitHub or the credentials are wrong", pool.RunnerScaleSetName, wellknown.ARCNamespace))
			continue
		}
		for _, p := range listeners.Items {
			f.Evidence = append(f.Evidence, fmt.Sprintf("listener %s %s; last log lines: %s", p.Name, p.Status.Phase, d.logTail(ctx, p)))
			if p.Status.Phase != corev1.PodRunning {
				f.Problem = true
			}
		}
	}
	return f
}

// stuckListener finds scale sets with a job queued past QueuedFor while no runner pod of
// theirs exists: the listener, which turns GitHub's job messages into runners, has stopped
// (ARC users report listeners that stop getting messages until restarted:
// actions-runner-controller#3204, #4423). A job counts for a scale set whose name and labels
// hold every label it asks for.
func (d Doctor) stuckListener(ctx context.Context) Finding {
	f := Finding{Symptom: "Jobs queued while their scale set starts no runner (a stuck listener)",
		Fix: "restart the scale set's listener: gpuci doctor --fix does (the controller starts a new one), or kubectl -n " + wellknown.ARCNamespace + " delete pod -l " + wellknown.ScaleSetLabel + "=<scale set>"}
	if d.Queue == nil {
		f.Evidence = append(f.Evidence, "not checked: GitHub's queued jobs need GITHUB_TOKEN (Actions: read on the repositories)")
		return f
	}
	wait := d.QueuedFor
	if wait == 0 {
		wait = DefaultQueuedFor
	}
	queued, err := d.Queue(ctx)
	if err != nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("GitHub's queued jobs could not be read: %v", err))
		return f
	}
	for _, set := range d.StuckListeners(ctx, queued, wait) {
		f.Problem = true
		f.Evidence = append(f.Evidence, set.Evidence)
	}
	if !f.Problem {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d job(s) queued; none for %s without a runner coming", len(queued), wait))
	}
	return f
}

// StuckScaleSet is a scale set whose listener looks stuck, and why.
type StuckScaleSet struct {
	Name, Evidence string
}

// StuckListeners are the scale sets with a job queued longer than wait and no runner pod.
func (d Doctor) StuckListeners(ctx context.Context, queued []stats.QueuedJob, wait time.Duration) []StuckScaleSet {
	if d.Now == nil {
		d.Now = time.Now
	}
	var out []StuckScaleSet
	for _, pool := range d.Cfg.Pools() {
		serves := append([]string{pool.RunnerScaleSetName}, pool.RunnerLabels...)
		var waiting []stats.QueuedJob
		for _, j := range queued {
			if len(j.Labels) > 0 && !slices.ContainsFunc(j.Labels, func(l string) bool { return !slices.Contains(serves, l) }) && d.Now().Sub(j.Created) > wait {
				waiting = append(waiting, j)
			}
		}
		if len(waiting) == 0 {
			continue
		}
		runners, err := d.Kube.CoreV1().Pods(wellknown.RunnersNamespace).List(ctx, metav1.ListOptions{LabelSelector: wellknown.ScaleSetLabel + "=" + pool.RunnerScaleSetName})
		if err != nil || runnerComing(pool, runners.Items) {
			continue // a slow start, or the scale set at its maxRunners: not a stuck listener
		}
		none := "no runner pod in " + wellknown.RunnersNamespace
		if n := len(runners.Items); n > 0 {
			none = fmt.Sprintf("its %d runner(s) all busy with other jobs, below its maxRunners %d", n, pool.MaxRunners)
		}
		oldest := slices.MinFunc(waiting, func(a, b stats.QueuedJob) int { return a.Created.Compare(b.Created) })
		out = append(out, StuckScaleSet{Name: pool.RunnerScaleSetName, Evidence: fmt.Sprintf(
			"scale set %s: %d job(s) queued, the oldest %s/%s %q for %s, and %s",
			pool.RunnerScaleSetName, len(waiting), d.Cfg.GitHub.Org, oldest.Repo, oldest.Name, d.Now().Sub(oldest.Created).Round(time.Minute), none)})
	}
	return out
}

// runnerComing tells whether one of a scale set's runner pods may still take a queued job, or
// the scale set runs all it may: a runner-form pod is starting or busy (the check cannot tell
// which), so any counts; a container-form runner is Ready only while it runs a job
// (k8s.RunnerBusyProbe), so one that is not Ready waits or starts, and Ready ones are busy.
// A container-form pool always keeps one runner waiting (config.GPUPool.IdleRunners): only
// when every runner is busy below maxRunners has the listener failed to make the next one.
func runnerComing(pool config.GPUPool, pods []corev1.Pod) bool {
	if pool.JobForm != config.JobFormContainer || len(pods) >= pool.MaxRunners {
		return len(pods) > 0
	}
	return slices.ContainsFunc(pods, func(p corev1.Pod) bool {
		return !slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
	})
}

// RestartListeners deletes the scale sets' listener pods; ARC's controller starts new ones.
func (d Doctor) RestartListeners(ctx context.Context, sets []StuckScaleSet) ([]string, error) {
	var restarted []string
	for _, s := range sets {
		pods := d.Kube.CoreV1().Pods(wellknown.ARCNamespace)
		listeners, err := pods.List(ctx, metav1.ListOptions{LabelSelector: wellknown.ScaleSetLabel + "=" + s.Name})
		if err != nil {
			return restarted, fmt.Errorf("finding %s's listener: %w", s.Name, err)
		}
		for _, p := range listeners.Items {
			if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				return restarted, fmt.Errorf("restarting %s's listener %s: %w", s.Name, p.Name, err)
			}
		}
		restarted = append(restarted, s.Name)
	}
	return restarted, nil
}

// deprecatedRunner is what the runner prints when GitHub refuses its version (actions/runner).
const deprecatedRunner = "is deprecated and cannot receive messages"

// staleRunner finds runners GitHub refuses as too old: ARC registers them with updates
// disabled, so a pinned image stops getting jobs some 30 days after a newer runner release.
func (d Doctor) staleRunner(ctx context.Context) Finding {
	f := Finding{Symptom: "Job stuck in Queued: runner too old for GitHub", Fix: "a pool that pins runnerImage: remove it (the current runner, pulled on each start) or bump the pin to the current actions/runner release, then pulumi up; a pool that follows the current release: GitHub answered 403, which the runner reports as deprecation (a GitHub incident, or broker.actions.githubusercontent.com blocked by a proxy)"}
	for _, pool := range d.Cfg.Pools() {
		if !pool.FollowsRunnerReleases() {
			f.Evidence = append(f.Evidence, fmt.Sprintf("pool %s pins runnerImage %s: it will stop getting jobs once GitHub deprecates that runner version", pool.Name, pool.RunnerImage))
		}
	}
	pods, err := d.Kube.CoreV1().Pods(wellknown.RunnersNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		f.Evidence = append(f.Evidence, err.Error())
		return f
	}
	for _, p := range pods.Items {
		raw, err := d.logs(ctx, p, 50)
		if err != nil {
			continue // a pod without logs yet says nothing about its version
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, deprecatedRunner) {
				f.Problem = true
				image := ""
				for _, c := range p.Spec.Containers {
					if c.Name == "runner" || image == "" {
						image = c.Image
					}
				}
				f.Evidence = append(f.Evidence, fmt.Sprintf("runner pod %s (%s): %s", p.Name, image, strings.TrimSpace(line)))
				break
			}
		}
	}
	if !f.Problem {
		f.Evidence = append(f.Evidence, "no runner pod reports a deprecated version")
	}
	return f
}

// imagePull finds the pools' pods (runners, container jobs, warm placeholders) whose node
// cannot pull an image: such a pod waits for ever, and its job stays Queued. The kubelet
// (kubernetes v1.36.3 pkg/kubelet/images/image_manager.go:349-412, types.go:29-41) sets a
// container's waiting reason to ErrImagePull, RegistryUnavailable or
// SignatureValidationFailed after a failed pull and ImagePullBackOff while it waits to try
// again ("Back-off pulling image …: ErrImagePull: <the runtime's error>"), InvalidImageName
// for a name it cannot parse.
func (d Doctor) imagePull(ctx context.Context) Finding {
	f := Finding{Symptom: "A pool's pod cannot pull its image"}
	var pods []corev1.Pod
	for _, ns := range append(config.RunnerPodNamespaces(d.Cfg.Pools()), wellknown.WarmNamespace) {
		list, err := d.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			f.Evidence = append(f.Evidence, err.Error())
			return f
		}
		pods = append(pods, list.Items...)
	}
	var fixes []string
	for _, p := range pods {
		specs := map[string]string{}
		for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
			specs[c.Name] = c.Image
		}
		for _, st := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			w := st.State.Waiting
			if w == nil || !pullFailures[w.Reason] {
				continue
			}
			image := cmp.Or(specs[st.Name], st.Image)
			f.Problem = true
			f.Evidence = append(f.Evidence, fmt.Sprintf("pod %s/%s container %s (%s): %s: %s", p.Namespace, p.Name, st.Name, image, w.Reason, w.Message))
			if fix := pullFix(image, w.Message); !slices.Contains(fixes, fix) {
				fixes = append(fixes, fix)
			}
		}
	}
	if !f.Problem {
		f.Evidence = append(f.Evidence, "no pool pod waits for an image")
	}
	f.Fix = strings.Join(fixes, "; ")
	return f
}

// pullFailures are the waiting reasons of a container whose image its node could not pull.
var pullFailures = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "RegistryUnavailable": true,
	"SignatureValidationFailed": true, "InvalidImageName": true}

// pullFix says what to do about an image its node could not pull, by where it comes from and
// what the runtime said: containerd writes "failed to authorize: failed to fetch anonymous
// token: unexpected status from GET request to …: 401 Unauthorized" for a registry that
// wants credentials, "<ref>: not found" for a missing tag (containerd v1.7.30
// remotes/docker/authorizer.go:337, resolver.go:573, remotes/errors/errors.go:36).
func pullFix(image, message string) string {
	host := ""
	if named, err := reference.ParseNormalizedNamed(image); err == nil {
		host = reference.Domain(named)
	}
	refused := strings.Contains(message, "401") || strings.Contains(message, "403") || strings.Contains(message, "denied")
	switch {
	case strings.Contains(host, ".dkr.ecr."):
		return image + " comes through the stack's image cache, which pulls it from the upstream registry with that registry's registryCredentials entry on a first pull: check that the upstream has the tag and that the credential can read it (a private ghcr.io package: a classic PAT with read:packages of a member who can see it)"
	case host == "ghcr.io" && refused:
		return image + ": GitHub's container registry makes a new package private, and nodes pull without credentials: make the package public (its settings › Change visibility; the CUDA runner image holds no secret), or add ghcr.io to imageCache with a registryCredentials entry that can read it (a classic PAT with read:packages), so nodes pull it through the stack's ECR cache, in the region"
	case refused:
		return image + ": its registry refused an anonymous pull: name a public image, or list the registry in imageCache with a registryCredentials entry"
	case strings.Contains(message, "not found"):
		return image + ": no such image or tag: fix the pool's runnerImage (or the job's container:); a CUDA runner image appears once cuda-runner-image.yml has run (Actions › cuda-runner-image › Run workflow)"
	}
	return image + ": check its name and that the node reaches its registry (through the NAT, or the stack's image cache)"
}

// spotInterruptions lists the spot interruptions Karpenter recorded (events live about an
// hour) and the runner pods that were on each interrupted node: the jobs that went red.
func (d Doctor) spotInterruptions(ctx context.Context) Finding {
	f := Finding{Symptom: "Jobs failed by spot interruptions", Fix: "a job on an interrupted node fails (\"The runner has received a shutdown signal\", or in the container form a failed step): gpuci retry (examples/workflows/retry-interrupted.yml) re-runs such runs once, on the pool's on-demand twin with onDemandRetry: true; add on-demand to the pool's capacityTypes if it happens often"}
	in, err := live.ReadInterruptions(ctx, d.Kube, config.RunnerPodNamespaces(d.Cfg.Pools()))
	if err != nil {
		f.Evidence = append(f.Evidence, err.Error())
		return f
	}
	for _, e := range in.Events {
		if e.Cause != live.SpotInterrupted {
			continue
		}
		f.Problem = true
		line := fmt.Sprintf("%s: node %s: %s", e.At.Format(time.RFC3339), e.Node, e.Message)
		if len(e.Pods) > 0 {
			line += "; runner pods on it: " + strings.Join(e.Pods, ", ")
		}
		f.Evidence = append(f.Evidence, line)
	}
	if !f.Problem {
		f.Evidence = append(f.Evidence, "no SpotInterrupted event (Kubernetes keeps events about an hour)")
	}
	return f
}

// gpusOutOfService lists the GPU nodes the retrier took out of service (live.OutOfService's
// events: type, zone, pool, how many GPUs were withdrawn), how often each instance type and
// zone had one, and any node whose device plugin has withdrawn a GPU that is still in service
// (no retrier, or its pass has not come yet): it takes no job on that GPU and costs as before.
func (d Doctor) gpusOutOfService(ctx context.Context, nodes []corev1.Node) Finding {
	f := Finding{Symptom: "GPUs taken out of service", Fix: "a node whose device plugin withdrew a GPU (a critical XID: ECC, fallen off the bus, …) is replaced by the in-cluster retrier, and the job it failed re-run once (docs/operations.md, \"A broken GPU\"); without the retrier, delete the node's NodeClaim (kubectl delete nodeclaim <name>). Many on one type or zone: tell AWS support the instance IDs"}
	in, err := live.ReadInterruptions(ctx, d.Kube, config.RunnerPodNamespaces(d.Cfg.Pools()))
	if err != nil {
		f.Evidence = append(f.Evidence, err.Error())
		return f
	}
	often := map[string]int{}
	for _, e := range in.Events {
		if e.Cause != live.GPUOutOfService {
			continue
		}
		f.Problem = true
		line := fmt.Sprintf("%s: %s", e.At.Format(time.RFC3339), e.Message)
		if len(e.Pods) > 0 {
			line += "; runner pods on it: " + strings.Join(e.Pods, ", ")
		}
		f.Evidence = append(f.Evidence, line)
		if typ, zone, ok := typeAndZone(e.Message); ok {
			often[typ+" in "+zone]++
		}
	}
	for _, where := range slices.Sorted(maps.Keys(often)) {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s: %d node(s) out of service in the last hour", where, often[where]))
	}
	for _, n := range nodes {
		if w, c := live.WithdrawnGPUs(n); w > 0 && n.DeletionTimestamp == nil {
			f.Problem = true
			f.Evidence = append(f.Evidence, fmt.Sprintf("node %s (%s) is still in service with %d of its %d GPU(s) withdrawn by its device plugin",
				n.Name, strings.Trim(n.Labels[corev1.LabelInstanceTypeStable]+", "+n.Labels[corev1.LabelTopologyZone], ", "), w, c))
		}
	}
	if !f.Problem {
		f.Evidence = append(f.Evidence, "no GPU withdrawn by a device plugin now, and no node taken out of service in the cluster's events (kept about an hour)")
	}
	return f
}

// typeAndZone reads the instance type and zone back from live.OutOfServiceMessage's
// "node <name> (<type>, <zone>, …".
func typeAndZone(msg string) (typ, zone string, ok bool) {
	_, rest, ok := strings.Cut(msg, " (")
	if !ok {
		return "", "", false
	}
	parts := strings.SplitN(rest, ", ", 3)
	if len(parts) < 3 {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// poolPods lists the pods of the pools: runners in the runners' namespace, container-form
// jobs' pods in their pools' namespaces.
func (d Doctor) poolPods(ctx context.Context) (*corev1.PodList, error) {
	all := &corev1.PodList{}
	for _, ns := range config.RunnerPodNamespaces(d.Cfg.Pools()) {
		pods, err := d.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		all.Items = append(all.Items, pods.Items...)
	}
	return all, nil
}

func (d Doctor) runnerPending(ctx context.Context, claims *unstructured.UnstructuredList) Finding {
	f := Finding{Symptom: "Runner pod Pending with no node", Fix: "read the Karpenter log and the NodeClaim and EC2NodeClass conditions below: usually no capacity for the instance types, the pool's gpuLimit reached, a missing spot service-linked role (createSpotServiceLinkedRole), or an EC2NodeClass that is not Ready (its AMI not found; with imageSnapshotID, a snapshot larger than rootVolumeGi, in another region, or under a key Karpenter cannot use)"}
	pods, err := d.poolPods(ctx)
	if err != nil {
		f.Evidence = append(f.Evidence, err.Error())
		return f
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" {
			f.Problem = true
			f.Evidence = append(f.Evidence, fmt.Sprintf("pod %s Pending, unscheduled", p.Name))
		}
	}
	if !f.Problem {
		f.Evidence = append(f.Evidence, "no unscheduled runner pods")
		return f
	}
	for _, c := range claims.Items {
		f.Evidence = append(f.Evidence, "NodeClaim "+c.GetName()+": "+live.Conditions(&c))
	}
	// A NodeClass that is not Ready launches nothing, and so leaves no NodeClaim to read.
	if classes, err := d.Dyn.Resource(wellknown.EC2NodeClasses).List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range classes.Items {
			if status, _ := live.Condition(&c, "Ready"); status != "True" {
				f.Evidence = append(f.Evidence, "EC2NodeClass "+c.GetName()+" not Ready: "+live.Conditions(&c))
			}
		}
	}
	events, _ := d.Kube.CoreV1().Events(wellknown.RunnersNamespace).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if events != nil {
		for _, e := range events.Items {
			f.Evidence = append(f.Evidence, fmt.Sprintf("event %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message))
		}
	}
	if pods, err := d.Kube.CoreV1().Pods(wellknown.KarpenterNamespace).List(ctx, metav1.ListOptions{LabelSelector: wellknown.KarpenterPods}); err == nil {
		for _, p := range pods.Items {
			f.Evidence = append(f.Evidence, "karpenter log: "+d.logTail(ctx, p))
		}
	}
	return f
}

func (d Doctor) gpuNotDetected(ctx context.Context, nodes []corev1.Node) Finding {
	f := Finding{Symptom: "GPU not detected on a GPU node", Fix: "on AL2023 nodes the stack's NVIDIA device plugin must run: it needs the label nvidia.com/gpu.present=true (set by the NodePool) and to tolerate nvidia.com/gpu; check its DaemonSet and pod logs. " +
		"On Bottlerocket nodes (a pool with imageSnapshotID) the OS's own plugin advertises the GPUs: check the node's instance type is a GPU type and its AMI the NVIDIA variant"}
	pluginNodes := 0 // the nodes the stack's device plugin runs on: not Bottlerocket's
	for _, n := range nodes {
		gpus := n.Status.Allocatable[wellknown.GPUResource]
		by := "the stack's device plugin"
		if n.Labels[wellknown.NodeOSLabel] == config.NodeOSBottlerocket {
			by = "Bottlerocket's own device plugin"
		} else {
			pluginNodes++
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("node %s: %s allocatable %s (from %s), label %s=%q", n.Name, wellknown.GPUResource, gpus.String(), by, wellknown.GPUPresentLabel, n.Labels[wellknown.GPUPresentLabel]))
		// Registered, then withdrawn as unhealthy, is a broken GPU (gpusOutOfService), not one
		// the plugin never found.
		if withdrawn, _ := live.WithdrawnGPUs(n); gpus.IsZero() && withdrawn == 0 {
			f.Problem = true
		}
	}
	if len(nodes) == 0 {
		f.Evidence = append(f.Evidence, "no GPU nodes up")
	}
	ds, err := d.Kube.AppsV1().DaemonSets(wellknown.DevicePluginNamespace).Get(ctx, wellknown.DevicePluginRelease, metav1.GetOptions{})
	if err != nil {
		f.Problem = true
		f.Evidence = append(f.Evidence, "device plugin DaemonSet: "+err.Error())
	} else {
		f.Evidence = append(f.Evidence, fmt.Sprintf("device plugin DaemonSet: %d desired, %d ready", ds.Status.DesiredNumberScheduled, ds.Status.NumberReady))
		if ds.Status.NumberReady < ds.Status.DesiredNumberScheduled || ds.Status.DesiredNumberScheduled < int32(pluginNodes) {
			f.Problem = true
		}
	}
	return f
}

// InsufficientCapacityError is the reason of the event Karpenter records on a NodeClaim whose
// launch EC2 refused for want of capacity, before it deletes the NodeClaim and tries the
// next offering (sigs.k8s.io/karpenter v1.14.1 pkg/events/reason.go,
// pkg/controllers/nodeclaim/lifecycle/events.go and launch.go).
const InsufficientCapacityError = "InsufficientCapacityError"

// spotCapacity finds launches EC2 refused for want of capacity: Karpenter's events (the
// NodeClaims themselves are deleted), and NodeClaims whose conditions still say so.
func (d Doctor) spotCapacity(ctx context.Context, claims *unstructured.UnstructuredList) Finding {
	f := Finding{Symptom: "Spot capacity", Fix: "a pool with on-demand in its capacityTypes falls back to it by itself (Karpenter tries on-demand once no spot offering is left); a spot-only pool's jobs wait: add on-demand to its capacityTypes, or more instance types"}
	// A cluster-scoped object's events are recorded in "default".
	events, err := d.Kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + InsufficientCapacityError})
	if err == nil {
		for _, e := range events.Items {
			if e.Reason != InsufficientCapacityError { // a server that ignores the selector
				continue
			}
			f.Problem = true
			f.Evidence = append(f.Evidence, fmt.Sprintf("%s %s %s: %s", live.EventTime(e).UTC().Format(time.RFC3339), e.InvolvedObject.Kind, e.InvolvedObject.Name, strings.TrimSpace(e.Message)))
		}
	}
	for _, c := range claims.Items {
		if s := live.Conditions(&c); strings.Contains(s, "InsufficientCapacity") {
			f.Problem = true
			f.Evidence = append(f.Evidence, "NodeClaim "+c.GetName()+": "+s)
		}
	}
	if warm := d.onDemandWarmNodes(ctx, claims); len(warm) > 0 {
		f.Problem = true
		f.Evidence = append(f.Evidence, warm...)
	}
	if !f.Problem {
		f.Evidence = append(f.Evidence, "no launch refused for want of capacity (Karpenter's events of the last hour, the NodeClaims), no warm node on-demand")
	}
	return f
}

// onDemandWarmNodes are a warm window's nodes that are on-demand in a pool that prefers spot:
// spot was short when the window opened, and the node stays on-demand, at its price, all
// window: a placeholder keeps it from ever being empty, and the pools consolidate only
// WhenEmpty, so Karpenter never replaces it with spot (sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/disruption: only WhenEmptyOrUnderutilized replaces a node for a cheaper one).
func (d Doctor) onDemandWarmNodes(ctx context.Context, claims *unstructured.UnstructuredList) []string {
	placeholders, err := d.Kube.CoreV1().Pods(wellknown.WarmNamespace).List(ctx, metav1.ListOptions{LabelSelector: wellknown.WarmPoolLabel})
	if err != nil {
		return []string{"warm placeholders: " + err.Error()}
	}
	held := map[string]string{} // node → pool
	for _, p := range placeholders.Items {
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			held[p.Spec.NodeName] = p.Labels[wellknown.WarmPoolLabel]
		}
	}
	var out []string
	for _, c := range claims.Items {
		node, _, _ := unstructured.NestedString(c.Object, "status", "nodeName")
		name, warm := held[node]
		if !warm || c.GetLabels()["karpenter.sh/capacity-type"] != "on-demand" {
			continue
		}
		i := slices.IndexFunc(d.Cfg.Pools(), func(p config.GPUPool) bool { return p.Name == name })
		if i < 0 || !d.Cfg.Pools()[i].Allows(config.CapacitySpot) {
			continue // an on-demand pool's warm node is on-demand by design
		}
		out = append(out, fmt.Sprintf("warm node %s of pool %s is on-demand (NodeClaim %s): spot was short when its window opened, and it stays on-demand, at the on-demand price, until the window ends (gpuci cost prices that)", node, name, c.GetName()))
	}
	return out
}

// gpuQuota finds NodeClaims that failed to launch because the account's G and VT vCPU
// quota is too small (new accounts have 0; spot and on-demand are separate quotas).
func (d Doctor) gpuQuota(claims *unstructured.UnstructuredList) Finding {
	f := Finding{Symptom: "GPU vCPU quota"}
	var fixes []string
	for _, c := range claims.Items {
		s := live.Conditions(&c)
		if need, ok := quota.Shortfall(d.Cfg, s); ok {
			f.Problem = true
			f.Evidence = append(f.Evidence, "NodeClaim "+c.GetName()+": "+s)
			if need.VCPUs > 0 {
				fixes = append(fixes, need.RequestCommand(d.Cfg.Region))
			} else {
				fixes = append(fixes, fmt.Sprintf("aws service-quotas get-service-quota --service-code ec2 --quota-code %s --region %s", need.QuotaCode, d.Cfg.Region))
			}
		}
	}
	if !f.Problem {
		f.Evidence = append(f.Evidence, "no NodeClaim failed for a vCPU quota")
		return f
	}
	slices.Sort(fixes)
	f.Fix = "the account's G and VT vCPU quota is too small for the pools (gpuci quota shows what they need); request it: " + strings.Join(slices.Compact(fixes), "; ")
	return f
}

func (d Doctor) costSpike(ctx context.Context, nodes []corev1.Node) Finding {
	f := Finding{Symptom: "Cost spike: GPU nodes up without a job", Fix: "a GPU node should go consolidateAfter after its job; look for minRunners > 0, pods with karpenter.sh/do-not-disrupt that never finish, or stuck NodeClaims"}
	pods, _ := d.poolPods(ctx)
	busy := map[string]bool{}
	if pods != nil {
		for _, p := range pods.Items {
			busy[p.Spec.NodeName] = true
		}
	}
	for _, n := range nodes {
		age := d.Now().Sub(n.CreationTimestamp.Time).Round(time.Minute)
		if !busy[n.Name] && age > 10*time.Minute {
			f.Problem = true
			f.Evidence = append(f.Evidence, fmt.Sprintf("node %s (%s) has no runner pod, up %s", n.Name, n.Labels[corev1.LabelInstanceTypeStable], age))
		}
	}
	if !f.Problem {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d GPU node(s), none idle for long", len(nodes)))
	}
	return f
}

func (d Doctor) stuckTeardown(ctx context.Context, claims *unstructured.UnstructuredList) Finding {
	f := Finding{Symptom: "GPU nodes stuck at teardown", Fix: "gpuci doctor --fix deletes the GPU NodePools so Karpenter drains and terminates their nodes; if the controller is gone, see docs/operations.md › Tearing down"}
	for _, c := range claims.Items {
		if ts := c.GetDeletionTimestamp(); ts != nil && d.Now().Sub(ts.Time) > StuckAfter {
			f.Problem = true
			f.Evidence = append(f.Evidence, fmt.Sprintf("NodeClaim %s deleting for %s (finalizers %v)", c.GetName(), d.Now().Sub(ts.Time).Round(time.Minute), c.GetFinalizers()))
		}
	}
	if !f.Problem {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d NodeClaim(s), none stuck deleting", len(claims.Items)))
	}
	return f
}

func (d Doctor) arcCRDOwners(ctx context.Context) Finding {
	f := Finding{Symptom: "ARC's CRDs co-owned: an ARC upgrade would keep the fields it drops", Fix: "gpuci crd-owners --fix, once: the stack becomes the only owner of their fields, and its next apply (the next ARC upgrade) removes what it no longer declares; see docs/operations.md › Upgrading"}
	crds, err := crdowners.Examine(ctx, d.Dyn)
	if err != nil {
		f.Evidence = append(f.Evidence, "cannot read ARC's CRDs: "+err.Error())
		return f
	}
	for _, c := range crds {
		if len(c.OtherManagers) > 0 {
			f.Problem = true
			f.Evidence = append(f.Evidence, fmt.Sprintf("CRD %s: fields also owned by %s", c.Name, strings.Join(c.OtherManagers, ", ")))
		}
	}
	if !f.Problem {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d ARC CRD(s), each owned by the stack alone (%s)", len(crds), wellknown.ARCCRDFieldManager))
	}
	return f
}

// eksUpdateTaint is what EKS taints a managed node group's old nodes with when an update
// starts ("managed node update behavior": eks.amazonaws.com/nodegroup=unschedulable:NoSchedule).
const eksUpdateTaint = "eks.amazonaws.com/nodegroup"

// systemNodeUpdateHeld reports system nodes an update of the system node group has closed to
// new pods (a kubernetesVersion bump, a tags edit). EKS taints every old node first, drains
// them one by one, and cordons each once its pods are gone; when it fails with
// PodEvictionFailure (the busy-runners budget keeps a container-form job's runner), the old
// node stays so, with the job on it. The deploy failed, nothing was killed, and a plain
// `pulumi up` would show no change (pulumi-aws keeps the failed update's values in the state).
func (d Doctor) systemNodeUpdateHeld(ctx context.Context) Finding {
	f := Finding{Symptom: "System node update held by running jobs", Fix: "the system node group's update failed with PodEvictionFailure (or is still running): the disruption budgets keep these jobs, nothing is killed. Once they end, the next deploy (up --refresh, as deploy.yml runs it) replaces the nodes; by hand, pulumi up --refresh (a plain pulumi up shows no change). See docs/operations.md › A system-node update a job holds"}
	nodes, err := d.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: wellknown.SystemNodeLabel + "=" + wellknown.SystemNodeValue})
	if err != nil {
		f.Evidence = append(f.Evidence, "cannot list the system nodes: "+err.Error())
		return f
	}
	pods, err := d.Kube.CoreV1().Pods(wellknown.RunnersNamespace).List(ctx, metav1.ListOptions{})
	for _, n := range nodes.Items {
		var how []string
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == eksUpdateTaint && t.Value == "unschedulable" }) {
			how = append(how, "tainted "+eksUpdateTaint+"=unschedulable:NoSchedule")
		}
		if n.Spec.Unschedulable {
			how = append(how, "cordoned")
		}
		if len(how) == 0 {
			continue
		}
		f.Problem = true
		on := "no runner pod"
		switch {
		case err != nil:
			on = "runner pods unknown (" + err.Error() + ")"
		default:
			var jobs []string
			for _, p := range pods.Items {
				if p.Spec.NodeName == n.Name && p.Status.Phase == corev1.PodRunning {
					jobs = append(jobs, p.Name)
				}
			}
			if len(jobs) > 0 {
				on = "runner pods " + strings.Join(jobs, ", ")
			}
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("system node %s %s; on it: %s", n.Name, strings.Join(how, ", "), on))
	}
	if !f.Problem {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d system node(s), none closed by an update", len(nodes.Items)))
	}
	return f
}

// Fix deletes the configured GPU NodePools, which makes Karpenter drain and terminate their
// nodes. Callers confirm with the operator first.
func (d Doctor) Fix(ctx context.Context) ([]string, error) {
	var deleted []string
	for _, pool := range d.Cfg.Pools() {
		err := d.Dyn.Resource(wellknown.NodePools).Delete(ctx, pool.Name, metav1.DeleteOptions{})
		if err != nil {
			return deleted, fmt.Errorf("deleting NodePool %s: %w", pool.Name, err)
		}
		deleted = append(deleted, pool.Name)
	}
	return deleted, nil
}

func (d Doctor) logTail(ctx context.Context, p corev1.Pod) string {
	raw, err := d.logs(ctx, p, 5)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return strings.Join(strings.Fields(string(bytes.TrimSpace(raw))), " ")
}

func (d Doctor) logs(ctx context.Context, p corev1.Pod, lines int64) ([]byte, error) {
	if d.Logs != nil {
		return d.Logs(ctx, p, lines)
	}
	opts := &corev1.PodLogOptions{TailLines: &lines}
	if len(p.Spec.Containers) > 1 {
		opts.Container = p.Spec.Containers[0].Name // ARC's runner container comes first
		for _, c := range p.Spec.Containers {
			if c.Name == "runner" {
				opts.Container = c.Name
			}
		}
	}
	return d.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, opts).DoRaw(ctx)
}
