//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// karpenter is the real Karpenter (hack/karpenter: v1.14.1's controllers over upstream's
// in-memory AWS) running as a process against the e2e's API server, configured as the stack's
// own Helm release configures the pod it would run, and seeded with what the program created
// in the fake AWS account.
type karpenter struct {
	control string
	logPath string
	// zones are the stack's availabilityZones output; nodeSubnets the subnets that carry the
	// discovery tag.
	zones       []string
	nodeSubnets []string
	// metrics is where it serves /metrics: the port the stack gives it (METRICS_PORT, the
	// chart's controller.metrics.port, which its Service targets), moved to a loopback port.
	metrics string

	mu sync.Mutex
	// interrupted are the times of the spot interruptions the e2e sent (interrupt).
	interrupted []time.Time
	// short is whether EC2 is short of capacity now (shortage), and shortageLifted when the
	// last shortage ended: Karpenter keeps every offering EC2 refused during it out of its
	// launches until a TTL after.
	short          bool
	shortageLifted time.Time
	// lastRefusal is the newest refused launch Karpenter reported in its events (refusals).
	lastRefusal time.Time
}

// unavailableOfferingsTTL is how long Karpenter keeps an interrupted or refused offering
// (type, zone, capacity type) out of its launches: karpenter-provider-aws v1.14.1
// pkg/cache/cache.go:31 (UnavailableOfferingsTTL), marked on a spot interruption by
// pkg/controllers/interruption/utils.go:133-142.
const unavailableOfferingsTTL = 3 * time.Minute

// spotOfferingFreeAt is the first time a spot offering of every zone's type is sure to be
// back in Karpenter's launches in at least one of the stack's zones: each of the newest
// interruptions may have taken a zone of its own (a second interruption within the TTL can
// only be in another zone: Karpenter launches on-demand in the first), so once as many as the
// stack has zones are recent, the oldest of them must expire. Zero when no zone can be out.
func (k *karpenter) spotOfferingFreeAt() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.interrupted) < len(k.zones) {
		return time.Time{}
	}
	return k.interrupted[len(k.interrupted)-len(k.zones)].Add(unavailableOfferingsTTL + 5*time.Second)
}

// spotRefusalsFreeAt is the first time every spot offering EC2 refused during the e2e's last
// shortage is sure to be back in Karpenter's launches: a refused launch (CreateFleet's
// InsufficientInstanceCapacity) marks its offerings unavailable for the same TTL
// (karpenter-provider-aws v1.14.1 pkg/providers/instance/instance.go:574,
// updateUnavailableOfferingsCache → pkg/cache/unavailableofferings.go:122, MarkUnavailable),
// counted from the newest refusal Karpenter reported (refusals), else from the shortage's
// end, before which the last refusal came. Zero when there was none.
func (k *karpenter) spotRefusalsFreeAt() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.shortageLifted.IsZero() {
		return time.Time{}
	}
	from := k.shortageLifted
	if !k.lastRefusal.IsZero() && k.lastRefusal.Before(from) {
		from = k.lastRefusal
	}
	return from.Add(unavailableOfferingsTTL + 5*time.Second)
}

// refusals records the newest launch EC2 refused, from Karpenter's own events on its
// NodeClaims: it marks the offerings unavailable (instance.go:574) before it returns the
// error its lifecycle controller reports as the event, so the event's time, a second-truncated
// timestamp, is at most a second before the mark. Called while EC2 is still short, once the
// refused launches have happened (a refused offering is not asked for again until the TTL),
// it requires at least one.
func (k *karpenter) refusals(t tb, ctx context.Context, core kubernetes.Interface) {
	events, err := core.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=NodeClaim"})
	require.NoError(t, err)
	var last time.Time
	for _, e := range events.Items {
		if !strings.Contains(e.Message, "InsufficientInstanceCapacity") {
			continue
		}
		for _, at := range []time.Time{e.FirstTimestamp.Time, e.LastTimestamp.Time, e.EventTime.Time} {
			if at.After(last) {
				last = at
			}
		}
	}
	require.False(t, last.IsZero(), "Karpenter reported the refused launches on its NodeClaims")
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lastRefusal = last.Add(time.Second)
}

// karpenterSeed is hack/karpenter's seed (its type `seed`), from the stack's state.
type karpenterSeed struct {
	Region         string           `json:"region"`
	Account        string           `json:"account"`
	Subnets        []map[string]any `json:"subnets"`
	SecurityGroups []map[string]any `json:"securityGroups"`
	Roles          []string         `json:"roles"`
	Queues         []string         `json:"queues"`
	Clusters       []map[string]any `json:"clusters"`
}

// seedFromState is the part of the fake account Karpenter reads: every subnet (Karpenter picks
// the ones carrying the discovery tag itself, by the EC2NodeClass's selector), the security
// group that carries the tag, the IAM roles, the SQS queues — as the program made them. It
// also returns the subnets that carry the tag, the nodes' own.
func seedFromState(t *testing.T, resources []apitype.ResourceV3) (karpenterSeed, []string) {
	s := karpenterSeed{Region: "us-west-2", Account: fakeaws.Account}
	var tagged []string
	for _, r := range resources {
		out := r.Outputs
		switch string(r.Type) {
		case "aws:ec2/subnet:Subnet":
			tags, _ := out["tags"].(map[string]any)
			s.Subnets = append(s.Subnets, map[string]any{"id": r.ID, "zone": out["availabilityZone"], "zoneID": out["availabilityZoneId"], "vpc": out["vpcId"], "tags": tags})
			if _, ok := tags[wellknown.DiscoveryTag]; ok {
				tagged = append(tagged, string(r.ID))
			}
		case "aws:ec2/tag:Tag":
			if out["key"] == wellknown.DiscoveryTag {
				s.SecurityGroups = append(s.SecurityGroups, map[string]any{"id": out["resourceId"], "name": "eks-cluster-sg", "tags": map[string]any{wellknown.DiscoveryTag: out["value"]}})
			}
		case "aws:iam/role:Role":
			s.Roles = append(s.Roles, fmt.Sprint(out["name"]))
		case "aws:sqs/queue:Queue":
			s.Queues = append(s.Queues, fmt.Sprint(out["name"]))
		case "aws:eks/cluster:Cluster":
			// EKS reports the service CIDR it chose; the program leaves EKS's default.
			s.Clusters = append(s.Clusters, map[string]any{"name": out["name"], "endpoint": out["endpoint"], "version": out["version"], "serviceIPv4CIDR": "172.20.0.0/16"})
		}
	}
	require.NotEmpty(t, tagged, "the state holds discovery-tagged subnets")
	require.Greater(t, len(s.Subnets), len(tagged), "and others, which Karpenter must pass over")
	require.NotEmpty(t, s.SecurityGroups, "the state tags a security group for discovery")
	require.NotEmpty(t, s.Queues, "the state holds the interruption queue")
	require.Len(t, s.Clusters, 1, "the state holds the EKS cluster")
	return s, tagged
}

// stackZones is the stack's availabilityZones output, from its state.
func stackZones(t *testing.T, resources []apitype.ResourceV3) []string {
	for _, r := range resources {
		if string(r.Type) == "pulumi:pulumi:Stack" {
			zs, _ := r.Outputs["availabilityZones"].([]any)
			var out []string
			for _, z := range zs {
				name, _, _ := strings.Cut(fmt.Sprint(z), " (") // "us-west-2b (usw2-az2)"
				out = append(out, name)
			}
			require.NotEmpty(t, out, "the stack's availabilityZones output")
			return out
		}
	}
	require.Fail(t, "no stack resource in the state")
	return nil
}

// startKarpenter runs Karpenter until the test ends. Its settings are the literal environment
// of the karpenter Deployment the stack's Helm release made (CLUSTER_NAME, INTERRUPTION_QUEUE,
// CLUSTER_ENDPOINT, batch windows, feature gates …); only what a pod gets from its node differs
// (ports on loopback, the kubeconfig, no leader election for a single process).
func startKarpenter(t *testing.T, ctx context.Context, core kubernetes.Interface, kubeconfig, work string, resources []apitype.ResourceV3) *karpenter {
	bin := mustEnv(t, "E2E_KARPENTER")
	seed, nodeSubnets := seedFromState(t, resources)
	seedPath := filepath.Join(work, "karpenter-seed.json")
	writeJSON(t, seedPath, seed)

	dep, err := core.AppsV1().Deployments(wellknown.KarpenterNamespace).Get(ctx, wellknown.KarpenterRelease, metav1.GetOptions{})
	require.NoError(t, err, "the stack's Karpenter release made its Deployment")
	var env []string
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name != "controller" {
			continue
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env = append(env, e.Name+"="+e.Value)
			}
		}
	}
	require.NotEmpty(t, env, "the karpenter Deployment's controller container has its settings")
	assert.Contains(t, env, "METRICS_PORT=8080", "the stack's Karpenter serves metrics on the port its Service targets (docs/operations.md, Metrics)")

	k := &karpenter{control: freeLoopback(t), logPath: filepath.Join(work, "karpenter.log"), zones: stackZones(t, resources), nodeSubnets: nodeSubnets, metrics: freeLoopback(t)}
	logFile, err := os.Create(k.logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin)
	cmd.Env = append(append(os.Environ(), env...),
		"KUBECONFIG="+kubeconfig,
		"METRICS_PORT="+port(k.metrics), "HEALTH_PROBE_PORT="+port(freeLoopback(t)),
		"DISABLE_LEADER_ELECTION=true",
		"LUX_KARPENTER_SEED="+seedPath, "LUX_KARPENTER_CONTROL="+k.control,
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // it dies with the test, however the test ends
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = logFile.Close()
		if t.Failed() {
			t.Logf("karpenter's log (last lines):\n%s", tail(k.logPath, 40))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := k.account(); err == nil {
			return k
		}
		select {
		case err := <-exited:
			t.Fatalf("karpenter exited: %v\n%s", err, tail(k.logPath, 40))
		case <-time.After(200 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "karpenter did not start in 30 s:\n%s", tail(k.logPath, 40))
	}
}

// karpenterAccount is hack/karpenter's Account: the fake EC2 and IAM as Karpenter left them.
type karpenterAccount struct {
	Instances []struct {
		ID           string `json:"id"`
		Type         string `json:"type"`
		Zone         string `json:"zone"`
		Subnet       string `json:"subnet"`
		CapacityType string `json:"capacityType"`
		State        string `json:"state"`
	} `json:"instances"`
	LaunchTemplates  []string `json:"launchTemplates"`
	InstanceProfiles []string `json:"instanceProfiles"`
	QueuedMessages   int      `json:"queuedMessages"`
}

func (k *karpenter) account() (karpenterAccount, error) {
	var a karpenterAccount
	resp, err := http.Get("http://" + k.control + "/account")
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	return a, json.NewDecoder(resp.Body).Decode(&a)
}

// interrupt puts EC2's spot interruption warning for the instance on the queue.
func (k *karpenter) interrupt(t tb, instanceID string) {
	k.mu.Lock()
	k.interrupted = append(k.interrupted, time.Now())
	k.mu.Unlock()
	resp, err := http.Post("http://"+k.control+"/interrupt?instance="+instanceID, "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func freeLoopback(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func port(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }

func tail(path string, n int) string {
	raw, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// assertAccountEmpty: what Karpenter made in AWS went with the stack.
func assertAccountEmpty(t *testing.T, k *karpenter) {
	acct, err := k.account()
	require.NoError(t, err)
	assert.Empty(t, acct.Instances, "no instance left")
	assert.Empty(t, acct.LaunchTemplates, "no launch template left")
	assert.Empty(t, acct.InstanceProfiles, "no instance profile left")
}

// logLines are Karpenter's log lines that mention s.
func (k *karpenter) logLines(s string) string {
	raw, _ := os.ReadFile(k.logPath)
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// awaitGone waits until Karpenter has removed the pool's NodeClaims and the instance is
// terminated in the fake account.
func (k *karpenter) awaitGone(t tb, ctx context.Context, kube dynamic.Interface, pool, instance string, timeout time.Duration, msg string) {
	require.Eventually(t, func() bool {
		acct, err := k.account()
		if err != nil || len(poolClaims(t, ctx, kube, pool)) > 0 {
			return false
		}
		for _, in := range acct.Instances {
			if in.ID == instance {
				return false
			}
		}
		return true
	}, timeout, 500*time.Millisecond, msg)
}
