package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/luxfi/lux-gpu-ci/pricing"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/stats"
)

// runStats prints, per scale set of the stack, what GitHub recorded of its jobs since a time
// (cmd/gpuci/internal/stats). The token is GITHUB_TOKEN: read access to the repositories'
// Actions and checks (a fine-grained token: "Actions: read", "Checks: read", "Metadata: read").
func runStats(args []string) error {
	fs := flag.NewFlagSet("stats", flag.ExitOnError)
	st := addStackFlags(fs, "stack whose scale sets' jobs to count")
	since := fs.String("since", "7d", "how far back: days (7d) or a Go duration (36h)")
	repos := fs.String("repos", "", "comma-separated repositories of the stack's githubOrg (default: every one it has)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	window, err := parseSince(*since)
	if err != nil {
		return err
	}
	_, cfg, err := st.load()
	if err != nil {
		return err
	}
	token := os.Getenv("GITHUB_TOKEN")
	if token == "" {
		return fmt.Errorf(`GITHUB_TOKEN is not set: a token that reads the repositories' Actions and checks (e.g. GITHUB_TOKEN=$(gh auth token))`)
	}
	client, err := githubClient(token)
	if err != nil {
		return err
	}
	prices := pricing.Default()
	c := stats.Collector{Client: client, Owner: cfg.GitHub.Org, Since: time.Now().Add(-window), GitHubPerMinute: prices.HostedT4PerMinute}
	for _, r := range strings.Split(*repos, ",") {
		if r = strings.TrimSpace(r); r != "" {
			c.Repos = append(c.Repos, r)
		}
	}
	for _, p := range cfg.Pools() {
		it, capacity, perHour, err := pricing.HourlyPrice(p, prices)
		if err != nil {
			return err
		}
		c.ScaleSets = append(c.ScaleSets, stats.ScaleSet{Name: p.RunnerScaleSetName, Pool: p.Name, PerHour: perHour, InstanceType: it, CapacityType: capacity})
	}
	progress := newProgress()
	c.Progress = progress.step
	rep, err := c.Collect(context.Background())
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(rep)
	}
	fmt.Printf("Jobs on %s's scale sets since %s: %d runs in %d repositories read.\n\n", cfg.GitHub.Org, rep.Since.UTC().Format("2006-01-02 15:04 MST"), rep.Runs, rep.Repos)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SCALE SET\tJOBS\tQUEUE p50\tp90\tmax\tCANCELLED QUEUED\tRUN MIN\tFAILED\tINTERRUPTED\tRE-RUNS\tSPEND\tAT GITHUB'S PRICE\t")
	for _, s := range rep.ScaleSets {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%.0f\t%d\t%d\t%d\t$%.2f\t$%.2f\t\n", s.ScaleSet, s.Jobs, secs(s.QueueP50), secs(s.QueueP90), secs(s.QueueMax),
			s.CancelledQueued, s.RunMinutes, s.Failed, s.Interrupted, s.Reruns, s.Spend, s.GitHub)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.Incomplete != "" {
		fmt.Printf("\nINCOMPLETE: %s.\n", rep.Incomplete)
	}
	fmt.Printf("\nQueue: from a job's created_at to its runner's first step (GitHub may stamp a scale set job's started_at when it assigns it:\n"+
		"ARC issue #3346), jobs cancelled in the queue counted with their wait (nearest-rank percentiles). Spend: the jobs' minutes at each pool's node price\n"+
		"(spot where the pool runs spot), without the boot and warm window around them (gpuci cost models those); GitHub's: the\n"+
		"same minutes at $%.3f/min. Interrupted: failed jobs GitHub annotated with a lost runner. Prices: %s\n", prices.HostedT4PerMinute, prices.Source)
	return nil
}

func secs(s float64) string { return fmt.Sprintf("%.0fs", s) }

// parseSince reads "7d" as days, anything else as a Go duration.
func parseSince(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("--since %q: give days as 7d, or a duration as 36h", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--since %q: give days as 7d, or a duration as 36h", s)
	}
	return d, nil
}
