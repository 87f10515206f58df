package main

import (
	"flag"
	"fmt"
)

// runEnv prints what a workflow needs from a stack file, as NAME=value lines for
// $GITHUB_ENV: the workflows take the region from the stack, never from a literal of their
// own, so a stack in another region deploys from the same workflow.
func runEnv(args []string) error {
	fs := flag.NewFlagSet("env", flag.ExitOnError)
	st := addStackFlags(fs, "stack whose Pulumi.<stack>.yaml to read")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	_, cfg, err := st.load()
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(map[string]string{"AWS_REGION": cfg.Region})
	}
	fmt.Printf("AWS_REGION=%s\n", cfg.Region)
	return nil
}
