package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/quota"
)

// runQuota prints, per capacity type, the EC2 G and VT vCPU quota the stack's pools need:
// "capacity-type<TAB>quota-code<TAB>vcpus<TAB>pools" (make bootstrap reads it), or JSON.
func runQuota(args []string) error {
	fs := flag.NewFlagSet("quota", flag.ExitOnError)
	st := addStackFlags(fs, "stack whose pools need the quota")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	_, cfg, err := st.load()
	if err != nil {
		return err
	}
	needs := quota.Needs(cfg)
	if *asJSON {
		return printJSON(needs)
	}
	for _, n := range needs {
		fmt.Fprintf(os.Stdout, "%s\t%s\t%d\t%s\n", n.CapacityType, n.QuotaCode, n.VCPUs, strings.Join(n.Pools, ","))
	}
	return nil
}
