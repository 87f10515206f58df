package main

import (
	"flag"
	"fmt"
	"net/netip"
)

// runReach answers whether a stack's EKS API endpoint admits a client address: deploy.yml
// asks it for its own runner's egress address before `pulumi up`.
func runReach(args []string) error {
	fs := flag.NewFlagSet("reach", flag.ExitOnError)
	st := addStackFlags(fs, "stack whose Pulumi.<stack>.yaml to read")
	from := fs.String("from", "", "the client's public IPv4 address")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	addr, err := netip.ParseAddr(*from)
	if err != nil {
		return fmt.Errorf("--from %q is not an IP address", *from)
	}
	stack, cfg, err := st.load()
	if err != nil {
		return err
	}
	if err := cfg.APIAdmits(addr); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(map[string]any{"stack": stack, "address": addr.String(), "admitted": true})
	}
	fmt.Printf("the EKS API endpoint of %s admits %s\n", stack, addr)
	return nil
}
