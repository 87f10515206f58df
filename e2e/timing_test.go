//go:build e2e

package e2e

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
)

// stepTimes collects an engine operation's event stream and says which resource steps took
// longest: where an e2e phase (and a real deploy) spends its time.
type stepTimes struct {
	ch   chan events.EngineEvent
	done chan struct{}
	mu   sync.Mutex
	dur  map[string]time.Duration
}

func newStepTimes() *stepTimes {
	s := &stepTimes{ch: make(chan events.EngineEvent), done: make(chan struct{}), dur: map[string]time.Duration{}}
	go func() {
		defer close(s.done)
		started := map[string]time.Time{}
		for e := range s.ch {
			switch {
			case e.ResourcePreEvent != nil:
				started[e.ResourcePreEvent.Metadata.URN] = time.Now()
			case e.ResOutputsEvent != nil:
				m := e.ResOutputsEvent.Metadata
				if at, ok := started[m.URN]; ok {
					s.mu.Lock()
					s.dur[string(m.Op)+" "+m.URN[strings.LastIndex(m.URN, "::")+2:]] = time.Since(at)
					s.mu.Unlock()
				}
			}
		}
	}()
	return s
}

// Log names the n slowest steps (after the operation has closed the stream).
func (s *stepTimes) Log(t *testing.T, n int) {
	<-s.done
	type kv struct {
		k string
		d time.Duration
	}
	var all []kv
	for k, d := range s.dur {
		all = append(all, kv{k, d})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].d > all[j].d })
	var b strings.Builder
	for _, x := range all[:min(n, len(all))] {
		fmt.Fprintf(&b, "\n  %6s  %s", x.d.Round(100*time.Millisecond), x.k)
	}
	t.Logf("slowest steps:%s", b.String())
}
