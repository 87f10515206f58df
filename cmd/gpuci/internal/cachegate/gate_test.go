package cachegate

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// store stands in for bazel-remote: a PUT stores, a GET returns or 404s.
type store struct {
	mu   sync.Mutex
	data map[string]string
}

func (s *store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case http.MethodPut:
		b, _ := io.ReadAll(r.Body)
		s.data[r.URL.Path] = string(b)
	default:
		v, ok := s.data[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, v)
	}
}

const (
	pool     = "gpu-spot"
	jobsNS   = "arc-jobs-gpu-spot"
	mainRef  = "luxfi/app/.github/workflows/ci.yml@refs/heads/main"
	prRef    = "luxfi/app/.github/workflows/ci.yml@refs/pull/7/merge"
	entryKey = "abababababababababababababababababababababababababababababababab"
)

// cluster: a runner-form runner of main at 10.0.0.1, one of a pull request at 10.0.0.2, a
// container-form job pod of another repository's main at 10.0.0.3, a runner with no job yet
// at 10.0.0.4, a pod of another pool at 10.0.0.5, and forgeries at 10.0.0.6–8 and 10.0.0.10.
func cluster(t *testing.T) *PodCallers {
	var pods []runtime.Object
	var runners []runtime.Object
	runner := func(name, uid, repo, ref string) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("actions.github.com/v1alpha1")
		u.SetKind("EphemeralRunner")
		u.SetName(name)
		u.SetNamespace(wellknown.RunnersNamespace)
		u.SetUID(types.UID(uid))
		if repo != "" {
			u.Object["status"] = map[string]any{"jobRepositoryName": repo, "jobWorkflowRef": ref}
		}
		runners = append(runners, u)
	}
	pod := func(ns, name, ip, poolLabel string, owner *metav1.OwnerReference, labels map[string]string) {
		l := map[string]string{wellknown.CompilerCacheLabel: poolLabel}
		for k, v := range labels {
			l[k] = v
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l}, Status: corev1.PodStatus{PodIP: ip, Phase: corev1.PodRunning}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		pods = append(pods, p)
	}
	owned := func(name, uid string) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: "actions.github.com/v1alpha1", Kind: "EphemeralRunner", Name: name, UID: types.UID(uid), Controller: new(true)}
	}
	rns := wellknown.RunnersNamespace
	runner("main-runner", "u1", "luxfi/app", mainRef)
	pod(rns, "main-runner", "10.0.0.1", pool, owned("main-runner", "u1"), nil)
	runner("pr-runner", "u2", "luxfi/app", prRef)
	pod(rns, "pr-runner", "10.0.0.2", pool, owned("pr-runner", "u2"), nil)
	runner("lib-runner", "u3", "luxfi/lib", "luxfi/lib/.github/workflows/ci.yml@refs/heads/main")
	pod(jobsNS, "lib-runner-workflow", "10.0.0.3", pool, nil, map[string]string{"runner-pod": "lib-runner"})
	runner("idle-runner", "u4", "", "")
	pod(rns, "idle-runner", "10.0.0.4", pool, owned("idle-runner", "u4"), nil)
	pod(rns, "main-runner-of-other-pool", "10.0.0.5", "gpu-other", owned("main-runner", "u1"), nil)
	// A pod that names main's runner as its owner, with another UID (a runner of the same name
	// recreated, or a forgery).
	pod(rns, "main-runner-copy", "10.0.0.6", pool, owned("main-runner", "u9"), nil)
	// A job pod that names main's runner but is not the hooks' pod of it.
	pod(jobsNS, "planted", "10.0.0.7", pool, nil, map[string]string{"runner-pod": "main-runner"})
	// A runner recreated under its old name: the old pod's owner is not the new runner.
	runner("recycled", "u-new", "luxfi/app", mainRef)
	pod(rns, "recycled", "10.0.0.10", pool, owned("recycled", "u-old"), nil)
	// A pod of the pool that no EphemeralRunner controls.
	pod(rns, "stray", "10.0.0.8", pool, nil, nil)
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{wellknown.EphemeralRunners: "EphemeralRunnerList"}, runners...)
	return &PodCallers{Core: fake.NewSimpleClientset(pods...), Dynamic: dyn, Pool: pool, Namespaces: []string{rns, jobsNS}}
}

// serve returns a function that sends g a request from ip.
func serve(t *testing.T, g *Gate) func(method, ip, key, body string) (int, string) {
	t.Helper()
	return func(method, ip, key, body string) (int, string) {
		req := httptest.NewRequest(method, "/ac/"+key, strings.NewReader(body))
		req.RemoteAddr = net.JoinHostPort(ip, "40000")
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
}

func newGate(t *testing.T, shared bool, writeRefs ...string) (*Gate, *store) {
	s := &store{data: map[string]string{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return &Gate{Upstream: u, Callers: cluster(t), WriteRefs: writeRefs, Shared: shared}, s
}

func TestOnlyAJobOfATrustedRefWrites(t *testing.T) {
	g, s := newGate(t, false, "refs/heads/main")
	do := serve(t, g)
	code, body := do(http.MethodPut, "10.0.0.2", entryKey, "planted by a pull request")
	assert.Equal(t, http.StatusForbidden, code, "a pull request's job writes nothing: %s", body)
	assert.Contains(t, body, "refs/pull/7/merge")
	assert.Empty(t, s.data, "nothing reached the server")

	code, body = do(http.MethodPut, "10.0.0.1", entryKey, "main's object")
	require.Equal(t, http.StatusOK, code, "main's job writes: %s", body)
	code, body = do(http.MethodGet, "10.0.0.2", entryKey, "")
	assert.Equal(t, http.StatusOK, code, "the pull request reads what main wrote")
	assert.Equal(t, "main's object", body)
}

func TestARepositoryReadsOnlyItsOwnUnlessShared(t *testing.T) {
	g, _ := newGate(t, false, "refs/heads/main")
	do := serve(t, g)
	code, _ := do(http.MethodPut, "10.0.0.1", entryKey, "app's object")
	require.Equal(t, http.StatusOK, code)
	code, _ = do(http.MethodGet, "10.0.0.3", entryKey, "")
	assert.Equal(t, http.StatusNotFound, code, "another repository's job does not get app's object for the same key")

	shared, _ := newGate(t, true, "refs/heads/main")
	do = serve(t, shared)
	code, _ = do(http.MethodPut, "10.0.0.1", entryKey, "app's object")
	require.Equal(t, http.StatusOK, code)
	code, body := do(http.MethodGet, "10.0.0.3", entryKey, "")
	assert.Equal(t, http.StatusOK, code, "shared: every repository of the pool hits it")
	assert.Equal(t, "app's object", body)
}

func TestAReadOnlyPoolsGateWritesNothing(t *testing.T) {
	g, s := newGate(t, false)
	code, _ := serve(t, g)(http.MethodPut, "10.0.0.1", entryKey, "x")
	assert.Equal(t, http.StatusForbidden, code, "no ref writes through a read-only pool's gate, main's neither")
	assert.Empty(t, s.data)
}

func TestACallerWithoutAJobOfThePoolGetsNothing(t *testing.T) {
	g, s := newGate(t, false, "refs/heads/main")
	s.data["/ac/"+g.Key(Job{Repository: "luxfi/app"}, entryKey)] = "main's object"
	s.data["/ac/"+entryKey] = "unscoped"
	do := serve(t, g)
	for ip, why := range map[string]string{
		"10.0.0.9":  "no pod at the address",
		"10.0.0.4":  "a runner with no job yet",
		"10.0.0.5":  "a pod of another pool",
		"10.0.0.6":  "a pod whose owner's UID is not the runner's",
		"10.0.0.7":  "a job pod named unlike the hooks' pod of the runner it names",
		"10.0.0.8":  "a pod no EphemeralRunner controls",
		"10.0.0.10": "a pod of an earlier runner of the same name",
	} {
		for _, m := range []string{http.MethodGet, http.MethodPut} {
			code, body := do(m, ip, entryKey, "x")
			assert.Equal(t, http.StatusForbidden, code, "%s %s: %s (%s)", m, ip, why, body)
		}
	}
	code, _ := do(http.MethodGet, "10.0.0.1", entryKey, "")
	assert.Equal(t, http.StatusOK, code, "while main's own job reads")
}

func TestOnlyCacheEntriesPass(t *testing.T) {
	g, _ := newGate(t, false, "refs/heads/main")
	for path, want := range map[string]int{"/status": 404, "/ac/../status": 404, "/ac/ABAB": 404, "/ac/" + entryKey + "/x": 404} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = "10.0.0.1:1"
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		assert.Equal(t, want, rec.Code, path)
	}
	req := httptest.NewRequest(http.MethodDelete, "/ac/"+entryKey, nil)
	req.RemoteAddr = "10.0.0.1:1"
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

func TestARefMatchesTheStacksPatterns(t *testing.T) {
	g := &Gate{WriteRefs: []string{"refs/heads/main", "refs/heads/release/*"}}
	for ref, want := range map[string]bool{
		"refs/heads/main": true, "refs/heads/release/1.2": true, "refs/heads/mainline": false,
		"refs/pull/7/merge": false, "refs/heads/release/1.2/x": false, "": false,
	} {
		assert.Equal(t, want, g.CanWrite(ref), ref)
	}
	assert.Equal(t, "refs/heads/main", Job{WorkflowRef: mainRef}.Ref())
	assert.Equal(t, "", Job{WorkflowRef: "no-ref"}.Ref())
}

// A read the server fails (bazel-remote's 500 when S3 fails, or no answer at all) is a plain
// miss to ccache; the gate counts it for the caller, and tells that caller only.
func TestTheGateCountsTheReadsTheServerFailed(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "s3: connection refused", http.StatusInternalServerError)
	}))
	t.Cleanup(broken.Close)
	u, err := url.Parse(broken.URL)
	require.NoError(t, err)
	g := &Gate{Upstream: u, Callers: cluster(t), WriteRefs: []string{"refs/heads/main"}}
	do := serve(t, g)
	code, _ := do(http.MethodGet, "10.0.0.1", entryKey, "")
	assert.Equal(t, http.StatusInternalServerError, code, "the server's answer passes through")
	code, _ = do(http.MethodHead, "10.0.0.1", entryKey, "")
	assert.Equal(t, http.StatusInternalServerError, code)
	code, _ = do(http.MethodPut, "10.0.0.1", entryKey, "x")
	assert.Equal(t, http.StatusInternalServerError, code, "a failed write is ccache's own remote_storage_error: not counted here")

	failures := func(ip string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, FailuresPath, nil)
		req.RemoteAddr = net.JoinHostPort(ip, "40000")
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	code, body := failures("10.0.0.1")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "reads 2 failed 2\n", body)
	code, body = failures("10.0.0.2")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "reads 0 failed 0\n", body, "another job's reads are its own")
	code, _ = failures("10.0.0.9")
	assert.Equal(t, http.StatusForbidden, code, "no job of the pool at the address: nothing")

	// The server gone: the gate's own 502 counts too.
	broken.Close()
	code, _ = do(http.MethodGet, "10.0.0.2", entryKey, "")
	assert.Equal(t, http.StatusBadGateway, code)
	_, body = failures("10.0.0.2")
	assert.Equal(t, "reads 1 failed 1\n", body)

	// A miss (404) is a read the server answered.
	healthy, _ := newGate(t, false, "refs/heads/main")
	code, _ = serve(t, healthy)(http.MethodGet, "10.0.0.1", entryKey, "")
	require.Equal(t, http.StatusNotFound, code)
	req := httptest.NewRequest(http.MethodGet, FailuresPath, nil)
	req.RemoteAddr = "10.0.0.1:40000"
	rec := httptest.NewRecorder()
	healthy.ServeHTTP(rec, req)
	assert.Equal(t, "reads 1 failed 0\n", rec.Body.String())
}

// A server that takes a read and never answers fails it at the gate's timeout (ccache then
// compiles), and the read counts as failed: the job is not held, and the gate says so.
func TestAServerThatNeverAnswersFailsTheReadInTime(t *testing.T) {
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); hanging.Close() })
	u, err := url.Parse(hanging.URL)
	require.NoError(t, err)
	g := &Gate{Upstream: u, Callers: cluster(t), WriteRefs: []string{"refs/heads/main"}, UpstreamTimeout: 200 * time.Millisecond}
	answered := make(chan int, 1)
	go func() {
		code, _ := serve(t, g)(http.MethodGet, "10.0.0.1", entryKey, "")
		answered <- code
	}()
	select {
	case code := <-answered:
		assert.Equal(t, http.StatusBadGateway, code)
	case <-time.After(5 * time.Second):
		require.FailNow(t, "the read is still held after 5 s")
	}
	_, failed := g.reads.of("10.0.0.1")
	assert.Equal(t, 1, failed, "a failed read")
}
