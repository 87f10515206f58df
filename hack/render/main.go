// Command render writes what a stack declares, offline and without credentials: the real
// program (stack.Program) under the test mocks and the fake AWS, with the stack's real
// configuration (see stack/render). It is test tooling, not an operator
// command, because it links the fakes; `make render` runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/luxfi/lux-gpu-ci/stack/render"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "render: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("render", flag.ExitOnError)
	stack := fs.String("stack", "dev", "stack whose Pulumi.<stack>.yaml to render")
	out := fs.String("out", "", "output directory (replaced as a whole)")
	dir := fs.String("project", ".", "directory holding Pulumi.yaml and the stack files")
	charts := fs.String("charts", "", `also render Helm releases through their charts: "all" or release names, comma-separated`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out is required")
	}
	var names []string
	if *charts != "" {
		names = strings.Split(*charts, ",")
	}
	if err := render.Run(render.Options{ProjectDir: *dir, Stack: *stack, Out: *out, Charts: names}); err != nil {
		return err
	}
	fmt.Printf("rendered stack %s into %s\n", *stack, *out)
	return nil
}
