package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/cachegate"
)

// runCacheGate serves a pool's compiler cache behind its gate (cmd/gpuci/internal/cachegate):
// the container beside the cache server in the stack's compiler cache Deployments, with the
// server's account (it reads the pool's pods and ARC's EphemeralRunners, nothing else).
func runCacheGate(args []string) error {
	fs := flag.NewFlagSet("cache-gate", flag.ExitOnError)
	listen := fs.String("listen", ":8080", "address the pool's jobs reach")
	upstream := fs.String("upstream", "", "the cache server, on the pod's loopback (http://127.0.0.1:8081)")
	pool := fs.String("pool", "", "the cache service's pool (its pods' compiler-cache label)")
	namespaces := fs.String("pod-namespaces", "", "comma-separated namespaces of the pool's runner and job pods")
	writeRefs := fs.String("write-refs", "", "comma-separated refs whose jobs write (path patterns: refs/heads/release/*); none: read-only")
	shared := fs.Bool("shared", false, "serve each repository's entries to every repository of the pool")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: the pod's own account)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*upstream)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("--upstream %q is not a server's URL", *upstream)
	}
	if *pool == "" || *namespaces == "" {
		return fmt.Errorf("--pool and --pod-namespaces are required")
	}
	core, dyn, cleanup, err := clients(*kubeconfig, "")
	if err != nil {
		return err
	}
	defer cleanup()
	logger := log.New(os.Stderr, "cache-gate: ", log.LstdFlags)
	gate := &cachegate.Gate{
		Upstream: u,
		Callers: &cachegate.PodCallers{Core: core, Dynamic: dyn, Pool: *pool,
			Namespaces: splitList(*namespaces), TTL: 5 * time.Second},
		WriteRefs: splitList(*writeRefs),
		Shared:    *shared,
		Log:       logger,
	}
	// A job is untrusted: one that sends a request's body slowly, or keeps a connection open,
	// holds a connection and a goroutine only until these end.
	srv := &http.Server{Addr: *listen, Handler: gate, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 5 * time.Minute, IdleTimeout: 2 * time.Minute}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Printf("pool %s: writes from %s; entries %s", *pool, orNone(*writeRefs), map[bool]string{true: "shared across repositories", false: "per repository"}[*shared])
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "no ref (read-only)"
	}
	return s
}
