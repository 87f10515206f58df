package jobhooks_test

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/jobhooks"
)

// fakeNvidiaSMI stands in for nvidia-smi as the NVIDIA runtime mounts it: the GPU's facts,
// the CUDA version in its banner, and for each utilization query the next line of the
// samples file, then nothing (a GPU at rest).
const fakeNvidiaSMI = `#!/usr/bin/env bash
[[ -n ${FAKE_SMI_FAIL:-} ]] && { echo "$FAKE_SMI_FAIL"; exit 9; }
case "$*" in
*"--query-gpu=name,driver_version,memory.total"*)
	[[ -n ${FAKE_SMI_WARN:-} ]] && echo "$FAKE_SMI_WARN"
	echo "${FAKE_SMI_GPU:-Tesla T4, 570.133.20, 15360 MiB}" ;;
*"--query-gpu=utilization.gpu,memory.used"*)
	n=$(( $(cat "$FAKE_SMI_SAMPLES.n" 2>/dev/null || echo 0) + 1 ))
	echo "$n" >"$FAKE_SMI_SAMPLES.n"
	sed -n "${n}p" "$FAKE_SMI_SAMPLES" ;;
"") echo "| NVIDIA-SMI 570.133.20    Driver Version: 570.133.20    CUDA Version: 12.8     |" ;;
*) echo "stand-in nvidia-smi: $* is not faked" >&2; exit 2 ;;
esac
`

// host is where a hook or the sampler runs: the hooks as the ConfigMap mounts them, PATH,
// and the machine's facts the sampler reads (its /dev, /proc and DMI), in a directory.
type host struct {
	dir, hooks, temp, summary, bin string
	env                            []string
}

// machine is a GPU node as the sampler sees it: booted at boot, the container's PID 1
// started pid1After later, a T4 device unless noDevice.
type machine struct {
	boot      int64
	pid1After time.Duration
	noDevice  bool
	withSMI   bool
	samples   string
	instance  string // g4dn.xlarge when empty
}

func newHost(t *testing.T, m machine) *host {
	t.Helper()
	h := &host{dir: t.TempDir()}
	h.hooks, h.temp, h.bin = filepath.Join(h.dir, "hooks"), filepath.Join(h.dir, "temp"), filepath.Join(h.dir, "bin")
	h.summary = filepath.Join(h.dir, "step_summary")
	for _, d := range []string{h.hooks, h.temp, h.bin, filepath.Join(h.dir, "dmi"), filepath.Join(h.dir, "dev"), filepath.Join(h.dir, "proc", "1")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for key, script := range jobhooks.Files() {
		require.NoError(t, os.WriteFile(filepath.Join(h.hooks, key), []byte(script), 0o555))
	}
	if m.withSMI {
		require.NoError(t, os.WriteFile(filepath.Join(h.bin, "nvidia-smi"), []byte(fakeNvidiaSMI), 0o755))
	}
	if !m.noDevice {
		require.NoError(t, os.WriteFile(filepath.Join(h.dir, "dev", "nvidia0"), nil, 0o644))
	}
	// proc(5): the host's boot time in /proc/stat; the start of PID 1, field 22 of its stat,
	// in clock ticks after boot (USER_HZ, 100 on Linux).
	require.NoError(t, os.WriteFile(filepath.Join(h.dir, "proc", "stat"), []byte(fmt.Sprintf("cpu  1 2 3 4\nbtime %d\nprocesses 99\n", m.boot)), 0o644))
	stat := "1 (tail -f) S 0 1 1 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 " + strconv.FormatInt(int64(m.pid1After.Seconds()*100), 10) + " 2400000 200 18446744073709551615\n"
	require.NoError(t, os.WriteFile(filepath.Join(h.dir, "proc", "1", "stat"), []byte(stat), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(h.dir, "samples"), []byte(m.samples), 0o644))
	instance := m.instance
	if instance == "" {
		instance = "g4dn.xlarge"
	}
	require.NoError(t, os.WriteFile(filepath.Join(h.dir, "dmi", "product_name"), []byte(instance+"\n"), 0o444))
	h.env = append(os.Environ(), "PATH="+h.bin+":/usr/bin:/bin", "RUNNER_TEMP="+h.temp, "GITHUB_STEP_SUMMARY="+h.summary,
		"FAKE_SMI_SAMPLES="+filepath.Join(h.dir, "samples"), "GPUCI_SAMPLE_SECONDS=0.05",
		"GPUCI_DMI_DIR="+filepath.Join(h.dir, "dmi"), "GPUCI_DEV_DIR="+filepath.Join(h.dir, "dev"), "GPUCI_PROC_DIR="+filepath.Join(h.dir, "proc"),
		"GPUCI_POOL=gpu-spot", "GPUCI_CAPACITY=spot, on-demand when spot is short", "GPUCI_PRICES=g4dn.xlarge=0.2497 g5.xlarge=0.5328 g5.12xlarge=2.2",
		"GPUCI_PRICES_ON_DEMAND=g4dn.xlarge=0.526 g5.xlarge=1.006 g5.12xlarge=5.672", "GPUCI_GPUS=g4dn.xlarge=1 g5.12xlarge=4 g5.xlarge=1",
		"GPUCI_GITHUB_PER_MINUTE=0.052", "GPUCI_PRICES_SOURCE=test prices")
	return h
}

// entryPoints are the .js files the runner is given for each hook script (k8s.JobHookEnv).
var entryPoints = map[string]string{jobhooks.JobStartedKey: jobhooks.JobStartedEntryKey, jobhooks.JobCompletedKey: jobhooks.JobCompletedEntryKey}

// hook runs a job hook as the runner does: its .js entry point by the runner's own node
// (actions/runner v2.336.0 HostContext.cs GetDefaultShellForScript: a .js hook's
// externals/node20/bin/node), in the job's environment. The entry point runs the script with
// /bin/bash and the PATH GPUCI_HOOKS_PATH names: here the host's, where its stand-ins are.
func (h *host) hook(t *testing.T, key string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(nodeBinary(t), filepath.Join(h.hooks, entryPoints[key]))
	cmd.Env = append(append(h.env, "GPUCI_HOOKS_PATH="+h.bin+":/usr/bin:/bin"), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// nodeBinary is the Node.js the tests run the entry points with, as the runner runs them with
// its own: required, never skipped.
func nodeBinary(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "the job hooks' entry points are .js files the runner's node runs: the tests need Node.js on PATH")
	return node
}

// postStart runs the sampler as the kubelet runs the job container's postStart hook (the
// command k8s.JobPodTemplate gives it), its log and termination message in files.
func (h *host) postStart(t *testing.T, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("sh", filepath.Join(h.hooks, jobhooks.GPUSamplerKey))
	cmd.Env = append(h.env, append([]string{"GPUCI_LOG=" + filepath.Join(h.dir, "container.log"), "GPUCI_TERMINATION_LOG=" + filepath.Join(h.dir, "termination-log")}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (h *host) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, name))
	require.NoError(t, err)
	return string(b)
}

func (h *host) summaryText(t *testing.T) string {
	t.Helper()
	s := h.read(t, "step_summary")
	t.Logf("summary:\n%s", s)
	return s
}

func stopPid(t *testing.T, file string) {
	_ = exec.Command("kill", strconv.Itoa(pidIn(t, file))).Run()
}

// pidIn is the pid of a pid file the hooks write ("<pid> <start time>").
func pidIn(t *testing.T, file string) int {
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	fields := strings.Fields(string(b))
	require.Len(t, fields, 2, "a pid and its start time: %q", b)
	pid, err := strconv.Atoi(fields[0])
	require.NoError(t, err)
	return pid
}

// Four samples (utilization %, memory MiB): mean (10+90+100+0)/4 = 50%, peak 100%, memory
// peak 7000 MiB.
const fourSamples = "10, 1200\n90, 7000\n100, 6500\n0, 300\n"

func TestARunnerFormSummaryHoldsEveryFieldFromTheSamples(t *testing.T) {
	t.Parallel()
	// The job started ten minutes ago by the hooks' clock (its start moved back, the completed
	// hook's now fixed); its node booted 100 s before and the runner came up 48 s after that.
	started := time.Now().Add(-10 * time.Minute).Unix()
	h := newHost(t, machine{boot: started - 100, pid1After: 48 * time.Second, withSMI: true, samples: fourSamples})
	out, err := h.hook(t, jobhooks.JobStartedKey, "GPUCI_JOB_FORM=runner", "GPUCI_ZONE=us-west-2b")
	require.NoError(t, err, out)
	t.Cleanup(func() { stopPid(t, filepath.Join(h.temp, "gpuci", "sampler")) })
	assert.Contains(t, out, "GPU: Tesla T4, 570.133.20, 15360 MiB, sampling")
	require.NoError(t, os.WriteFile(filepath.Join(h.temp, "gpuci", "started"), []byte(strconv.FormatInt(started, 10)), 0o644))
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(h.temp, "gpuci", "log"))
		return strings.Count(string(b), "gpuci: sample ") == 4
	}, 10*time.Second, 50*time.Millisecond, "the sampler runs through the job")

	// Its pod was bound to a spot node on Kubernetes 1.36 (k8s.LaunchedCapacityPolicy).
	out, err = h.hook(t, jobhooks.JobCompletedKey, "GPUCI_JOB_FORM=runner", "GPUCI_LAUNCHED_CAPACITY=spot", "GPUCI_NOW="+strconv.FormatInt(started+600, 10), "GPUCI_SAMPLE_SECONDS=5")
	require.NoError(t, err, out)
	summary := h.summaryText(t)
	for _, want := range []string{
		"### GPU job on gpu-spot: 10.0 min on g4dn.xlarge",
		"| Instance | g4dn.xlarge in us-west-2b, spot |",
		// booted at started-100, runner up 48 s later, the job 52 s after that.
		"| Wait | a new node (cold): node booted → runner up 48 s → job start 52 s; queued before it: `gpuci stats` |",
		"| GPU | Tesla T4, driver 570.133.20, CUDA 12.8, 15360 MiB |",
		"| GPU use | 50% mean, 100% peak; memory peak 7000 MiB (4 samples) |",
		// 10 min at $0.2497/h = $0.0416; at $0.052/min = $0.5200; no kernel in half the
		// readings, over the ten minutes they cover (the sampler starts with the job): $0.0208.
		"| Cost | $0.0416 here (g4dn.xlarge at $0.2497/h), $0.5200 at GitHub's price ($0.052/min) |",
		"| No kernel running | $0.0208: 50% of the 10.0 min sampled (4 readings of nvidia-smi's utilization.gpu, each its last 1/6–1 s, every 5 s) |",
		"test prices",
	} {
		assert.Contains(t, summary, want)
	}
	// The README's sample is this summary's table.
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	for _, line := range strings.Split(summary, "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| |") {
			assert.Contains(t, string(readme), line+"\n", "the README's sample job summary")
		}
	}
	pid := pidIn(t, filepath.Join(h.temp, "gpuci", "sampler"))
	assert.Eventually(t, func() bool { return exec.Command("kill", "-0", strconv.Itoa(pid)).Run() != nil }, 5*time.Second, 50*time.Millisecond, "the sampler is stopped with the job")
}

// apiServer stands in for the API server as a container-form runner's hooks read it, with
// the runner's token:
//   - the job container's log (GET .../pods/<job pod>/log?container=job&follow=true), as the
//     follower reads it: "waiting to start" (400) for the first requests, as while the job pod
//     is scheduled and pulled, then the container's log, read from a file when asked;
//   - a Node (GET /api/v1/nodes/<name>), Karpenter's capacity-type label on it, its JSON
//     indented for curl's user agent as the API server does (k8s.io/apiserver v0.36.3
//     pkg/endpoints/handlers/negotiation/negotiate.go:116), compact otherwise.
type apiServer struct {
	*httptest.Server
	served atomic.Int32

	mu    sync.Mutex
	paths []string // every request's path, as the server received it
}

func (s *apiServer) requested() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.paths)
}

func newAPIServer(t *testing.T, logFile, wantPath string, waiting int32, nodes map[string]string) *apiServer {
	return newAPIServerWithPod(t, logFile, wantPath, waiting, nodes, time.Time{})
}

// newAPIServerWithPod also serves the job pod (GET .../pods/<job pod>), bound to its node at
// bound (its PodScheduled condition), as the API server answers curl: indented JSON.
func newAPIServerWithPod(t *testing.T, logFile, wantPath string, waiting int32, nodes map[string]string, bound time.Time) *apiServer {
	s := &apiServer{}
	var asked atomic.Int32
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer runner-token" {
			http.Error(w, `{"kind":"Status","code":401}`, http.StatusUnauthorized)
			return
		}
		if name, ok := strings.CutPrefix(r.URL.Path, "/api/v1/nodes/"); ok && nodes[name] != "" {
			node := map[string]any{"kind": "Node", "apiVersion": "v1", "metadata": map[string]any{"name": name, "labels": map[string]string{
				"karpenter.sh/nodepool": "gpu-spot-container", "karpenter.sh/capacity-type": nodes[name], "node.kubernetes.io/instance-type": "g4dn.xlarge",
			}}}
			var b []byte
			if strings.HasPrefix(r.UserAgent(), "curl") {
				b, _ = json.MarshalIndent(node, "", "  ")
			} else {
				b, _ = json.Marshal(node)
			}
			_, _ = w.Write(b)
			return
		}
		if !bound.IsZero() && r.URL.Path == strings.TrimSuffix(wantPath, "/log") {
			// A condition's fields in the order the API server writes them (k8s.io/api
			// core/v1 PodCondition's field order).
			type condition struct {
				Type               string  `json:"type"`
				Status             string  `json:"status"`
				LastProbeTime      *string `json:"lastProbeTime"`
				LastTransitionTime string  `json:"lastTransitionTime"`
			}
			pod := map[string]any{"kind": "Pod", "apiVersion": "v1", "metadata": map[string]any{"name": "job"},
				"spec": map[string]any{"securityContext": map[string]any{"seccompProfile": map[string]any{"type": "RuntimeDefault"}}},
				"status": map[string]any{"phase": "Pending", "conditions": []condition{
					{"Initialized", "False", nil, bound.Add(time.Second).UTC().Format(time.RFC3339)},
					{"PodScheduled", "True", nil, bound.UTC().Format(time.RFC3339)},
				}}}
			b, _ := json.MarshalIndent(pod, "", "  ")
			_, _ = w.Write(b)
			return
		}
		if r.URL.Path != wantPath || r.URL.Query().Get("container") != "job" || r.URL.Query().Get("follow") != "true" {
			http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
			return
		}
		if asked.Add(1) <= waiting {
			http.Error(w, `{"kind":"Status","message":"container \"job\" in pod is waiting to start: ContainerCreating","code":400}`, http.StatusBadRequest)
			return
		}
		b, err := os.ReadFile(logFile)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(b)
		s.served.Add(1)
	}))
	t.Cleanup(s.Close)
	return s
}

// containerRunner is a container-form runner's environment: on a system node (no GPU, no
// nvidia-smi), with its account's token and the API server's address, as the kubelet gives
// every pod (the serviceaccount volume, KUBERNETES_SERVICE_HOST/PORT).
func containerRunner(t *testing.T, h *host, api *apiServer, podName string) []string {
	sa := filepath.Join(h.dir, "serviceaccount")
	require.NoError(t, os.MkdirAll(sa, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sa, "namespace"), []byte("arc-runners"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sa, "token"), []byte("runner-token"), 0o644))
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw})
	require.NoError(t, os.WriteFile(filepath.Join(sa, "ca.crt"), ca, 0o644))
	host, port, ok := strings.Cut(strings.TrimPrefix(api.URL, "https://"), ":")
	require.True(t, ok)
	// The runner's account is of the runners' namespace; its job pods are in its pool's
	// (k8s: ACTIONS_RUNNER_KUBERNETES_NAMESPACE), where the hooks start them.
	return []string{"GPUCI_JOB_FORM=container", "GPUCI_SERVICEACCOUNT_DIR=" + sa, "KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port,
		"ACTIONS_RUNNER_POD_NAME=" + podName, "ACTIONS_RUNNER_KUBERNETES_NAMESPACE=arc-jobs-gpu-spot-container", "PATH=/usr/bin:/bin", "GPUCI_FOLLOW_RETRY_SECONDS=0.05"}
}

// A container-form job: the runner's hooks on a system node, the GPU in the job pod. The
// sampler runs as the job container's postStart; the runner's follower reads the container's
// log through the API server while the job runs; the completed hook sums it up.
func TestAContainerFormSummaryComesFromTheJobPodsLog(t *testing.T) {
	t.Parallel()
	// The job started ten minutes ago; a node was launched for its pod, booting 40 s after the
	// job's start; the job container started 48 s after the boot.
	started := time.Now().Add(-10 * time.Minute).Unix()
	gpuNode := newHost(t, machine{boot: started + 40, pid1After: 48 * time.Second, withSMI: true, samples: fourSamples})
	const node = "ip-10-0-1-2.us-west-2.compute.internal"
	out, err := gpuNode.postStart(t, "GPUCI_ZONE=us-west-2a", "GPUCI_NODE="+node, "GPUCI_PIDFILE="+filepath.Join(gpuNode.dir, "sampler"))
	require.NoError(t, err, out)
	t.Cleanup(func() { stopPid(t, filepath.Join(gpuNode.dir, "sampler")) }) // the pod's end
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(gpuNode.dir, "container.log"))
		return strings.Count(string(b), "gpuci: sample ") == 4
	}, 10*time.Second, 50*time.Millisecond, "the sampler runs through the job")

	// A runner pod's name longer than the hooks keep: its job pod is the first 54 characters
	// and -workflow (runner-container-hooks v0.8.1 constants.ts getJobPodName).
	runnerPod := "lux-gpu-t4-container-x7k2p-runner-abcde-0123456789-0123456789"
	// Bound to the node 70 s after the job's start (30 s after the node booted).
	api := newAPIServerWithPod(t, filepath.Join(gpuNode.dir, "container.log"), "/api/v1/namespaces/arc-jobs-gpu-spot-container/pods/"+runnerPod[:54]+"-workflow/log", 3,
		map[string]string{node: "on-demand"}, time.Unix(started+70, 0)) // spot was short
	runner := newHost(t, machine{noDevice: true})
	env := containerRunner(t, runner, api, runnerPod)
	out, err = runner.hook(t, jobhooks.JobStartedKey, env...)
	require.NoError(t, err, "a container-form runner has no GPU, and its started hook passes: %s", out)
	t.Cleanup(func() { stopPid(t, filepath.Join(runner.temp, "gpuci", "follower")) }) // the runner pod's end
	require.NoError(t, os.WriteFile(filepath.Join(runner.temp, "gpuci", "started"), []byte(strconv.FormatInt(started, 10)), 0o644))
	require.Eventually(t, func() bool { return api.served.Load() > 0 }, 10*time.Second, 20*time.Millisecond,
		"the follower reads the log once the container runs")

	out, err = runner.hook(t, jobhooks.JobCompletedKey, append(env, "GPUCI_NOW="+strconv.FormatInt(started+600, 10), "GPUCI_SAMPLE_SECONDS=5")...)
	require.NoError(t, err, out)
	summary := runner.summaryText(t)
	for _, want := range []string{
		"### GPU job on gpu-spot: 10.0 min on g4dn.xlarge",
		"| Instance | g4dn.xlarge in us-west-2a, on-demand (spot was short) |",
		// node booted at started+40, the pod bound at +70, the container up at +88.
		"| Wait | a new node (cold): job start → node booted 40 s → pod bound 30 s → job container up 18 s; queued before it: `gpuci stats` |",
		"| GPU | Tesla T4, driver 570.133.20, CUDA 12.8, 15360 MiB |",
		"| GPU use | 50% mean, 100% peak; memory peak 7000 MiB (4 samples) |",
		// On-demand, priced as such: 10 min at $0.526/h = $0.0877. The readings cover the 512 s
		// after the job container started (its boot and pull are not theirs): no kernel in half
		// of them, $0.0374, not half of the whole job's cost.
		"| Cost | $0.0877 here (g4dn.xlarge at $0.5260/h), $0.5200 at GitHub's price ($0.052/min) |",
		"| No kernel running | $0.0374: 50% of the 8.5 min sampled (4 readings of nvidia-smi's utilization.gpu, each its last 1/6–1 s, every 5 s) |",
	} {
		assert.Contains(t, summary, want)
	}
}

func TestABrokenGPUFailsTheJobInItsFirstSeconds(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		m     machine
		env   []string
		title string
		want  string
	}{
		"no device": {machine{noDevice: true, withSMI: true}, nil, "No GPU", "no NVIDIA device in this container"},
		"driver not loaded": {machine{withSMI: true}, []string{"FAKE_SMI_FAIL=NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."},
			"GPU not usable", "nvidia-smi failed: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."},
	} {
		t.Run(name+", runner form: the started hook fails", func(t *testing.T) {
			t.Parallel()
			h := newHost(t, tc.m)
			start := time.Now()
			out, err := h.hook(t, jobhooks.JobStartedKey, append(tc.env, "GPUCI_JOB_FORM=runner")...)
			require.Error(t, err, "the hook fails, so the job does: %s", out)
			assert.Contains(t, out, "::error title="+tc.title+"::"+tc.want)
			assert.Less(t, time.Since(start), 5*time.Second, "in its first seconds")
			assert.NoFileExists(t, filepath.Join(h.temp, "gpuci", "sampler"), "and samples nothing")
		})
		t.Run(name+", container form: the postStart hook fails, and the summary says why", func(t *testing.T) {
			t.Parallel()
			h := newHost(t, tc.m)
			start := time.Now()
			out, err := h.postStart(t, tc.env...)
			require.Error(t, err, "the kubelet kills a container whose postStart failed: %s", out)
			assert.Less(t, time.Since(start), 5*time.Second, "in its first seconds")
			assert.Contains(t, h.read(t, "termination-log"), tc.title+": "+tc.want, "the container's status says why")
			assert.NotContains(t, h.read(t, "container.log"), "gpuci: sample")

			api := newAPIServer(t, filepath.Join(h.dir, "container.log"), "/api/v1/namespaces/arc-jobs-gpu-spot-container/pods/runner-1-workflow/log", 0, nil)
			runner := newHost(t, machine{noDevice: true})
			env := containerRunner(t, runner, api, "runner-1")
			out, err = runner.hook(t, jobhooks.JobStartedKey, env...)
			require.NoError(t, err, out)
			t.Cleanup(func() { stopPid(t, filepath.Join(runner.temp, "gpuci", "follower")) })
			require.Eventually(t, func() bool { return api.served.Load() > 0 }, 10*time.Second, 20*time.Millisecond)
			out, err = runner.hook(t, jobhooks.JobCompletedKey, env...)
			require.NoError(t, err, "the completed hook never fails the job: %s", out)
			assert.Contains(t, out, "::error title=The job's GPU::"+tc.title+": "+tc.want, "the job's log says why")
			assert.Contains(t, runner.summaryText(t), "| GPU | "+tc.title+": "+tc.want)
		})
	}
}

// A follower whose job pod never comes (its job failed before Initialize containers, the
// pod was refused) gives up after as long as the hooks wait for the pod, reading nothing.
func TestTheFollowerGivesUpWithoutAJobPod(t *testing.T) {
	t.Parallel()
	api := newAPIServer(t, "/nonexistent", "/api/v1/namespaces/arc-jobs-gpu-spot-container/pods/runner-2-workflow/log", 1<<30, nil)
	runner := newHost(t, machine{noDevice: true})
	out, err := runner.hook(t, jobhooks.JobStartedKey, append(containerRunner(t, runner, api, "runner-2"), "ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS=1")...)
	require.NoError(t, err, out)
	pid := strconv.Itoa(pidIn(t, filepath.Join(runner.temp, "gpuci", "follower")))
	t.Cleanup(func() { _ = exec.Command("kill", pid).Run() })
	assert.Eventually(t, func() bool { return exec.Command("kill", "-0", pid).Run() != nil }, 10*time.Second, 100*time.Millisecond,
		"the follower stops by itself")
}

// A GPU that reports no utilization (nvidia-smi's "[N/A]", under MIG or vGPU) is said to, not
// blamed on a short job; a memory reading of "[N/A]" is never a peak of 0, and a number among
// them still is the peak.
func TestNotReportedReadingsAreSaidSo(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ samples, want string }{
		"no utilization":       {"[N/A], [N/A]\n[N/A], 5100\n[N/A], 4000\n", "| GPU use | not reported: nvidia-smi answered [N/A] for utilization in all 3 samples (MIG or vGPU); memory peak 5100 MiB |"},
		"no memory, first":     {"[N/A], [N/A]\n40, [N/A]\n60, [N/A]\n", "| GPU use | 50% mean, 60% peak; memory not reported (2 samples) |"},
		"memory after a blank": {"30, [N/A]\n50, 2048\n", "| GPU use | 40% mean, 50% peak; memory peak 2048 MiB (2 samples) |"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			started := time.Now().Add(-5 * time.Minute).Unix()
			h := newHost(t, machine{boot: started - 100, pid1After: 48 * time.Second, withSMI: true, samples: tc.samples})
			out, err := h.hook(t, jobhooks.JobStartedKey, "GPUCI_JOB_FORM=runner")
			require.NoError(t, err, out)
			t.Cleanup(func() { stopPid(t, filepath.Join(h.temp, "gpuci", "sampler")) })
			lines := strings.Count(tc.samples, "\n")
			require.Eventually(t, func() bool {
				b, _ := os.ReadFile(filepath.Join(h.temp, "gpuci", "log"))
				return strings.Count(string(b), "gpuci: sample ") == lines
			}, 10*time.Second, 50*time.Millisecond, "the sampler's readings")
			out, err = h.hook(t, jobhooks.JobCompletedKey, "GPUCI_JOB_FORM=runner", "GPUCI_NOW="+strconv.FormatInt(started+300, 10))
			require.NoError(t, err, out)
			assert.Contains(t, h.summaryText(t), tc.want)
		})
	}
}

// The job's code can write its own container's log, and so every line the runner's completed
// hook reads back; that hook holds the container hooks' token, which reads the runners'
// Secrets. A hostile job's lines are text and nothing more: a bash arithmetic injection runs
// nothing, a node name that walks the API's paths is never requested, a forged pid kills
// nothing.
func TestAHostileJobsLinesRunNothing(t *testing.T) {
	t.Parallel()
	gpuNode := newHost(t, machine{noDevice: true})
	pwned := filepath.Join(t.TempDir(), "pwned")
	hostile := strings.Join([]string{
		"gpuci: started 1",
		"gpuci: node-up x[$(touch " + pwned + ")]",
		"gpuci: pod-up a[$(touch " + pwned + ")]",
		"gpuci: node ../namespaces/arc-runners/secrets/arc-github-credentials",
		"gpuci: instance g4dn.xlarge",
		"gpuci: sample 50, 100",
	}, "\n") + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(gpuNode.dir, "container.log"), []byte(hostile), 0o644))
	const logPath = "/api/v1/namespaces/arc-jobs-gpu-spot-container/pods/runner-3-workflow/log"
	api := newAPIServer(t, filepath.Join(gpuNode.dir, "container.log"), logPath, 0, nil)
	runner := newHost(t, machine{noDevice: true})
	env := containerRunner(t, runner, api, "runner-3")
	out, err := runner.hook(t, jobhooks.JobStartedKey, env...)
	require.NoError(t, err, out)
	follower := pidIn(t, filepath.Join(runner.temp, "gpuci", "follower"))
	t.Cleanup(func() { _ = exec.Command("kill", strconv.Itoa(follower)).Run() })
	require.Eventually(t, func() bool { return api.served.Load() > 0 }, 10*time.Second, 20*time.Millisecond)
	// A forged pid file naming a live process of the runner's that job-started.sh did not
	// start: with no start time, or a start time not its own, it is not stopped.
	foreign := exec.Command("sleep", "60")
	require.NoError(t, foreign.Start())
	t.Cleanup(func() { _ = foreign.Process.Kill(); _ = foreign.Wait() })
	fp := strconv.Itoa(foreign.Process.Pid)
	require.NoError(t, os.WriteFile(filepath.Join(runner.temp, "gpuci", "sampler"), []byte(fp+" 1"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(runner.temp, "gpuci", "follower"), []byte(fp), 0o644))

	out, err = runner.hook(t, jobhooks.JobCompletedKey, env...)
	require.NoError(t, err, "the completed hook never fails the job: %s", out)
	assert.NoFileExists(t, pwned, "the hostile line ran a command in the runner")
	stat, err := os.ReadFile("/proc/" + fp + "/stat")
	require.NoError(t, err)
	state := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))[0]
	assert.Equal(t, "S", state, "the forged pids' process lives on, asleep (a killed one, not yet reaped by the test, is Z)")
	for _, p := range api.requested() {
		assert.True(t, p == logPath || p == strings.TrimSuffix(logPath, "/log"), "the runner asked the API server for %s", p)
	}
	s := runner.summaryText(t)
	assert.Contains(t, s, "| Wait | not measured")
	assert.Contains(t, s, "| Instance | g4dn.xlarge, spot, on-demand when spot is short |", "no capacity type from a node the line named")
}

// A runner-form job's node, as the API server annotated its pod when it bound it
// (GPUCI_LAUNCHED_CAPACITY), names its capacity type and its price in a pool of both; without
// it (a control plane before 1.36), or with anything but a capacity type, the summary says the
// pool's types at the pool's price.
func TestARunnerFormSummarySaysWhatItsNodeIs(t *testing.T) {
	t.Parallel()
	for launched, want := range map[string][2]string{
		// 5 min at $0.2497/h = $0.0208; at $0.526/h = $0.0438.
		"spot":               {"| Instance | g4dn.xlarge, spot |", "| Cost | $0.0208 here (g4dn.xlarge at $0.2497/h)"},
		"on-demand":          {"| Instance | g4dn.xlarge, on-demand (spot was short) |", "| Cost | $0.0438 here (g4dn.xlarge at $0.5260/h)"},
		"":                   {"| Instance | g4dn.xlarge, spot, on-demand when spot is short |", "| Cost | $0.0208 here (g4dn.xlarge at $0.2497/h)"},
		"on-demand$(reboot)": {"| Instance | g4dn.xlarge, spot, on-demand when spot is short |", "| Cost | $0.0208 here (g4dn.xlarge at $0.2497/h)"},
		"reserved":           {"| Instance | g4dn.xlarge, spot, on-demand when spot is short |", "| Cost | $0.0208 here (g4dn.xlarge at $0.2497/h)"},
	} {
		t.Run(fmt.Sprintf("%q", launched), func(t *testing.T) {
			t.Parallel()
			h := newHost(t, machine{noDevice: true})
			state := filepath.Join(h.temp, "gpuci")
			require.NoError(t, os.MkdirAll(state, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(state, "log"), []byte("gpuci: instance g4dn.xlarge\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(state, "started"), []byte("1000"), 0o644))
			out, err := h.hook(t, jobhooks.JobCompletedKey, "GPUCI_JOB_FORM=runner", "GPUCI_LAUNCHED_CAPACITY="+launched, "GPUCI_NOW=1300")
			require.NoError(t, err, out)
			s := h.summaryText(t)
			assert.Contains(t, s, want[0])
			assert.Contains(t, s, want[1])
		})
	}
}

// An image without nvidia-smi (its NVIDIA_DRIVER_CAPABILITIES lacks utility) but with its GPU
// runs: the summary says why it has no samples.
func TestAnImageWithoutNvidiaSMIRunsUnsampled(t *testing.T) {
	t.Parallel()
	h := newHost(t, machine{boot: time.Now().Unix() - 3600, pid1After: time.Hour - time.Minute})
	out, err := h.postStart(t)
	require.NoError(t, err, out)
	log := h.read(t, "container.log")
	assert.Contains(t, log, "gpuci: note nvidia-smi is not in this image")
	assert.Contains(t, log, "gpuci: instance g4dn.xlarge")
}

// A job too short for a sample, or on a type without a price, still gets its summary, and
// the completed hook never fails the job.
func TestTheSummaryNeverFailsTheJob(t *testing.T) {
	t.Parallel()
	// A warm node: up an hour before the runner.
	h := newHost(t, machine{boot: time.Now().Unix() - 7200, pid1After: time.Hour, withSMI: true})
	require.NoError(t, os.WriteFile(filepath.Join(h.dir, "dmi", "product_name"), []byte("g6.xlarge\n"), 0o644))
	out, err := h.hook(t, jobhooks.JobStartedKey, "GPUCI_JOB_FORM=runner")
	require.NoError(t, err, out)
	out, err = h.hook(t, jobhooks.JobCompletedKey, "GPUCI_JOB_FORM=runner")
	require.NoError(t, err, out)
	s := h.summaryText(t)
	assert.Contains(t, s, "| Wait | a node up 60 min already (warm): node booted → runner up 3600 s")
	assert.Contains(t, s, "| GPU use | no sample")
	assert.Contains(t, s, "| Cost | no price for g6.xlarge |")
	assert.Regexp(t, regexp.MustCompile(`### GPU job on gpu-spot: 0\.[0-9] min on g6\.xlarge`), s)

	// Without anything of the started hook (it never ran), in either form, too.
	for _, form := range []string{"runner", "container"} {
		h = newHost(t, machine{})
		out, err = h.hook(t, jobhooks.JobCompletedKey, "GPUCI_JOB_FORM="+form)
		require.NoError(t, err, out)
		assert.Contains(t, h.summaryText(t), "| Wait | not measured")
	}
}

// A job that holds one GPU of a four-GPU node pays a quarter of the node, and its no-kernel
// share is of that quarter; a warning nvidia-smi prints among the GPUs' lines is said as a
// warning, never read as a GPU.
func TestAJobPaysForTheGPUsItHolds(t *testing.T) {
	t.Parallel()
	started := time.Now().Add(-10 * time.Minute).Unix()
	h := newHost(t, machine{boot: started - 100, pid1After: 48 * time.Second, withSMI: true, samples: fourSamples, instance: "g5.12xlarge"})
	out, err := h.hook(t, jobhooks.JobStartedKey, "GPUCI_JOB_FORM=runner", "FAKE_SMI_GPU=NVIDIA A10G, 570.133.20, 23028 MiB",
		"FAKE_SMI_WARN=WARNING: infoROM is corrupted at gpu 0000:00:1E.0")
	require.NoError(t, err, out)
	t.Cleanup(func() { stopPid(t, filepath.Join(h.temp, "gpuci", "sampler")) })
	require.NoError(t, os.WriteFile(filepath.Join(h.temp, "gpuci", "started"), []byte(strconv.FormatInt(started, 10)), 0o644))
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(h.temp, "gpuci", "log"))
		return strings.Count(string(b), "gpuci: sample ") == 4
	}, 10*time.Second, 50*time.Millisecond, "the sampler runs through the job")
	out, err = h.hook(t, jobhooks.JobCompletedKey, "GPUCI_JOB_FORM=runner", "GPUCI_LAUNCHED_CAPACITY=spot", "GPUCI_NOW="+strconv.FormatInt(started+600, 10), "GPUCI_SAMPLE_SECONDS=5")
	require.NoError(t, err, out)
	summary := h.summaryText(t)
	for _, want := range []string{
		"| GPU | NVIDIA A10G, driver 570.133.20, CUDA 12.8, 23028 MiB (nvidia-smi warned: WARNING: infoROM is corrupted at gpu 0000:00:1E.0) |",
		// 10 min of a quarter of $2.2/h = $0.0917; no kernel in half the readings: $0.0458.
		"| Cost | $0.0917 here (1 of the 4 GPUs of g5.12xlarge at $2.2000/h: $0.5500/h), $0.5200 at GitHub's price ($0.052/min) |",
		"| No kernel running | $0.0458: 50% of the 10.0 min sampled",
	} {
		assert.Contains(t, summary, want)
	}
}
