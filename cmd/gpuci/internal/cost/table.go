package cost

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the report for people.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Idle (always on), per month\t\n")
	for _, it := range r.Idle {
		fmt.Fprintf(tw, "  %s\t$%8.2f\n", it.What, it.USD)
	}
	fmt.Fprintf(tw, "  total\t$%8.2f\n\t\n", r.IdleUSD)
	if len(r.NewTagFirstPulls) > 0 {
		fmt.Fprintf(tw, "Once per new tag of a cached image, at most: its first pull, if ECR sends it to the upstream through the NAT\t\n")
		for _, it := range r.NewTagFirstPulls {
			fmt.Fprintf(tw, "  %s\t$%8.2f\n", it.What, it.USD)
		}
		fmt.Fprintf(tw, "\t\n")
	}
	u := r.Usage
	boot := "each pool's modelled cold start below, at its slow end, from the node's launch"
	if u.BootMinutes >= 0 {
		boot = fmt.Sprintf("%.0f min boot", u.BootMinutes)
	}
	fmt.Fprintf(tw, "Per build (%.0f min job, %s, %.0f%% cold starts, %.1f GB container-form job image)\t\n", u.MinutesPerBuild, boot, u.ColdStarts*100, u.JobImageGB)
	for _, p := range r.Pools {
		fmt.Fprintf(tw, "  pool %s\t\n", p.Pool)
		for _, it := range p.PerBuild {
			fmt.Fprintf(tw, "    %s\t$%8.4f\n", it.What, it.USD)
		}
		fmt.Fprintf(tw, "    per build\t$%8.4f\n", p.BuildUSD)
		if p.OnDemandBuildUSD > 0 {
			fmt.Fprintf(tw, "    per build on on-demand fallback\t$%8.4f\n", p.OnDemandBuildUSD)
		}
		if p.RetryTwinOf != "" {
			fmt.Fprintf(tw, "    per month, re-running %.0f%% of %s's %.0f builds/day (spot interruptions)\t$%8.2f\n", u.InterruptionRate*100, p.RetryTwinOf, u.BuildsPerDay, p.MonthlyUSD)
			continue
		}
		if p.WarmMonthlyUSD > 0 {
			fmt.Fprintf(tw, "    warm windows: %.0f node-hours a month\t$%8.2f\n", p.WarmNodeHoursPerMonth, p.WarmMonthlyUSD)
			if p.WarmOnDemandMonthlyUSD > 0 {
				fmt.Fprintf(tw, "    warm windows on on-demand nodes (spot short at a window's start: the node is kept all window; gpuci doctor flags it)\t$%8.2f\n", p.WarmOnDemandMonthlyUSD)
			}
		}
		fmt.Fprintf(tw, "    per month at %.0f builds/day\t$%8.2f\n", u.BuildsPerDay, p.MonthlyUSD)
	}
	// Each section aligns its own columns.
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\t\nGitHub-hosted T4 runner, per build\t$%8.4f\n", r.HostedUSD)
	for _, c := range r.Comparisons {
		fmt.Fprintf(tw, "Pool %s: per build %.1f× cheaper than GitHub-hosted T4\t\n", c.Pool, c.Times)
		fmt.Fprintf(tw, "  month at %.0f builds/day: self-hosted (idle + the pool + its retry twin, if any)\t$%8.2f\n", u.BuildsPerDay, c.MonthUSD)
		fmt.Fprintf(tw, "  month at %.0f builds/day: GitHub-hosted T4\t$%8.2f\n", u.BuildsPerDay, c.HostedMonthUSD)
		if c.BreakEvenBuilds > 0 {
			fmt.Fprintf(tw, "  break-even\t%.0f builds/month\n", c.BreakEvenBuilds)
		} else {
			fmt.Fprintf(tw, "  break-even\tnever at these prices\n")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\t\nCold start: queued job → first step on a new GPU node (modelled, not measured: each step's range from its sources)\t\n")
	for _, p := range r.Pools {
		if p.RetryTwinOf != "" {
			continue
		}
		cs := p.ColdStart
		fmt.Fprintf(tw, "  pool %s\t\n", p.Pool)
		for _, s := range cs.Steps {
			fmt.Fprintf(tw, "    %s\t%10s\n", s.What, s.Span)
		}
		fmt.Fprintf(tw, "    total\t%10s\n", cs.Span)
		if m := cs.PrepareJobMargin; m != nil {
			fmt.Fprintf(tw, "    left of the container hooks' %.0f s wait for the job pod (600 s without the stack's setting)\t%10s\n", PrepareJobWaitSeconds, *m)
		}
		if short := p.SpotShortStart; short != nil {
			fmt.Fprintf(tw, "    with spot short, falling back to on-demand\t%10s\n", short.Span)
		} else {
			fmt.Fprintf(tw, "    with spot short\twaits for spot (add on-demand to capacityTypes)\n")
		}
	}
	fmt.Fprintf(tw, "\t\nWarm start: queued job → first step on a warm node (a warm window's, or one a job just left; modelled)\t\n")
	for _, p := range r.Pools {
		if p.RetryTwinOf != "" {
			continue
		}
		fmt.Fprintf(tw, "  pool %s\t\n", p.Pool)
		for _, s := range p.WarmStart.Steps {
			fmt.Fprintf(tw, "    %s\t%10s\n", s.What, s.Span)
		}
		fmt.Fprintf(tw, "    total\t%10s\n", p.WarmStart.Span)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nPrices: %s\nStart figures are a model, not a measurement: cmd/gpuci/internal/cost/coldstart.go names the source of each step's range; a node's cold start is priced at its slow end.\n", r.Prices)
	return err
}
