//go:build e2e

package e2e

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tb is what the checks of a GPU job's journey need of a test: a *testing.T, or a background
// phase's stand-in for one.
type tb interface {
	require.TestingT
	Helper()
	Logf(format string, args ...any)
	Failed() bool
}

// background runs a phase whose waits are Karpenter's timers (consolidateAfter, its 10 s
// disruption poll, its 15 s emptiness validation) in a goroutine, while the scenario's next
// phases — which touch no node — run; Wait reports it as a step of its own. It keeps
// `make e2e` within its budget without shortening any of Karpenter's timers.
type background struct {
	mu     sync.Mutex
	start  time.Time
	lines  []string
	failed bool
	done   chan struct{}
}

func runInBackground(phase func(t tb)) *background {
	b := &background{start: time.Now(), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		phase(b)
	}()
	return b
}

func (b *background) Errorf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failed = true
	b.lines = append(b.lines, "FAIL: "+fmt.Sprintf(format, args...))
}

// FailNow ends the phase, as t.FailNow ends a test's goroutine.
func (b *background) FailNow() {
	b.mu.Lock()
	b.failed = true
	b.mu.Unlock()
	runtime.Goexit()
}

func (b *background) Helper() {}

func (b *background) Logf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, fmt.Sprintf(format, args...))
}

func (b *background) Failed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed
}

// Wait waits for the phase and reports what it logged and whether it failed.
func (b *background) Wait(t *testing.T) {
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		t.Log(l)
	}
	t.Logf("(ran in the background for %s)", time.Since(b.start).Round(100*time.Millisecond))
	if b.failed {
		t.Fail()
	}
}
