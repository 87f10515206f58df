package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/quota"
)

// runQuota prints, per capacity type, the EC2 G and VT vCPU quota the stack's pools need: a
// table with a header by default, JSON with --json, or the tab-separated lines make
// bootstrap reads with --tsv ("capacity-type<TAB>quota-code<TAB>vcpus<TAB>pools").
func runQuota(args []string) error {
	fs := flag.NewFlagSet("quota", flag.ExitOnError)
	st := addStackFlags(fs, "stack whose pools need the quota")
	asJSON := fs.Bool("json", false, "print JSON")
	asTSV := fs.Bool("tsv", false, "print headerless tab-separated lines (for scripts)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	_, cfg, err := st.load()
	if err != nil {
		return err
	}
	needs := quota.Needs(cfg)
	switch {
	case *asJSON:
		return printJSON(needs)
	case *asTSV:
		for _, n := range needs {
			fmt.Fprintf(os.Stdout, "%s\t%s\t%d\t%s\n", n.CapacityType, n.QuotaCode, n.VCPUs, strings.Join(n.Pools, ","))
		}
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CAPACITY\tQUOTA CODE\tvCPUs NEEDED\tPOOLS")
	for _, n := range needs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", n.CapacityType, n.QuotaCode, n.VCPUs, strings.Join(n.Pools, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("\nRequest more with: aws service-quotas request-service-quota-increase --service-code ec2 --quota-code <code> --desired-value <vCPUs> --region %s\n", cfg.Region)
	return nil
}
