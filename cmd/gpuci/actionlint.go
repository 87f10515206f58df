package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/workflows"
	"github.com/luxfi/lux-gpu-ci/config"
)

// runActionlintConfig writes .github/actionlint.yaml from every stack file of --project
// (workflows.ActionlintConfig): to standard output, or to --out.
func runActionlintConfig(args []string) error {
	fs := flag.NewFlagSet("actionlint-config", flag.ExitOnError)
	project := fs.String("project", ".", "the directory of Pulumi.yaml and the stack files")
	out := fs.String("out", "", "write the file here (e.g. .github/actionlint.yaml) instead of printing it")
	asJSON := fs.Bool("json", false, "print the labels as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(*project, "Pulumi.*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no Pulumi.<stack>.yaml in %s", *project)
	}
	var stacks []*config.Config
	for _, f := range files {
		c, err := config.ParseStackFileOffline(f)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		stacks = append(stacks, c)
	}
	if *asJSON {
		return printJSON(struct {
			Labels []string `json:"labels"`
		}{workflows.ActionlintLabels(stacks)})
	}
	b, err := workflows.ActionlintConfig(stacks)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = os.Stdout.Write(b)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}
