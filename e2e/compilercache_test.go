//go:build e2e

package e2e

// The compiler cache, through the path the stack gives a job: ccache (Debian's) with the
// settings the API server put in the pools' pods, each server's gate (the stack's own gpuci
// build, as the server's account) in front of bazel-remote (the pinned version, built from the
// module proxy), both with the flags of the live Deployments, credentials the way EKS Pod
// Identity hands them (a token file and a full URI, which a stand-in agent on 127.0.0.1
// answers only for that token, with that server's role's key), and gofakes3 for S3 on
// 127.0.0.1 behind a front that holds each request to the policy the program gave the role
// that signed it. Only addresses change: the listen addresses, S3's endpoint (plain HTTP here)
// and the service's host in ccache's URL.
//
// gpu-spot is read-write; gpu-spot-container reads gpu-spot's cache (the e2e's stack file
// says so: it stands for a pool that runs public repositories' pull requests).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// compilerCacheSources are the small C++ project both builds compile, one object each.
var compilerCacheSources = map[string]string{
	"vec.cpp":    "#include <vector>\nint sum(const std::vector<int>& v) { int s = 0; for (int x : v) s += x; return s; }\n",
	"scale.cpp":  "double scale(double x, double k) { return x * k; }\n",
	"kernel.cpp": "#include <array>\nstd::array<float, 4> axpy(float a, std::array<float, 4> x) { for (auto& v : x) v *= a; return x; }\n",
}

func compilerCacheBuilds(t *testing.T, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, resources []apitype.ResourceV3, gpuci, adminKubeconfig string) {
	ccache, server, fakeS3 := mustEnv(t, "E2E_CCACHE"), mustEnv(t, "E2E_BAZEL_REMOTE"), mustEnv(t, "E2E_GOFAKES3")
	bucketCM, err := core.CoreV1().ConfigMaps(wellknown.CompilerCacheNamespace).Get(ctx, k8s.CompilerCacheBucketConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	bucket := bucketCM.Data[k8s.CompilerCacheBucketKey]
	require.NotEmpty(t, bucket, "the bucket's name, as up wrote it")

	// Each server runs under its own account, the one its Pod Identity association names.
	associations := map[string]string{} // ServiceAccount → role ARN
	for _, r := range resources {
		if string(r.Type) == "aws:eks/podIdentityAssociation:PodIdentityAssociation" && r.Inputs["namespace"] == wellknown.CompilerCacheNamespace {
			associations[r.Inputs["serviceAccount"].(string)] = r.Outputs["roleArn"].(string)
		}
	}
	require.Len(t, associations, 2, "one association per server")
	servers := map[string]corev1.PodSpec{}
	for _, pool := range []string{"gpu-spot", "gpu-spot-container"} {
		d, err := core.AppsV1().Deployments(wellknown.CompilerCacheNamespace).Get(ctx, wellknown.CompilerCacheName(pool), metav1.GetOptions{})
		require.NoError(t, err)
		sa := d.Spec.Template.Spec.ServiceAccountName
		assert.Contains(t, associations[sa], "role/lux-gpu-ci-ccache-"+pool, "%s's account %s is bound to its pool's role", d.Name, sa)
		servers[pool] = d.Spec.Template.Spec
		require.Len(t, d.Spec.Template.Spec.Containers, 2, "%s: the server and its gate (the stack pins a gpuci)", d.Name)
	}
	// The gates run the very build the stack stored in its bucket (stack.BuildGpuci): the
	// object's key and its asset's hash are the file's SHA-256, which each server's fetch pins.
	sum := fileSHA256(t, gpuci)
	var stored []apitype.ResourceV3
	for _, r := range resources {
		if string(r.Type) == "aws:s3/bucketObjectv2:BucketObjectv2" {
			stored = append(stored, r)
		}
	}
	require.Len(t, stored, 1, "one gpuci in the stack's bucket")
	assert.Equal(t, wellknown.GpuciKey(sum), stored[0].Outputs["key"])
	source, _ := stored[0].Inputs["source"].(map[string]any)
	assert.Equal(t, sum, source["hash"], "the engine hashed the file it uploaded: %v", source)
	for pool, spec := range servers {
		require.Len(t, spec.InitContainers, 1, pool)
		assert.Contains(t, spec.InitContainers[0].Env, corev1.EnvVar{Name: "SHA256", Value: sum}, "%s's gate runs that build or nothing", pool)
	}
	dir := t.TempDir()
	gates := map[string]string{} // pool → its gate's kubeconfig, of the server's own account
	for pool, spec := range servers {
		gates[pool], _ = accountKubeconfig(t, ctx, core, adminKubeconfig, dir, wellknown.CompilerCacheNamespace, spec.ServiceAccountName)
	}

	// The settings where a job's code runs, as the API server admits the pods.
	// Each job's pod as ARC and the hooks make it, at an address of its own (a build here
	// connects from 127.0.0.1), and the job ARC recorded on its runner.
	arc := arcJobs{t: t, ctx: ctx, core: core, kube: kube}
	defer arc.cleanUp()
	runner := arc.runnerFormJob("lux-gpu-t4", "lux-gpu-t4-ccache-runner-a", "luxfi/app", mainWorkflowRef, "127.0.0.1")
	job := arc.containerFormJob("lux-gpu-t4-container", "lux-gpu-t4-container-ccache-runner-b", "luxfi/app", "luxfi/app/.github/workflows/ci.yml@refs/pull/9/merge", "127.0.0.1")
	writerEnv, readerEnv := ccacheEnv(t, runner.Spec.Containers[0]), ccacheEnv(t, job.Spec.Containers[0])
	assert.Equal(t, "gpu-spot", runner.Labels[wellknown.CompilerCacheLabel], "the runner-form runner may reach its pool's server")
	assert.Equal(t, "gpu-spot-container", job.Labels[wellknown.CompilerCacheLabel], "the container-form job pod its own")
	assert.Contains(t, readerEnv["CCACHE_REMOTE_STORAGE"], "|read-only")

	// Each server's role, as the program deployed its policy, stands behind an access key of
	// its own; its agent hands that key to that server only.
	roles, agents := map[string]s3Policy{}, map[string]podIdentityAgent{}
	for _, pool := range []string{"gpu-spot", "gpu-spot-container"} {
		var policy s3Policy
		for _, r := range resources {
			if string(r.Type) == "aws:iam/rolePolicy:RolePolicy" && strings.HasSuffix(string(r.URN), "::compiler-cache-"+pool) {
				require.NoError(t, json.Unmarshal([]byte(r.Inputs["policy"].(string)), &policy))
			}
		}
		require.NotEmpty(t, policy.Statement, "%s's role has its policy", pool)
		key := "ASIAE2E" + strings.ToUpper(strings.ReplaceAll(pool, "-", ""))
		roles[key], agents[pool] = policy, startPodIdentityAgent(t, dir, key)
	}
	s3, s3Backend := startFakeS3(t, ctx, fakeS3, bucket, roles)

	// The read-write server: a first build fills the bucket under the pool's prefix.
	rw := startCacheServer(t, ctx, core, server, gpuci, gates["gpu-spot"], servers["gpu-spot"], bucket, s3, agents["gpu-spot"], filepath.Join(dir, "rw-1"))
	src := writeSources(t, filepath.Join(dir, "work"))
	first := ccacheBuild(t, ccache, writerEnv, rw, src, filepath.Join(dir, "ccache-1"))
	assert.Equal(t, len(compilerCacheSources), first["cache_miss"], "a first build misses: %v", first)
	assert.GreaterOrEqual(t, first["remote_storage_write"], len(compilerCacheSources), "and writes its results to the server")
	var objects []string
	require.Eventually(t, func() bool {
		objects = listBucket(t, s3Backend, bucket)
		return len(objects) >= first["remote_storage_write"]
	}, 20*time.Second, 200*time.Millisecond, "the server uploads every entry to the bucket (asynchronously)")
	for _, o := range objects {
		assert.True(t, strings.HasPrefix(o, "gpu-spot/"), "%s is under the pool's prefix", o)
	}
	t.Logf("first build: %v; the bucket holds %d objects under gpu-spot/", nonZero(first), len(objects))

	// A new runner on a new node: an empty ccache directory, and a new server with an empty
	// disk (its pod rescheduled): every hit comes from the bucket.
	rw2 := startCacheServer(t, ctx, core, server, gpuci, gates["gpu-spot"], servers["gpu-spot"], bucket, s3, agents["gpu-spot"], filepath.Join(dir, "rw-2"))
	second := ccacheBuild(t, ccache, writerEnv, rw2, src, filepath.Join(dir, "ccache-2"))
	assert.Equal(t, len(compilerCacheSources), second["direct_cache_hit"]+second["preprocessed_cache_hit"], "every compilation a hit: %v", second)
	assert.Zero(t, second["cache_miss"], "no compilation missed")
	assert.Equal(t, len(compilerCacheSources), second["remote_storage_hit"], "each from the remote storage")
	t.Logf("second build, fresh runner and server: %v", nonZero(second))
	// The example workflow's report of it, as a job prints it, asking the gate what it failed.
	report := workflowReport(t, filepath.Join(dir, "ccache-2"), gateStorage(writerEnv, rw2))
	n := len(compilerCacheSources)
	assert.Contains(t, report, fmt.Sprintf("compiler cache: %d of %d compiler calls hit (100%%), %d from the pool's cache; 0 missed", n, n, n))
	assert.NotContains(t, report, "failed", "the server failed no read")

	// The bucket refuses the server (a role that lost its policy): bazel-remote answers each
	// read 500, which ccache counts as a plain miss; the gate counted them, and the report says so.
	refusing := refusingS3(t)
	broken := startCacheServer(t, ctx, core, server, gpuci, gates["gpu-spot"], servers["gpu-spot"], bucket, refusing, agents["gpu-spot"], filepath.Join(dir, "rw-refused"))
	missed := ccacheBuild(t, ccache, writerEnv, broken, src, filepath.Join(dir, "ccache-refused"))
	assert.Equal(t, n, missed["cache_miss"], "every read failed, so every compilation missed: %v", missed)
	assert.Zero(t, missed["remote_storage_error"], "and ccache saw no error (httpstorage.cpp:188-190): %v", missed)
	report = workflowReport(t, filepath.Join(dir, "ccache-refused"), gateStorage(writerEnv, broken))
	m := regexp.MustCompile(`the pool's cache server failed (\d+) of its (\d+) reads for this job`).FindStringSubmatch(report)
	require.NotNil(t, m, "the gate's count, in the job's report: %s", report)
	failed, _ := strconv.Atoi(m[1])
	assert.GreaterOrEqual(t, failed, n, "at least one failed read a compilation (ccache reads a manifest, then maybe a result)")
	assert.Equal(t, m[1], m[2], "and every read failed")

	// A stale object never links: depend mode, as the pools' pods set it (their env).
	staleObjectsNeverLink(t, ccache, writerEnv)

	// The read-only pool: its server reads gpu-spot's prefix; its builds hit and write nothing.
	ro := startCacheServer(t, ctx, core, server, gpuci, gates["gpu-spot-container"], servers["gpu-spot-container"], bucket, s3, agents["gpu-spot-container"], filepath.Join(dir, "ro"))
	before := listBucket(t, s3Backend, bucket)
	read := ccacheBuild(t, ccache, readerEnv, ro, src, filepath.Join(dir, "ccache-ro"))
	assert.Equal(t, len(compilerCacheSources), read["remote_storage_hit"], "a read-only pool's build hits the writer's cache: %v", read)
	require.NoError(t, os.WriteFile(filepath.Join(src, "new.cpp"), []byte("int fresh(int x) { return x - 1; }\n"), 0o644))
	fresh := ccacheBuild(t, ccache, readerEnv, ro, src, filepath.Join(dir, "ccache-ro-2"), "new.cpp")
	assert.Equal(t, 1, fresh["cache_miss"], "a new source misses: %v", fresh)
	assert.Zero(t, fresh["remote_storage_write"], "and its result is not written (read-only)")

	// A hostile job on the read-only pool writes anyway, by hand: its gate refuses it.
	key := strings.Repeat("ab", 32)
	for _, auth := range []string{"", "nobody:", "nobody:!"} {
		code, _ := cacheRequest(t, ctx, "127.0.0.1", ro, http.MethodPut, key, "planted", auth)
		assert.Equal(t, http.StatusForbidden, code, "a PUT with credentials %q is refused", auth)
	}

	// The read-write pool, where a pull request's job runs beside main's: it writes by hand
	// and is refused; it reads what main wrote; another repository's main reads nothing of
	// app's; a runner with no job yet, nothing at all.
	arc.runnerFormJob("lux-gpu-t4", "lux-gpu-t4-ccache-pr", "luxfi/app", "luxfi/app/.github/workflows/ci.yml@refs/pull/7/merge", "127.0.0.2")
	arc.runnerFormJob("lux-gpu-t4", "lux-gpu-t4-ccache-lib", "luxfi/lib", "luxfi/lib/.github/workflows/ci.yml@refs/heads/main", "127.0.0.3")
	arc.runnerFormJob("lux-gpu-t4", "lux-gpu-t4-ccache-idle", "", "", "127.0.0.4")
	for _, auth := range []string{"", "ccache:main"} {
		code, body := cacheRequest(t, ctx, "127.0.0.2", rw2, http.MethodPut, key, "planted by a pull request", auth)
		assert.Equal(t, http.StatusForbidden, code, "a pull request's PUT (credentials %q) is refused: %s", auth, body)
	}
	mainKey := strings.Repeat("cd", 32)
	code, body := cacheRequest(t, ctx, "127.0.0.1", rw2, http.MethodPut, mainKey, "main's object", "")
	require.Equal(t, http.StatusOK, code, "main's job writes by hand too: %s", body)
	code, body = cacheRequest(t, ctx, "127.0.0.2", rw2, http.MethodGet, mainKey, "", "")
	assert.Equal(t, http.StatusOK, code, "the pull request's build reads what main wrote")
	assert.Equal(t, "main's object", body)
	code, _ = cacheRequest(t, ctx, "127.0.0.3", rw2, http.MethodGet, mainKey, "", "")
	assert.Equal(t, http.StatusNotFound, code, "another repository's job does not get app's entry for the same key")
	for _, m := range []string{http.MethodGet, http.MethodPut} {
		code, _ = cacheRequest(t, ctx, "127.0.0.4", rw2, m, mainKey, "x", "")
		assert.Equal(t, http.StatusForbidden, code, "%s from a runner that has no job yet", m)
	}
	code, _ = cacheRequest(t, ctx, "127.0.0.1", rw2, http.MethodGet, key, "", "")
	assert.Equal(t, http.StatusNotFound, code, "what the pull request tried to plant is not there")
	require.Eventually(t, func() bool { return len(listBucket(t, s3Backend, bucket)) == len(before)+1 }, 20*time.Second, 200*time.Millisecond,
		"main's one entry reaches the bucket")
	for _, o := range listBucket(t, s3Backend, bucket) {
		assert.NotContains(t, o, key, "no object under the planted key")
	}

	// The S3 stand-in holds each server to its role, as S3 would: the read-only server's
	// credentials write nothing, the writer's reach no other prefix.
	for _, c := range []struct{ role, method, key string }{
		{"ASIAE2EGPUSPOTCONTAINER", http.MethodPut, "gpu-spot/ac/planted"},
		{"ASIAE2EGPUSPOT", http.MethodPut, "gpu-spot-container/ac/planted"},
		{"ASIAE2EGPUSPOT", http.MethodGet, "gpuci/linux-amd64/" + strings.Repeat("0", 64)},
	} {
		req, err := http.NewRequestWithContext(ctx, c.method, "http://"+s3+"/"+bucket+"/"+c.key, strings.NewReader("x"))
		require.NoError(t, err)
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+c.role+"/20261207/us-west-2/s3/aws4_request")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s %s as %s", c.method, c.key, c.role)
	}
}

// fileSHA256 is a file's SHA-256, hex.
func fileSHA256(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// mainWorkflowRef is a workflow run of main, as ARC records its job (jobWorkflowRef).
const mainWorkflowRef = "luxfi/app/.github/workflows/ci.yml@refs/heads/main"

// cacheRequest is a job's own request to a cache address, from the job's address (from):
// method on /ac/<key>, with basic credentials "user:password" if auth is not empty.
func cacheRequest(t *testing.T, ctx context.Context, from, addr, method, key, body, auth string) (int, string) {
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+"/ac/"+key, strings.NewReader(body))
	require.NoError(t, err)
	if user, pass, ok := strings.Cut(auth, ":"); ok {
		req.SetBasicAuth(user, pass)
	}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// arcJobs makes job pods as ARC and the hooks do, with the job ARC's listener records on each
// runner's EphemeralRunner when GitHub assigns it (a merge patch of status:
// cmd/ghalistener/scaler/scaler.go HandleJobStarted, gha-runner-scale-set-0.14.2), and the
// address the pod would have.
type arcJobs struct {
	t       *testing.T
	ctx     context.Context
	core    kubernetes.Interface
	kube    dynamic.Interface
	runners []string
	pods    []*corev1.Pod
}

// ephemeralRunner creates the EphemeralRunner name (with a job of repo at workflowRef unless
// repo is empty) and returns its UID.
func (a *arcJobs) ephemeralRunner(name, scaleSet, repo, workflowRef string) types.UID {
	er := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunner",
		"metadata": map[string]any{"name": name, "namespace": wellknown.RunnersNamespace, "labels": map[string]any{wellknown.ScaleSetLabel: scaleSet}},
		"spec":     map[string]any{"githubConfigUrl": "https://github.com/luxfi", "githubConfigSecret": scaleSet + "-gha-rs-github-secret", "runnerScaleSetId": int64(1)},
	}}
	runners := a.kube.Resource(ephemeralRunners).Namespace(wellknown.RunnersNamespace)
	made, err := runners.Create(a.ctx, er, metav1.CreateOptions{})
	require.NoError(a.t, err)
	a.runners = append(a.runners, name)
	if repo != "" {
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"jobRepositoryName": repo, "jobWorkflowRef": workflowRef, "jobId": "1", "workflowRunId": 1}})
		require.NoError(a.t, err)
		_, err = runners.Patch(a.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		require.NoError(a.t, err)
	}
	return made.GetUID()
}

// running makes the pod Running at ip, as its node's kubelet would report it.
func (a *arcJobs) running(pod *corev1.Pod, ip string) *corev1.Pod {
	made, err := a.core.CoreV1().Pods(pod.Namespace).Create(a.ctx, pod, metav1.CreateOptions{})
	require.NoError(a.t, err)
	a.pods = append(a.pods, made)
	pods := a.core.CoreV1().Pods(pod.Namespace)
	// The scheduler writes the pod's conditions meanwhile (no node fits yet): update the latest.
	require.NoError(a.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := pods.Get(a.ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		latest.Status.Phase, latest.Status.PodIP, latest.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
		made, err = pods.UpdateStatus(a.ctx, latest, metav1.UpdateOptions{})
		return err
	}))
	return made
}

// runnerFormJob is a runner-form job: its runner's pod, which its EphemeralRunner controls.
func (a *arcJobs) runnerFormJob(scaleSet, name, repo, workflowRef, ip string) *corev1.Pod {
	uid := a.ephemeralRunner(name, scaleSet, repo, workflowRef)
	pod := runnerPod(a.t, a.ctx, a.kube, scaleSet, name)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "actions.github.com/v1alpha1", Kind: "EphemeralRunner", Name: name, UID: uid, Controller: new(true), BlockOwnerDeletion: new(true)}}
	return a.running(pod, ip)
}

// containerFormJob is a container-form job: the job pod the hooks create for runner.
func (a *arcJobs) containerFormJob(scaleSet, runner, repo, workflowRef, ip string) *corev1.Pod {
	a.ephemeralRunner(runner, scaleSet, repo, workflowRef)
	return a.running(containerJobPod(a.t, a.ctx, a.core, a.kube, scaleSet, runner), ip)
}

func (a *arcJobs) cleanUp() {
	for _, p := range a.pods {
		_ = a.core.CoreV1().Pods(p.Namespace).Delete(a.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}
	for _, r := range a.runners {
		_ = a.kube.Resource(ephemeralRunners).Namespace(wellknown.RunnersNamespace).Delete(a.ctx, r, metav1.DeleteOptions{})
	}
}

// gateStorage is a pool's CCACHE_REMOTE_STORAGE (env, from its pods) pointing at a gate the
// e2e started (ccacheBuild does the same for the builds).
func gateStorage(env map[string]string, gate string) string {
	remote := env["CCACHE_REMOTE_STORAGE"]
	host := remote[len("http://"):strings.IndexAny(remote, "|")]
	return strings.Replace(remote, host, gate, 1)
}

// refusingS3 is an S3 endpoint that refuses every request as AWS does a role without the
// permission (403 AccessDenied: not a miss to bazel-remote's S3 proxy, and not retried).
func refusingS3(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// workflowReport runs examples/workflows/cuda.yml's CCACHE_REPORT on a build's ccache
// directory, with the pool's remote storage (whose gate it asks), and returns its last line.
func workflowReport(t *testing.T, cacheDir, storage string) string {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "workflows", "cuda.yml"))
	require.NoError(t, err)
	var wf struct {
		Env map[string]string `json:"env"`
	}
	require.NoError(t, yaml.Unmarshal(b, &wf))
	require.NotEmpty(t, wf.Env["CCACHE_REPORT"])
	cmd := exec.Command("bash", "-c", wf.Env["CCACHE_REPORT"])
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CCACHE_DIR=" + cacheDir, "HOME=" + cacheDir, "CCACHE_REMOTE_STORAGE=" + storage}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// nonZero is ccache's counters that counted something.
func nonZero(stats map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range stats {
		if v != 0 && !strings.HasSuffix(k, "_timestamp") {
			out[k] = v
		}
	}
	return out
}

// ccacheEnv is the CCACHE_* environment a pod's container carries.
func ccacheEnv(t *testing.T, c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "CCACHE_") {
			out[e.Name] = e.Value
		}
	}
	require.NotEmpty(t, out["CCACHE_REMOTE_STORAGE"], "%s carries the pool's cache", c.Name)
	return out
}

func writeSources(t *testing.T, dir string) string {
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, body := range compilerCacheSources {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return dir
}

// ccacheBuild compiles sources (all of compilerCacheSources by default) in src through ccache
// with env, its server's host replaced by addr, and a fresh cache directory; it returns
// ccache's counters (--print-stats).
func ccacheBuild(t *testing.T, ccache string, env map[string]string, addr, src, cacheDir string, sources ...string) map[string]int {
	if len(sources) == 0 {
		for name := range compilerCacheSources {
			sources = append(sources, name)
		}
	}
	remote := env["CCACHE_REMOTE_STORAGE"]
	host := remote[len("http://"):strings.IndexAny(remote, "|")]
	vars := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + cacheDir, "CCACHE_DIR=" + cacheDir,
		"CCACHE_REMOTE_STORAGE=" + strings.Replace(remote, host, addr, 1)}
	for k, v := range env {
		if k != "CCACHE_REMOTE_STORAGE" {
			vars = append(vars, k+"="+v)
		}
	}
	for _, s := range sources {
		cmd := exec.Command(ccache, "g++", "-O2", "-c", s, "-o", strings.TrimSuffix(s, ".cpp")+".o")
		cmd.Dir, cmd.Env = src, vars
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "ccache g++ -c %s: %s", s, out)
	}
	cmd := exec.Command(ccache, "--print-stats")
	cmd.Env = vars
	out, err := cmd.Output()
	require.NoError(t, err)
	stats := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(line, "\t"); ok {
			n, err := strconv.Atoi(v)
			if err == nil {
				stats[k] = n
			}
		}
	}
	require.Contains(t, stats, "cache_miss", "ccache --print-stats: %s", out)
	return stats
}

// startCacheServer runs a server's pod as its Deployment has it: bazel-remote with the live
// container's flags and environment (the listen address another loopback port, S3's endpoint
// the local one over plain HTTP, the disk dir; credentials as EKS Pod Identity hands them),
// and its gate, gpuci cache-gate with the live container's flags, as the server's own account
// (kubeconfig). It returns the gate's address, which the pool's jobs reach.
func startCacheServer(t *testing.T, ctx context.Context, core kubernetes.Interface, bin, gpuci, kubeconfig string, spec corev1.PodSpec, bucket, s3 string, agent podIdentityAgent, dir string) string {
	c := spec.Containers[0]
	require.Equal(t, []string{"/bazel-remote-linux-amd64"}, c.Command)
	addr := freeAddr(t)
	var args []string
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--http_address="):
			require.Equal(t, "--http_address=127.0.0.1:8081", a, "the server listens on the pod's loopback only")
			a = "--http_address=" + addr
		case strings.HasPrefix(a, "--s3.endpoint="):
			a = "--s3.endpoint=" + s3
		case strings.HasPrefix(a, "--dir="):
			a = "--dir=" + dir
		case strings.HasPrefix(a, "--htpasswd_file="):
			a = "--htpasswd_file=" + mountedFile(t, ctx, core, spec, c, strings.TrimPrefix(a, "--htpasswd_file="), dir)
		}
		args = append(args, a)
	}
	args = append(args, "--s3.disable_ssl")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	env := []string{"PATH=" + os.Getenv("PATH"),
		// What EKS's Pod Identity webhook sets in the container (EKS user guide, pod-id-how-it-works).
		"AWS_CONTAINER_CREDENTIALS_FULL_URI=" + agent.url,
		"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=" + agent.tokenFile,
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name == k8s.CompilerCacheBucketConfigMap {
			env = append(env, e.Name+"="+bucket)
		}
	}
	startProcess(t, ctx, bin, args, env, dir+".log")
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/status")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 100*time.Millisecond, "bazel-remote %v listens (log: %s)", args, dir+".log")

	g := spec.Containers[1]
	require.Equal(t, []string{"/opt/gpuci/gpuci"}, g.Command, "the gate is the stack's gpuci")
	gate := freeAddr(t)
	var gateArgs []string
	for _, a := range g.Args {
		switch {
		case strings.HasPrefix(a, "--listen="):
			a = "--listen=" + gate
		case strings.HasPrefix(a, "--upstream="):
			require.Equal(t, "--upstream=http://127.0.0.1:8081", a)
			a = "--upstream=http://" + addr
		}
		gateArgs = append(gateArgs, a)
	}
	startProcess(t, ctx, gpuci, append(gateArgs, "--kubeconfig", kubeconfig), []string{"PATH=" + os.Getenv("PATH")}, dir+".gate.log")
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", gate)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 20*time.Second, 100*time.Millisecond, "the gate %v listens (log: %s)", gateArgs, dir+".gate.log")
	return gate
}

// mountedFile writes, under dir, the file a container sees at path: the key of the ConfigMap
// the pod mounts there, read from the API server.
func mountedFile(t *testing.T, ctx context.Context, core kubernetes.Interface, spec corev1.PodSpec, c corev1.Container, path, dir string) string {
	for _, m := range c.VolumeMounts {
		if !strings.HasPrefix(path, m.MountPath+"/") {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cm, err := core.CoreV1().ConfigMaps(wellknown.CompilerCacheNamespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
				require.NoError(t, err)
				data, ok := cm.Data[strings.TrimPrefix(path, m.MountPath+"/")]
				require.True(t, ok, "ConfigMap %s holds %s", cm.Name, path)
				out := dir + "." + filepath.Base(path)
				require.NoError(t, os.WriteFile(out, []byte(data), 0o600))
				return out
			}
		}
	}
	t.Fatalf("nothing is mounted at %s", path)
	return ""
}

// startProcess runs bin until the test ends, its output in logPath.
func startProcess(t *testing.T, ctx context.Context, bin string, args, env []string, logPath string) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = logFile.Close() })
}

// podIdentityAgent stands in for the EKS Pod Identity agent: it answers the token the
// webhook would mount, with the container credentials' JSON of the role its association names
// (accessKey stands for that role's session), and nothing else.
type podIdentityAgent struct{ url, tokenFile string }

func startPodIdentityAgent(t *testing.T, dir, accessKey string) podIdentityAgent {
	token := "eks-pod-identity-token-of-" + accessKey
	tokenFile := filepath.Join(dir, "eks-pod-identity-token-"+accessKey)
	require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o600))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != token || r.URL.Path != "/v1/credentials" {
			http.Error(w, "no such pod identity", http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{
			"AccessKeyId": accessKey, "SecretAccessKey": "e2e", "Token": "e2e-session",
			"Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		})
	}))
	t.Cleanup(srv.Close)
	return podIdentityAgent{url: srv.URL + "/v1/credentials", tokenFile: tokenFile}
}

// s3Policy is a role's identity policy as the program deployed it (its RolePolicy's document).
type s3Policy struct {
	Statement []struct {
		Effect    string
		Action    []string
		Resource  []string
		Condition map[string]map[string][]string
	}
}

// allows: an Allow statement names action on arn (its * a wildcard), its StringLike conditions
// (the only kind the stack writes) holding for context. S3 answers a request no statement
// allows with 403; the stack's policies hold no Deny.
func (p s3Policy) allows(action, arn string, context map[string]string) bool {
	match := func(pattern, v string) bool {
		re := "^" + strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*") + "$"
		return regexp.MustCompile(re).MatchString(v)
	}
	for _, st := range p.Statement {
		if st.Effect != "Allow" || !slices.ContainsFunc(st.Action, func(a string) bool { return match(a, action) }) ||
			!slices.ContainsFunc(st.Resource, func(r string) bool { return match(r, arn) }) {
			continue
		}
		holds := true
		for op, keys := range st.Condition {
			for key, values := range keys {
				holds = holds && op == "StringLike" && slices.ContainsFunc(values, func(v string) bool { return match(v, context[key]) })
			}
		}
		if holds {
			return true
		}
	}
	return false
}

// startFakeS3 runs gofakes3 on 127.0.0.1 with the stack's bucket (backend), and in front of it
// the address the servers use, which acts as S3 does on each request by the policy of the role
// whose credentials signed it (roles: access key → the role's policy; gofakes3 checks neither a
// signature nor a policy itself): GetObject (GET, HEAD), PutObject (PUT) or ListBucket (a
// listing, with its prefix) on what the request names, refused 403 where the policy does not
// allow it.
func startFakeS3(t *testing.T, ctx context.Context, bin, bucket string, roles map[string]s3Policy) (front, backend string) {
	backend = freeAddr(t)
	cmd := exec.CommandContext(ctx, bin, "-backend", "memory", "-host", backend, "-initialbucket", bucket)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", backend)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 10*time.Second, 100*time.Millisecond)
	credential := regexp.MustCompile(`Credential=([A-Z0-9]+)/`)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := credential.FindStringSubmatch(r.Header.Get("Authorization"))
		if m == nil {
			http.Error(w, "not signed", http.StatusForbidden)
			return
		}
		policy, ok := roles[m[1]]
		if !ok {
			http.Error(w, "no role for "+m[1], http.StatusForbidden)
			return
		}
		key := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/"+bucket), "/")
		action, arn, context := "", "arn:aws:s3:::"+bucket+"/"+key, map[string]string{}
		switch {
		case key == "" && r.Method == http.MethodGet:
			action, arn, context["s3:prefix"] = "s3:ListBucket", "arn:aws:s3:::"+bucket, r.URL.Query().Get("prefix")
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			action = "s3:GetObject"
		case r.Method == http.MethodPut:
			action = "s3:PutObject"
		}
		if action == "" || !policy.allows(action, arn, context) {
			http.Error(w, fmt.Sprintf("AccessDenied: %s may not %s %s %v", m[1], action, arn, context), http.StatusForbidden)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+backend+r.URL.RequestURI(), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		req.ContentLength = r.ContentLength
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(proxy.Close)
	return strings.TrimPrefix(proxy.URL, "http://"), backend
}

// listBucket is the bucket's keys (ListObjectsV2, path style), read from gofakes3 itself.
func listBucket(t *testing.T, s3, bucket string) []string {
	resp, err := http.Get(fmt.Sprintf("http://%s/%s?list-type=2", s3, bucket))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var list struct {
		Contents []struct{ Key string }
	}
	require.NoError(t, xml.Unmarshal(b, &list))
	var keys []string
	for _, c := range list.Contents {
		keys = append(keys, c.Key)
	}
	return keys
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// nvccStandIn stands in for nvcc where no CUDA toolkit is (here): a script named nvcc, so
// ccache treats it as nvcc (src/ccache/ccache.cpp :330-331 at v4.12.1, by name), that
// preprocesses as nvcc's device pass does (-E with __CUDA_ARCH__ defined: what made ccache's
// preprocessor mode, and sccache's, key a host-only edit like the old source;
// mozilla/sccache#2299) and compiles the host pass (g++, without it).
const nvccStandIn = `#!/bin/sh
for a; do [ "$a" = -E ] && exec g++ -x c++ -D__CUDA_ARCH__=750 "$@"; done
exec g++ -x c++ "$@"
`

// staleObjectsNeverLink: the job's ccache settings (those the pool's pods carry) compile a .cu
// file as CMake has nvcc do it (-MD -MT -MF: CMake's Modules/Compiler/NVIDIA.cmake, nvcc 10.2
// and later), then the host-only code under #ifndef __CUDA_ARCH__ is edited, then a header it
// includes: each rebuild misses and links the new code. Without CCACHE_DEPEND the same
// rebuilds hit the old object, which shows the stand-in keeps nvcc's flaw (the check can fail).
func staleObjectsNeverLink(t *testing.T, ccache string, env map[string]string) {
	require.Equal(t, "1", env["CCACHE_DEPEND"], "the pool's jobs use depend mode")
	for _, depend := range []bool{true, false} {
		dir := t.TempDir()
		bin, src := filepath.Join(dir, "bin"), filepath.Join(dir, "src")
		require.NoError(t, os.MkdirAll(bin, 0o755))
		require.NoError(t, os.MkdirAll(src, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(bin, "nvcc"), []byte(nvccStandIn), 0o755))
		vars := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + dir, "CCACHE_DIR=" + filepath.Join(dir, "cache"),
			"CCACHE_BASEDIR=" + env["CCACHE_BASEDIR"], "CCACHE_COMPILERCHECK=" + env["CCACHE_COMPILERCHECK"]}
		if depend {
			vars = append(vars, "CCACHE_DEPEND="+env["CCACHE_DEPEND"])
		}
		write := func(name, body string) {
			require.NoError(t, os.WriteFile(filepath.Join(src, name), []byte(body), 0o644))
		}
		// build compiles kern.cu and links it with a main that prints host_value().
		build := func() (stats map[string]int, printed string) {
			compile := exec.Command(ccache, "nvcc", "-O2", "-MD", "-MT", "kern.o", "-MF", "kern.o.d", "-c", "kern.cu", "-o", "kern.o")
			compile.Dir, compile.Env = src, vars
			out, err := compile.CombinedOutput()
			require.NoError(t, err, "ccache nvcc -c kern.cu: %s", out)
			link := exec.Command("g++", "-o", "app", "kern.o", "main.cpp")
			link.Dir, link.Env = src, vars
			out, err = link.CombinedOutput()
			require.NoError(t, err, "%s", out)
			run, err := exec.Command(filepath.Join(src, "app")).Output()
			require.NoError(t, err)
			st := exec.Command(ccache, "--print-stats")
			st.Env = vars
			b, err := st.Output()
			require.NoError(t, err)
			stats = map[string]int{}
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if k, v, ok := strings.Cut(line, "\t"); ok {
					if n, err := strconv.Atoi(v); err == nil {
						stats[k] = n
					}
				}
			}
			return stats, strings.TrimSpace(string(run))
		}
		write("main.cpp", "#include <cstdio>\nint host_value();\nint main() { std::printf(\"%d\\n\", host_value()); }\n")
		write("host.h", "#ifndef __CUDA_ARCH__\ninline int from_header() { return 10; }\n#endif\n")
		kern := func(v int) string {
			return fmt.Sprintf("#include \"host.h\"\n#ifndef __CUDA_ARCH__\nint host_value() { return %d + from_header(); }\n#endif\n", v)
		}
		write("kern.cu", kern(1))
		_, printed := build()
		require.Equal(t, "11", printed)
		write("kern.cu", kern(2))
		stats, printed := build()
		write("host.h", "#ifndef __CUDA_ARCH__\ninline int from_header() { return 20; }\n#endif\n")
		stats2, printed2 := build()
		if depend {
			assert.Equal(t, "12", printed, "an edit to host-only code is compiled, not served from the cache: %v", nonZero(stats))
			assert.Equal(t, "22", printed2, "an edit to a header's host-only code too: %v", nonZero(stats2))
			assert.Zero(t, stats2["preprocessed_cache_hit"], "no preprocessed lookup at all")
			continue
		}
		assert.Equal(t, "11", printed, "without depend mode the stand-in links the old object, as nvcc would: %v", nonZero(stats))
		assert.Equal(t, "11", printed2, "for a header's edit too: %v", nonZero(stats2))
	}
}
