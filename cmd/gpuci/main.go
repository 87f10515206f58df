// Command gpuci is the lux-gpu-ci operator CLI.
//
//	gpuci render --stack dev --out out/dev [--charts all|release,...]
//
// render runs the real Pulumi program offline, under the same mocks the tests use, with the
// stack's real configuration, and writes every resource it declares (see internal/render).
// It needs no cloud credentials: a reviewer can diff two stacks, or a branch against main.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/luxfi/lux-gpu-ci/internal/render"
)

const usage = `usage: gpuci <command> [flags]

commands:
  render   write what a stack declares, offline: gpuci render --stack dev --out DIR [--charts all|NAME,...]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "render":
		err = runRender(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "gpuci: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gpuci %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func runRender(args []string) error {
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
