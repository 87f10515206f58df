package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/crdowners"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// runCRDOwners lists the field managers of ARC's CRDs other than the stack's and, with
// --fix, makes the stack their only owner (see package crdowners for why an upgrade needs it).
func runCRDOwners(args []string) error {
	cmd := newClusterCommand("crd-owners")
	fix := cmd.fs.Bool("fix", false, "move every other manager's fields of ARC's CRDs to the stack's (changes no CRD, only who owns its fields)")
	_, _, dyn, cleanup, err := cmd.open(args)
	if err != nil {
		return err
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var crds []crdowners.CRD
	if *fix {
		cmd.progress.step("taking over the fields of ARC's CRDs as %s", wellknown.ARCCRDFieldManager)
		crds, err = crdowners.Take(ctx, dyn, time.Now())
	} else {
		cmd.progress.step("reading the field managers of ARC's CRDs")
		crds, err = crdowners.Examine(ctx, dyn)
	}
	if err != nil {
		return err
	}
	if *cmd.asJSON {
		if err := printJSON(crds); err != nil {
			return err
		}
	} else {
		w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "CRD\tOTHER MANAGERS\tSTATE")
		for _, c := range crds {
			state := "the stack's alone"
			switch {
			case c.TakenOver:
				state = "taken over: the next apply removes what the stack no longer declares"
			case len(c.OtherManagers) > 0:
				state = "co-owned: fields an ARC upgrade drops would stay"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", c.Name, strings.Join(c.OtherManagers, ","), state)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(crds) == 0 {
		return fmt.Errorf("no CRD of group %s in the cluster: is this the stack's cluster?", wellknown.ARCGroup)
	}
	if !*fix {
		for _, c := range crds {
			if len(c.OtherManagers) > 0 {
				return fmt.Errorf("%s has fields other managers own; run gpuci crd-owners --fix once", c.Name)
			}
		}
	}
	return nil
}
