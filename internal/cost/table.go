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
	u := r.Usage
	fmt.Fprintf(tw, "Per build (%.0f min job, %.0f min boot, %.0f%% cold starts, %.1f GB image)\t\n", u.MinutesPerBuild, u.BootMinutes, u.ColdStarts*100, u.ImageGB)
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
		fmt.Fprintf(tw, "    per month at %.0f builds/day\t$%8.2f\n", u.BuildsPerDay, p.MonthlyUSD)
	}
	fmt.Fprintf(tw, "\t\nGitHub-hosted T4 runner, per build\t$%8.4f\n", r.HostedUSD)
	if len(r.Pools) > 0 {
		total := r.IdleUSD + r.Pools[0].MonthlyUSD
		what := "idle + pool " + r.Pools[0].Pool
		for _, p := range r.Pools {
			if p.RetryTwinOf == r.Pools[0].Pool {
				total += p.MonthlyUSD
				what += " + its retry twin"
			}
		}
		hosted := r.HostedUSD * u.BuildsPerDay * 30
		fmt.Fprintf(tw, "Month at %.0f builds/day: self-hosted (%s)\t$%8.2f\n", u.BuildsPerDay, what, total)
		fmt.Fprintf(tw, "Month at %.0f builds/day: GitHub-hosted T4\t$%8.2f\n", u.BuildsPerDay, hosted)
	}
	if r.BreakEvenBuilds > 0 {
		fmt.Fprintf(tw, "Break-even\t%.0f builds/month\n", r.BreakEvenBuilds)
	} else {
		fmt.Fprintf(tw, "Break-even\tnever at these prices\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nPrices: %s\n", r.Prices)
	return err
}
