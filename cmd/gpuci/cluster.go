package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/doctor"
	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/githubside"
	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/live"
	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/stats"
	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/verify"
	"github.com/luxfi/lux-gpu-ci/config"
)

// clusterCommand holds what the commands that read a live cluster (verify, doctor) share:
// the stack whose configuration the cluster should match, and how to reach the cluster.
type clusterCommand struct {
	fs               *flag.FlagSet
	stack            stackFlags
	kubeconfig       *string
	deployRepository *string
	asJSON           *bool
	progress         progress
	// stackName is the stack open read.
	stackName string
}

func newClusterCommand(name string) *clusterCommand {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	return &clusterCommand{
		fs:               fs,
		stack:            addStackFlags(fs, "stack whose configuration the cluster should match"),
		kubeconfig:       fs.String("kubeconfig", "", "kubeconfig (default: $KUBECONFIG, else the stack's kubeconfig output)"),
		deployRepository: fs.String("deploy-repository", os.Getenv("DEPLOY_REPOSITORY"), "owner/name of the repository whose deploy.yml deploys the stack: its environment is checked too (needs GITHUB_TOKEN; default $DEPLOY_REPOSITORY)"),
		asJSON:           fs.Bool("json", false, "print JSON"),
		progress:         newProgress(),
	}
}

// open parses args, reads the stack's configuration and connects to the cluster.
func (c *clusterCommand) open(args []string) (*config.Config, kubernetes.Interface, dynamic.Interface, func(), error) {
	if err := c.fs.Parse(args); err != nil {
		return nil, nil, nil, nil, err
	}
	stack, cfg, err := c.stack.load()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	c.stackName = stack
	c.progress.step("connecting to the cluster of stack %s", stack)
	kube, dyn, cleanup, err := clients(*c.kubeconfig, stack)
	return cfg, kube, dyn, cleanup, err
}

func runVerify(args []string) error {
	cmd := newClusterCommand("verify")
	cfg, kube, dyn, cleanup, err := cmd.open(args)
	if err != nil {
		return err
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd.progress.step("checking the system nodes, Karpenter, the NodePools, the GPU nodes and ARC")
	checks := verify.Run(ctx, kube, dyn, cfg)
	github, err := cmd.githubSide(ctx, cfg)
	if err != nil {
		return err
	}
	for _, c := range github {
		checks = append(checks, verify.Check{Name: c.Name, OK: c.OK, Evidence: c.Evidence})
	}
	cmd.progress.step("done")
	if *cmd.asJSON {
		if err := printJSON(checks); err != nil {
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
	cmd := newClusterCommand("doctor")
	fix := cmd.fs.Bool("fix", false, "restart the listeners of scale sets whose jobs wait with no runner coming; with none stuck, delete the GPU NodePools so Karpenter drains their nodes (asks first)")
	queued := cmd.fs.Duration("queued", doctor.DefaultQueuedFor, "how long a job may wait with no runner pod before its scale set's listener counts as stuck (needs GITHUB_TOKEN)")
	cfg, kube, dyn, cleanup, err := cmd.open(args)
	if err != nil {
		return err
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := doctor.Doctor{Kube: kube, Dyn: dyn, Cfg: cfg, QueuedFor: *queued}
	// GitHub's queued jobs, read once: the stuck-listener check and --fix judge the same list.
	var queuedJobs []stats.QueuedJob
	haveQueue := false
	if token := os.Getenv("GITHUB_TOKEN"); token != "" {
		client, err := githubClient(token)
		if err != nil {
			return err
		}
		queue := stats.Collector{Client: client, Owner: cfg.GitHub.Org, Progress: cmd.progress.step}
		cmd.progress.step("reading the jobs GitHub has queued in %s's repositories", cfg.GitHub.Org)
		var queueErr error
		queuedJobs, queueErr = queue.Queued(ctx)
		haveQueue = queueErr == nil
		d.Queue = func(context.Context) ([]stats.QueuedJob, error) { return queuedJobs, queueErr }
		d.Served = func(ctx context.Context) ([]string, error) {
			return githubside.ServedRepositories(ctx, client, cfg.GitHub.Org, githubside.PoolGroups(cfg))
		}
	}
	cmd.progress.step("examining each symptom of the troubleshooting table")
	findings := d.Examine(ctx)
	github, err := cmd.githubSide(ctx, cfg)
	if err != nil {
		return err
	}
	for _, c := range github {
		findings = append(findings, doctor.Finding{Symptom: c.Name, Problem: !c.OK, Evidence: []string{c.Evidence}, Fix: c.Fix})
	}
	cmd.progress.step("done")
	if *cmd.asJSON {
		if err := printJSON(findings); err != nil {
			return err
		}
	} else {
		doctor.Write(os.Stdout, findings)
	}
	if *fix && haveQueue {
		if stuck := d.StuckListeners(ctx, queuedJobs, d.QueuedFor); len(stuck) > 0 {
			var names []string
			for _, s := range stuck {
				names = append(names, s.Name)
			}
			fmt.Printf("\nRestart the listeners of %v (ARC's controller starts new ones)? Type yes: ", names)
			answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
			if strings.TrimSpace(answer) != "yes" {
				return fmt.Errorf("not confirmed; nothing changed")
			}
			restarted, err := d.RestartListeners(ctx, stuck)
			fmt.Printf("restarted the listeners of %v\n", restarted)
			return err
		}
	}
	if *fix {
		var names []string
		for _, p := range cfg.Pools() {
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

// clients builds client-go clients from the resolved kubeconfig, or, in a pod with neither
// --kubeconfig nor $KUBECONFIG, from the pod's own account.
func clients(kubeconfig, stack string) (kubernetes.Interface, dynamic.Interface, func(), error) {
	var cfg *rest.Config
	cleanup := func() {}
	if kubeconfig == "" && os.Getenv("KUBECONFIG") == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		// In a pod (the retry runner): its own account.
		in, err := rest.InClusterConfig()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("in a pod, but its account cannot be used: %w", err)
		}
		cfg = in
	}
	var err error
	if cfg == nil {
		var path string
		if path, cleanup, err = kubeconfigPath(kubeconfig, stack); err != nil {
			return nil, nil, nil, err
		}
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	}
	if err == nil {
		var kube kubernetes.Interface
		var dyn dynamic.Interface
		if kube, dyn, err = live.Connect(cfg); err == nil {
			return kube, dyn, cleanup, nil
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
	raw, err := stackOutput(stack, "kubeconfig")
	if err != nil {
		return "", nil, fmt.Errorf("no --kubeconfig or $KUBECONFIG, and %w", err)
	}
	var kubeconfig string
	if err := json.Unmarshal(raw, &kubeconfig); err != nil {
		return "", nil, fmt.Errorf("the stack's kubeconfig output is not a string: %w", err)
	}
	f, err := os.CreateTemp("", "gpuci-kubeconfig-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.Remove(f.Name()) }
	if _, err := f.WriteString(kubeconfig); err != nil {
		cleanup()
		return "", nil, err
	}
	return f.Name(), cleanup, f.Close()
}

// githubSide checks what the stack's boundaries rest on in GitHub (githubside): the runner
// groups the stack file calls trusted, and with --deploy-repository the stack's environment
// there. Without GITHUB_TOKEN nothing is asked, and that is a failing check, never a pass.
func (c *clusterCommand) githubSide(ctx context.Context, cfg *config.Config) ([]githubside.Check, error) {
	groups := githubside.TrustedGroups(cfg)
	if len(groups) == 0 && *c.deployRepository == "" {
		return nil, nil
	}
	token := os.Getenv("GITHUB_TOKEN")
	if token == "" {
		return []githubside.Check{{
			Name:     "GitHub settings: the runner groups the stack file trusts (" + strings.Join(groups, ", ") + "), the deploying environment",
			Evidence: "not checked: GITHUB_TOKEN is not set",
			Fix:      "export GITHUB_TOKEN=$(gh auth token) (it reads the organization's runner groups and the repository's environments)",
		}}, nil
	}
	gh, err := githubClient(token)
	if err != nil {
		return nil, err
	}
	c.progress.step("reading the runner groups %v and the deploying environment in GitHub", groups)
	checks := githubside.RunnerGroups(ctx, gh, cfg.GitHub.Org, groups)
	if repo := *c.deployRepository; repo != "" {
		checks = append(checks, githubside.DeployEnvironment(ctx, gh, repo, c.stackName))
	}
	return checks, nil
}
