package main

import (
	"fmt"
	"os"
	"time"
)

// progress prints, on standard error, what a command starts now and the time since it began:
// a person sees a slow step (a cluster, AWS's price APIs, GitHub) move, while standard output
// stays the command's answer, its --json included.
type progress struct{ start time.Time }

func newProgress() progress { return progress{start: time.Now()} }

func (p progress) step(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[gpuci %5.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, a...))
}
