// Command gpuci is the lux-gpu-ci operator CLI.
//
//	gpuci render --stack dev --out out/dev [--charts all|release,...]
//	gpuci cost   --stack dev [--builds-per-day 30 --minutes 10 --image-gb 8] [--prices FILE | --live] [--json]
//	gpuci verify --stack dev [--kubeconfig PATH] [--json]
//	gpuci doctor --stack dev [--kubeconfig PATH] [--fix] [--json]
//
// render runs the real Pulumi program offline, under the same mocks the tests use, with the
// stack's real configuration, and writes every resource it declares (see internal/render).
// It needs no cloud credentials: a reviewer can diff two stacks, or a branch against main.
//
// cost prices the stack's configuration: idle per month, per build per pool (instance time
// including boot and the warm window, root volume, image bytes through the NAT), per month
// at a build rate, against GitHub's hosted T4 runner, with the break-even.
//
// verify checks a live cluster against the stack: system nodes, Karpenter, each NodePool,
// the GPU nodes up now, the ARC controller, each runner scale set. It exits 0 only if all hold.
//
// doctor examines the symptoms of the README's troubleshooting table and prints evidence
// and the fix for each; --fix deletes the GPU NodePools (after confirmation) so Karpenter
// drains stuck GPU nodes before a destroy.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/cost"
	"github.com/luxfi/lux-gpu-ci/internal/doctor"
	"github.com/luxfi/lux-gpu-ci/internal/render"
	"github.com/luxfi/lux-gpu-ci/internal/verify"
)

const usage = `usage: gpuci <command> [flags]

commands:
  render   write what a stack declares, offline: gpuci render --stack dev --out DIR [--charts all|NAME,...]
  cost     what a stack costs idle, per build and per month: gpuci cost --stack dev [--builds-per-day N --minutes M]
  verify   check a live cluster against its stack: gpuci verify --stack dev [--kubeconfig PATH] [--json]
  doctor   troubleshoot a live cluster: symptom, evidence, fix: gpuci doctor --stack dev [--fix] [--json]
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
	case "cost":
		err = runCost(os.Args[2:])
	case "verify":
		err = runVerify(os.Args[2:])
	case "doctor":
		err = runDoctor(os.Args[2:])
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

func runCost(args []string) error {
	fs := flag.NewFlagSet("cost", flag.ExitOnError)
	stack := fs.String("stack", "dev", "stack whose Pulumi.<stack>.yaml to price")
	dir := fs.String("project", ".", "directory holding the stack files")
	prices := fs.String("prices", "", "JSON price table overriding the built-in one (see internal/cost.Prices)")
	asJSON := fs.Bool("json", false, "print JSON")
	live := fs.Bool("live", false, "fetch current on-demand and spot prices from AWS (needs credentials)")
	u := cost.Usage{}
	fs.Float64Var(&u.BuildsPerDay, "builds-per-day", 30, "GPU builds per day")
	fs.Float64Var(&u.MinutesPerBuild, "minutes", 10, "minutes per build")
	fs.Float64Var(&u.BootMinutes, "boot-minutes", 4, "minutes from a cold node's launch to the job starting")
	fs.Float64Var(&u.ImageGB, "image-gb", 0, "GB of images a cold node pulls (CUDA images are several)")
	fs.Float64Var(&u.ColdStarts, "cold-starts", 1, "share of builds that start a new node (0–1)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.ParseStackFileOffline(*dir + "/Pulumi." + *stack + ".yaml")
	if err != nil {
		return err
	}
	p := cost.DefaultPrices()
	if *prices != "" {
		if p, err = cost.LoadPrices(*prices); err != nil {
			return err
		}
	}
	if *live {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		src, err := cost.NewAWSPrices(ctx)
		if err != nil {
			return err
		}
		onDemand := []string{cfg.SystemNodes.InstanceType}
		var spot []string
		for _, pool := range cfg.GPUPools {
			onDemand = append(onDemand, pool.InstanceTypes...)
			spot = append(spot, pool.InstanceTypes...)
		}
		if p, err = cost.LivePrices(ctx, p, src, cfg.Region, onDemand, spot); err != nil {
			return err
		}
	}
	r, err := cost.Estimate(cfg, p, u)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return r.WriteTable(os.Stdout)
}

func runVerify(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	stack := fs.String("stack", "dev", "stack whose configuration the cluster should match")
	dir := fs.String("project", ".", "directory holding the stack files")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: $KUBECONFIG, else the stack's kubeconfig output)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.ParseStackFileOffline(*dir + "/Pulumi." + *stack + ".yaml")
	if err != nil {
		return err
	}
	kube, dyn, cleanup, err := clients(*kubeconfig, *stack)
	if err != nil {
		return err
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	checks := verify.Run(ctx, kube, dyn, cfg)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(checks); err != nil {
			return err
		}
	} else {
		verify.Write(os.Stdout, checks)
	}
	if !verify.AllOK(checks) {
		return fmt.Errorf("some checks failed")
	}
	return nil
}

func runDoctor(args []string) error {
	fs := flag.NewFlagSet("doctor", flag.ExitOnError)
	stack := fs.String("stack", "dev", "stack whose configuration the cluster should match")
	dir := fs.String("project", ".", "directory holding the stack files")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: $KUBECONFIG, else the stack's kubeconfig output)")
	asJSON := fs.Bool("json", false, "print JSON")
	fix := fs.Bool("fix", false, "delete the GPU NodePools so Karpenter drains their nodes (asks first)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.ParseStackFileOffline(*dir + "/Pulumi." + *stack + ".yaml")
	if err != nil {
		return err
	}
	kube, dyn, cleanup, err := clients(*kubeconfig, *stack)
	if err != nil {
		return err
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := doctor.Doctor{Kube: kube, Dyn: dyn, Cfg: cfg}
	findings := d.Examine(ctx)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(findings); err != nil {
			return err
		}
	} else {
		doctor.Write(os.Stdout, findings)
	}
	if *fix {
		var names []string
		for _, p := range cfg.GPUPools {
			names = append(names, p.Name)
		}
		fmt.Printf("\nDelete NodePools %v so Karpenter drains and terminates their GPU nodes? Type yes: ", names)
		answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		if strings.TrimSpace(answer) != "yes" {
			return fmt.Errorf("not confirmed; nothing changed")
		}
		deleted, err := d.Fix(ctx)
		fmt.Printf("deleted NodePools %v; `pulumi up` recreates them\n", deleted)
		return err
	}
	if n := doctor.Problems(findings); n > 0 {
		return fmt.Errorf("%d problem(s) found", n)
	}
	return nil
}

// clients builds client-go clients from the resolved kubeconfig.
func clients(kubeconfig, stack string) (kubernetes.Interface, dynamic.Interface, func(), error) {
	path, cleanup, err := kubeconfigPath(kubeconfig, stack)
	if err != nil {
		return nil, nil, nil, err
	}
	rest, err := clientcmd.BuildConfigFromFlags("", path)
	if err == nil {
		var kube kubernetes.Interface
		if kube, err = kubernetes.NewForConfig(rest); err == nil {
			var dyn dynamic.Interface
			if dyn, err = dynamic.NewForConfig(rest); err == nil {
				return kube, dyn, cleanup, nil
			}
		}
	}
	cleanup()
	return nil, nil, nil, err
}

// kubeconfigPath resolves the kubeconfig: the flag, $KUBECONFIG, or the stack's secret
// kubeconfig output written to a private temporary file.
func kubeconfigPath(flagValue, stack string) (string, func(), error) {
	if flagValue != "" {
		return flagValue, func() {}, nil
	}
	if env := os.Getenv("KUBECONFIG"); env != "" {
		return env, func() {}, nil
	}
	out, err := exec.Command("pulumi", "stack", "output", "kubeconfig", "--show-secrets", "--stack", stack).Output()
	if err != nil {
		return "", nil, fmt.Errorf("no --kubeconfig or $KUBECONFIG, and `pulumi stack output kubeconfig --stack %s` failed: %w", stack, err)
	}
	f, err := os.CreateTemp("", "gpuci-kubeconfig-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.Remove(f.Name()) }
	if _, err := f.Write(out); err != nil {
		cleanup()
		return "", nil, err
	}
	return f.Name(), cleanup, f.Close()
}
