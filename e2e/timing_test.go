//go:build e2e

package e2e

// Every engine operation of the e2e goes through harness.up, .preview or .destroy, which time
// it from its event stream: its wall time, the time before its first resource step (the CLI,
// its plugins, the program starting), and its slowest steps — where an e2e phase, and a real
// deploy, spends its time. With E2E_TIMELINE=<dir>, each operation's steps are also written
// there as a TSV (start and end, in seconds from the operation's start) to find its critical
// path.

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
)

func (h *harness) up(t tb, ctx context.Context, opts ...optup.Option) (auto.UpResult, error) {
	t.Helper()
	res, _, err := h.upWithSteps(t, ctx, opts...)
	return res, err
}

// upWithSteps is up, with the steps it ran: what changed, as the engine reported it.
func (h *harness) upWithSteps(t tb, ctx context.Context, opts ...optup.Option) (auto.UpResult, []stepSpan, error) {
	t.Helper()
	op := newOpTimer("up")
	res, err := h.stack.Up(ctx, append([]optup.Option{optup.SuppressProgress(), optup.EventStreams(op.ch)}, opts...)...)
	op.Log(t)
	return res, op.steps, err
}

// upWithOps is up, with the steps the engine began, counted by their op (create, update,
// delete, replace, …): the plan it carried out, seen in the up itself, a failed up's too, at no
// cost of a preview of its own.
func (h *harness) upWithOps(t tb, ctx context.Context, opts ...optup.Option) (map[apitype.OpType]int, error) {
	t.Helper()
	tr, err := h.upTraced(t, ctx, opts...)
	return tr.ops, err
}

// upTrace is what an up did, as its engine events tell: its result, the steps it completed,
// and every step it began (a failed one's included), as "op type::name" and counted by op.
type upTrace struct {
	res   auto.UpResult
	steps []stepSpan
	begun []string
	ops   map[apitype.OpType]int
}

func (h *harness) upTraced(t tb, ctx context.Context, opts ...optup.Option) (upTrace, error) {
	t.Helper()
	op := newOpTimer("up")
	res, err := h.stack.Up(ctx, append([]optup.Option{optup.SuppressProgress(), optup.EventStreams(op.ch)}, opts...)...)
	op.Log(t)
	t.Logf("up's steps begun: %v", op.ops)
	return upTrace{res: res, steps: op.steps, begun: op.begun, ops: op.ops}, err
}

func (h *harness) preview(t tb, ctx context.Context, opts ...optpreview.Option) (auto.PreviewResult, error) {
	t.Helper()
	op := newOpTimer("preview")
	res, err := h.stack.Preview(ctx, append([]optpreview.Option{optpreview.SuppressProgress(), optpreview.EventStreams(op.ch)}, opts...)...)
	op.Log(t)
	return res, err
}

func (h *harness) destroy(t tb, ctx context.Context, opts ...optdestroy.Option) (auto.DestroyResult, error) {
	t.Helper()
	op := newOpTimer("destroy")
	res, err := h.stack.Destroy(ctx, append([]optdestroy.Option{optdestroy.SuppressProgress(), optdestroy.EventStreams(op.ch)}, opts...)...)
	op.Log(t)
	return res, err
}

// opSeq numbers the operations of a run, for the timeline files' names.
var opSeq atomic.Int32

// opTimer collects one engine operation's event stream.
type opTimer struct {
	kind  string
	start time.Time
	ch    chan events.EngineEvent
	done  chan struct{}
	mu    sync.Mutex
	first time.Duration // until the first resource step began
	steps []stepSpan
	ops   map[apitype.OpType]int // every step begun, by its op: what the engine did, a failed step's included
	begun []string               // every step begun, as "op type::name"
}

type stepSpan struct {
	op, name   string
	urn        string
	begin, end time.Duration
}

// resource is the step's resource as type::name.
func (s stepSpan) resource() string {
	u := resource.URN(s.urn)
	return string(u.Type()) + "::" + u.Name()
}

func newOpTimer(kind string) *opTimer {
	o := &opTimer{kind: kind, start: time.Now(), ch: make(chan events.EngineEvent), done: make(chan struct{}), first: -1, ops: map[apitype.OpType]int{}}
	go func() {
		defer close(o.done)
		began := map[string]time.Duration{}
		for e := range o.ch {
			now := time.Since(o.start)
			switch {
			case e.ResourcePreEvent != nil:
				if o.first < 0 {
					o.first = now
				}
				began[e.ResourcePreEvent.Metadata.URN] = now
				m := e.ResourcePreEvent.Metadata
				u := resource.URN(m.URN)
				o.mu.Lock()
				o.ops[m.Op]++
				o.begun = append(o.begun, string(m.Op)+" "+string(u.Type())+"::"+u.Name())
				o.mu.Unlock()
			case e.ResOutputsEvent != nil:
				m := e.ResOutputsEvent.Metadata
				if at, ok := began[m.URN]; ok {
					o.mu.Lock()
					o.steps = append(o.steps, stepSpan{string(m.Op), m.URN[strings.LastIndex(m.URN, "::")+2:], m.URN, at, now})
					o.mu.Unlock()
				}
			}
		}
	}()
	return o
}

// Log waits for the stream to close (the operation has returned) and logs the operation's
// times; with E2E_TIMELINE set, it writes its steps there too.
func (o *opTimer) Log(t tb) {
	t.Helper()
	<-o.done
	total := time.Since(o.start)
	steps := slices.Clone(o.steps)
	slices.SortFunc(steps, func(a, b stepSpan) int { return cmp.Compare(b.end-b.begin, a.end-a.begin) }) // longest first
	var b strings.Builder
	for _, s := range steps[:min(3, len(steps))] {
		fmt.Fprintf(&b, "; %s %s %.1fs", s.op, s.name, (s.end - s.begin).Seconds())
	}
	t.Logf("%s: %.1fs, first step at %.1fs, %d steps%s", o.kind, total.Seconds(), max(o.first, 0).Seconds(), len(steps), b.String())
	if dir := os.Getenv("E2E_TIMELINE"); dir != "" {
		var f strings.Builder
		for _, s := range o.steps {
			fmt.Fprintf(&f, "%.2f\t%.2f\t%s\t%s\n", s.begin.Seconds(), s.end.Seconds(), s.op, s.name)
		}
		name := fmt.Sprintf("%02d-%s-%.0fs.tsv", opSeq.Add(1), o.kind, total.Seconds())
		if err := os.WriteFile(filepath.Join(dir, name), []byte(f.String()), 0o644); err != nil {
			t.Logf("timeline: %v", err)
		}
	}
}
