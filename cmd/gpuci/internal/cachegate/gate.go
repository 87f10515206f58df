// Package cachegate is the compiler cache's door (`gpuci cache-gate`): it runs beside a pool's
// cache server (bazel-remote, which listens on the pod's loopback only) and decides each request
// by the job that makes it, as ARC recorded that job: only a job of a trusted ref (main, by
// default) writes, and each repository's entries are its own unless the stack file shares
// them. What a job sends cannot change the decision: the caller is the pod at the request's
// source address, and the job is what ARC's listener wrote on that pod's EphemeralRunner when
// GitHub assigned it (callers.go).
package cachegate

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Job is what ARC recorded of the job a caller runs: EphemeralRunner's
// status.jobRepositoryName ("owner/name") and status.jobWorkflowRef ("owner/name/.github/
// workflows/ci.yml@refs/heads/main"), patched by the listener when GitHub assigns the job
// (cmd/ghalistener/scaler/scaler.go HandleJobStarted, gha-runner-scale-set-0.14.2).
type Job struct {
	Repository, WorkflowRef string
}

// Ref is the ref the job's workflow ran at: what follows the last "@" of its workflow ref
// (a pull request's is refs/pull/<n>/merge).
func (j Job) Ref() string {
	i := strings.LastIndex(j.WorkflowRef, "@")
	if i < 0 {
		return ""
	}
	return j.WorkflowRef[i+1:]
}

// ErrUnknownCaller: no job of the pool is at the address (not a pod of the pool, or its
// runner has no job yet).
var ErrUnknownCaller = errors.New("no job of the pool at this address")

// Callers finds the job a request's source address belongs to.
type Callers interface {
	JobAt(ctx context.Context, ip string) (Job, error)
}

// Gate is the door of one pool's cache server.
type Gate struct {
	// Upstream is the cache server (bazel-remote on the pod's loopback).
	Upstream *url.URL
	Callers  Callers
	// WriteRefs are the refs (path.Match patterns: refs/heads/release/*) whose jobs may
	// write; none for a read-only pool.
	WriteRefs []string
	// Shared serves one repository's entries to every repository of the pool; otherwise each
	// repository reads and writes its own.
	Shared bool
	Log    *log.Logger
	// UpstreamTimeout is how long the gate waits for the server's answer to begin (0:
	// UpstreamHeaderTimeout).
	UpstreamTimeout time.Duration

	proxyOnce sync.Once // the server handles requests concurrently: one proxy, made once
	proxy     *httputil.ReverseProxy
	reads     readCounts
}

// UpstreamHeaderTimeout is how long the gate waits for the cache server's answer to begin: a
// server that hangs fails the job's read or write (ccache then compiles) rather than holding
// it and the gate's connection for ever.
const UpstreamHeaderTimeout = time.Minute

// FailuresPath is where a job asks how many of its reads the cache server failed: ccache counts
// a read answered 500 (bazel-remote's answer when S3 fails: its v2.6.2 cache/s3proxy/s3proxy.go:
// 217-234, cache/disk/disk.go:674-680, server/http.go:250-256) as a plain miss, and its
// remote_storage_error stays 0 (ccache v4.12.1 src/ccache/storage/remote/httpstorage.cpp:
// 188-190), so only the gate sees them. The answer is "reads <n> failed <m>" for the
// caller's own address.
const FailuresPath = "/gpuci/failures"

// readCounts are the reads (GET, HEAD) the gate passed on and the server failed (5xx, or no
// answer), per caller address. Bounded: past maxCallers addresses it starts over (a pod's
// address is its job's, and jobs end).
type readCounts struct {
	mu            sync.Mutex
	reads, failed map[string]int
}

const maxCallers = 4096

func (c *readCounts) add(ip string, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reads == nil || len(c.reads) >= maxCallers {
		c.reads, c.failed = map[string]int{}, map[string]int{}
	}
	c.reads[ip]++
	if failed {
		c.failed[ip]++
	}
}

func (c *readCounts) of(ip string) (reads, failed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[ip], c.failed[ip]
}

// statusWriter keeps the status the server answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// cachePath is what ccache asks for in its bazel layout: /ac/<sha256 hex> (ccache
// src/ccache/storage/remote/httpstorage.cpp, layout=bazel); cas for completeness.
var cachePath = regexp.MustCompile(`^/(ac|cas)/([0-9a-f]{64})$`)

// CanWrite tells whether a job of ref may write.
func (g *Gate) CanWrite(ref string) bool {
	for _, p := range g.WriteRefs {
		if ok, err := path.Match(p, ref); err == nil && ok {
			return true
		}
	}
	return false
}

// Key is the server's key for a job's key: the job's own unless the pool shares entries
// across repositories. Scoping by hash keeps bazel-remote's layout (a 64-hex key) and makes
// one repository's key useless to another.
func (g *Gate) Key(job Job, key string) string {
	if g.Shared {
		return key
	}
	sum := sha256.Sum256([]byte("lux-gpu-ci compiler cache\x00" + job.Repository + "\x00" + key))
	return hex.EncodeToString(sum[:])
}

func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == FailuresPath && r.Method == http.MethodGet {
		g.serveFailures(w, r)
		return
	}
	m := cachePath.FindStringSubmatch(r.URL.Path)
	if m == nil {
		http.Error(w, "not a compiler cache entry", http.StatusNotFound)
		return
	}
	write := false
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPut:
		write = true
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		http.Error(w, "no caller address", http.StatusForbidden)
		return
	}
	job, err := g.Callers.JobAt(r.Context(), ip)
	if err != nil {
		g.logf("%s %s from %s: refused: %v", r.Method, r.URL.Path, ip, err)
		http.Error(w, "refused: "+err.Error(), http.StatusForbidden)
		return
	}
	if write && !g.CanWrite(job.Ref()) {
		g.logf("PUT from %s (%s at %s): refused: its ref may not write", ip, job.Repository, job.Ref())
		http.Error(w, fmt.Sprintf("refused: a job of %s may not write this cache (the stack's writers: %s)", job.Ref(), strings.Join(g.WriteRefs, ", ")), http.StatusForbidden)
		return
	}
	r.URL.Path = "/" + m[1] + "/" + g.Key(job, m[2])
	r.URL.RawPath = ""
	// No credential of the caller's reaches the server.
	r.Header.Del("Authorization")
	if write {
		g.reverseProxy().ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	g.reverseProxy().ServeHTTP(sw, r)
	g.reads.add(ip, sw.status >= http.StatusInternalServerError)
}

// serveFailures answers a job of the pool how many of its reads the server failed.
func (g *Gate) serveFailures(w http.ResponseWriter, r *http.Request) {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err == nil {
		_, err = g.Callers.JobAt(r.Context(), ip)
	}
	if err != nil {
		http.Error(w, "refused: "+fmt.Sprint(err), http.StatusForbidden)
		return
	}
	reads, failed := g.reads.of(ip)
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "reads %d failed %d\n", reads, failed)
}

func (g *Gate) reverseProxy() *httputil.ReverseProxy {
	g.proxyOnce.Do(func() {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.ResponseHeaderTimeout = cmp.Or(g.UpstreamTimeout, UpstreamHeaderTimeout)
		g.proxy = &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(g.Upstream) }, Transport: transport}
	})
	return g.proxy
}

func (g *Gate) logf(format string, args ...any) {
	if g.Log != nil {
		g.Log.Printf(format, args...)
	}
}
