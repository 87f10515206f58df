package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v93/github"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/live"
	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/retry"
	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// runRetry re-runs, once each, the failed jobs of a completed workflow run that lost one of
// the stack's runners (see cmd/gpuci/internal/retry). The token is GITHUB_TOKEN (a workflow's
// own, with actions: write); GITHUB_API_URL points at GitHub Enterprise Server when set.
func runRetry(args []string) error {
	fs := flag.NewFlagSet("retry", flag.ExitOnError)
	st := addStackFlags(fs, "stack whose scale sets' runners count as ours")
	scaleSets := fs.String("scale-sets", "", "comma-separated scale set names instead of --stack's (where no stack file is at hand)")
	podNamespaces := fs.String("pod-namespaces", "", "with --scale-sets, the comma-separated namespaces where their runner and job pods run (default "+wellknown.RunnersNamespace+")")
	repo := fs.String("repo", os.Getenv("GITHUB_REPOSITORY"), "owner/name of the repository (default $GITHUB_REPOSITORY)")
	runID := fs.Int64("run-id", 0, "the completed workflow run's ID (github.event.workflow_run.id)")
	dryRun := fs.Bool("dry-run", false, "decide and print, re-run nothing")
	asJSON := fs.Bool("json", false, "print the decision as JSON")
	withCluster := fs.Bool("cluster", false, "also ask the stack's cluster (Karpenter's interruption events, the runners' pods): it decides where it knows more than GitHub")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig for --cluster (default: $KUBECONFIG, else the stack's kubeconfig output)")
	org := fs.String("org", "", "the in-cluster retrier: sweep this organization's repositories after each spot interruption the cluster saw, instead of one --run-id (implies --cluster)")
	every := fs.Duration("every", 0, "with --org, sweep again at this interval, until stopped (0: once)")
	lookback := fs.Duration("lookback", 6*time.Hour, "with --org, how long before an interruption a run may have started")
	coolDownFor := fs.Duration("spot-cool-down", 0, "with --org, how long the pool of a re-run job launches on-demand nodes (0: never)")
	coolDownPools := fs.String("cool-down-node-pools", "", "with --spot-cool-down, comma-separated <scale set>=<its pool's cool-down NodePool>")
	gpuPools := fs.String("gpu-pools", "", "with --org, comma-separated GPU pools whose nodes are taken out of service (their NodeClaim deleted) when their device plugin withdraws a GPU")
	passTimeout := fs.Duration("pass-timeout", 5*time.Minute, "with --org, the longest a pass, the token's check or a look for broken GPUs may take before it is abandoned")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *org != "" {
		cool, err := parseCoolDowns(*coolDownFor, *coolDownPools)
		if err != nil {
			return err
		}
		return runRetrySweep(*org, *scaleSets, *podNamespaces, *every, *lookback, *passTimeout, *kubeconfig, *dryRun, cool, splitList(*gpuPools), st)
	}
	owner, name, ok := strings.Cut(*repo, "/")
	if !ok || owner == "" || name == "" || *runID <= 0 {
		return fmt.Errorf("--repo owner/name and --run-id are required (got %q, %d)", *repo, *runID)
	}
	token := os.Getenv("GITHUB_TOKEN")
	if token == "" {
		return fmt.Errorf("GITHUB_TOKEN is not set: in a workflow, pass ${{ github.token }} with permissions actions: write")
	}
	ours, err := retryScaleSets(*scaleSets, *podNamespaces, st)
	if err != nil {
		return err
	}
	stack := ours.stack
	client, err := githubClient(token)
	if err != nil {
		return err
	}
	r := retry.Retrier{Client: client, Owner: owner, Repo: name, ScaleSets: ours.names}
	ctx := context.Background()
	if *withCluster || *kubeconfig != "" {
		if stack == "" && *kubeconfig == "" && os.Getenv("KUBECONFIG") == "" {
			stack, _, _ = st.resolve() // the stack's kubeconfig output, if one is selected
		}
		// Asked for, the cluster's evidence is required: deciding without it would quietly
		// leave container-form jobs failed (a broken account, a wrong kubeconfig) and trust
		// annotations the cluster would overrule. Nothing is re-run.
		in, cleanup, err := clusterEvidence(ctx, *kubeconfig, stack, ours.podNamespaces)
		if err != nil {
			return fmt.Errorf("the cluster cannot be read, so nothing was re-run: %w (fix the retry runner's account or the kubeconfig; without --cluster, GitHub's evidence alone decides)", err)
		}
		defer cleanup()
		r.Cluster = in
	}
	progress := newProgress()
	progress.step("reading run %d of %s/%s, its failed jobs and their evidence", *runID, owner, name)
	d, err := r.Decide(ctx, *runID)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := printJSON(d); err != nil {
			return err
		}
	} else {
		for _, j := range d.Failed {
			fmt.Printf("job %d %q (attempt %d) on %s: interrupted=%t (%s)\n", j.ID, j.Name, j.Attempt, j.Runner, j.Interrupted, j.Evidence)
		}
		fmt.Printf("run %d attempt %d: %s\n", d.RunID, d.Attempt, d.Reason)
	}
	if err := appendStepSummary(d.Summary()); err != nil {
		return err
	}
	if *dryRun || d.Method == "" {
		return nil
	}
	progress.step("re-running %v of run %d (%s)", d.Rerun, *runID, d.Method)
	return r.Apply(ctx, d)
}

// clusterEvidence reads what the cluster's events say of recent interruptions. cleanup
// releases the kubeconfig once the decision is applied.
func clusterEvidence(ctx context.Context, kubeconfig, stack string, podNamespaces []string) (*live.Interruptions, func(), error) {
	kube, _, cleanup, err := clients(kubeconfig, stack)
	if err != nil {
		return nil, nil, err
	}
	in, err := live.ReadInterruptions(ctx, kube, podNamespaces)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return in, cleanup, nil
}

// ourRunners are the scale sets whose lost runners count, where their pods run, and the stack
// they were read from ("" when the flags named them).
type ourRunners struct {
	names, podNamespaces []string
	stack                string
}

// retryScaleSets are the scale sets whose lost runners count and their pods' namespaces: the
// flags', else the stack's (and the stack then named).
func retryScaleSets(scaleSets, podNamespaces string, st stackFlags) (ourRunners, error) {
	var ours ourRunners
	ours.names, ours.podNamespaces = splitList(scaleSets), splitList(podNamespaces)
	if len(ours.names) > 0 {
		if len(ours.podNamespaces) == 0 {
			ours.podNamespaces = []string{wellknown.RunnersNamespace}
		}
		return ours, nil
	}
	stack, cfg, err := st.load()
	if err != nil {
		return ours, err
	}
	for _, p := range cfg.Pools() {
		ours.names = append(ours.names, p.RunnerScaleSetName)
	}
	ours.podNamespaces, ours.stack = config.RunnerPodNamespaces(cfg.Pools()), stack
	return ours, nil
}

// splitList is a comma-separated flag's items, trimmed, empty ones left out.
func splitList(flagValue string) []string {
	var out []string
	for _, n := range strings.Split(flagValue, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// runRetrySweep is the in-cluster retrier (k8s.RetrierDeployment runs it): at each pass it
// takes the GPU nodes whose device plugin withdrew a GPU out of service (live.OutOfService),
// reads the cluster's events with its own account and, when they hold a spot interruption or
// a node taken out of service, the organization's failed runs since, with GITHUB_TOKEN (a token that may re-run jobs:
// Actions read and write on the repositories; it may not read annotations, see ClusterOnly).
// A pass that fails is reported and the next one tried: the retrier outlives GitHub's and the
// API server's bad minutes. Each pass, token check and look for broken GPUs has passTimeout:
// a request accepted and never answered would otherwise stop the retrier for good (its pod
// has no liveness probe, and neither GitHub's client nor the cluster's has a deadline of its
// own on a request).
func runRetrySweep(org, scaleSets, podNamespaces string, every, lookback, passTimeout time.Duration, kubeconfig string, dryRun bool, cool coolDowns, gpuPools []string, st stackFlags) error {
	token := os.Getenv("GITHUB_TOKEN")
	if token == "" {
		return fmt.Errorf("GITHUB_TOKEN is not set: the in-cluster retrier reads it from its Secret, which the stack makes from the config key %s (printf %%s \"$TOKEN\" | pulumi config set --secret %s, then pulumi up)", config.KeyRetrierGitHubToken, config.KeyRetrierGitHubToken)
	}
	if passTimeout <= 0 {
		return fmt.Errorf("--pass-timeout must be positive (got %s)", passTimeout)
	}
	ours, err := retryScaleSets(scaleSets, podNamespaces, st)
	if err != nil {
		return err
	}
	client, err := githubClient(token)
	if err != nil {
		return err
	}
	ctx := context.Background()
	var tokenState string // the last check's: every pass prints it, with its time and reach
	var reach []string
	var checked time.Time
	for {
		passCtx, cancel := context.WithTimeout(ctx, passTimeout)
		pass, err := sweepOnce(passCtx, client, org, ours, lookback, kubeconfig, dryRun, cool, gpuPools)
		cancel()
		if time.Since(checked) >= tokenCheckEvery {
			checkCtx, cancel := context.WithTimeout(ctx, passTimeout)
			tokenState, reach = retry.Sweep{Client: client, Org: org}.CheckToken(checkCtx)
			cancel()
			checked = time.Now().UTC()
		}
		pass.Token, pass.TokenChecked, pass.TokenReach = tokenState, checked, reach
		// Every pass prints its line, a failed one too: gpuci doctor reads the last one.
		if pass.At.IsZero() {
			pass.At = time.Now().UTC()
		}
		if err != nil {
			pass.Errors = append(pass.Errors, err.Error())
		}
		if perr := printJSON(pass); err == nil {
			err = perr
		}
		if every <= 0 {
			return err
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "gpuci retry --org %s: %v (next pass in %s)\n", org, err, every)
		}
		watchGPUs(ctx, every, passTimeout, kubeconfig, ours.stack, gpuPools, dryRun)
	}
}

// tokenCheckEvery is how often the retrier checks that GitHub still takes its token (at its
// first pass, then hourly): gpuci doctor reads the result from its log.
const tokenCheckEvery = time.Hour

// outOfServiceEvery is how often the retrier looks for a broken GPU between its passes: a
// node whose only job a broken GPU failed is empty at once, and Karpenter consolidates an
// empty node consolidateAfter (30 s in the starter) plus 15 s later. Taken out of service
// first, the node leaves its event, which is the evidence the next pass re-runs the job on.
const outOfServiceEvery = 10 * time.Second

// watchGPUs waits for the next pass, taking broken GPUs' nodes out of service meanwhile.
func watchGPUs(ctx context.Context, wait, timeout time.Duration, kubeconfig, stack string, gpuPools []string, dryRun bool) {
	for end := time.Now().Add(wait); time.Until(end) > 0; {
		time.Sleep(min(outOfServiceEvery, time.Until(end)))
		if dryRun || len(gpuPools) == 0 {
			continue
		}
		kube, dyn, cleanup, err := clients(kubeconfig, stack)
		if err != nil {
			continue // the pass reports it
		}
		sweepCtx, cancel := context.WithTimeout(ctx, timeout)
		did, err := live.OutOfService{Kube: kube, Dynamic: dyn, Pools: gpuPools}.Sweep(sweepCtx)
		cancel()
		cleanup()
		for _, line := range did {
			fmt.Fprintln(os.Stderr, "gpuci retry: out of service: "+line)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "gpuci retry: taking broken GPUs out of service: %v\n", err)
		}
	}
}

func sweepOnce(ctx context.Context, client *github.Client, org string, ours ourRunners, lookback time.Duration, kubeconfig string, dryRun bool, cool coolDowns, gpuPools []string) (retry.Pass, error) {
	kube, dyn, cleanup, err := clients(kubeconfig, ours.stack)
	if err != nil {
		return retry.Pass{}, fmt.Errorf("the cluster cannot be read, so nothing was re-run: %w", err)
	}
	defer cleanup()
	// First the broken GPUs, so that this pass's evidence holds them: the job a GPU failed is
	// re-run in the same pass, on a fresh node.
	var outOfService []string
	var outErr error
	if !dryRun {
		outOfService, outErr = live.OutOfService{Kube: kube, Dynamic: dyn, Pools: gpuPools}.Sweep(ctx)
	}
	in, err := live.ReadInterruptions(ctx, kube, ours.podNamespaces)
	if err != nil {
		return retry.Pass{}, fmt.Errorf("the cluster cannot be read, so nothing was re-run: %w", err)
	}
	s := retry.Sweep{Client: client, Org: org, ScaleSets: ours.names, Cluster: in, Lookback: lookback}
	if cool.span > 0 {
		s.CoolDown, s.CoolDownFor, s.CoolDownNodePools = live.CoolDowns{Dynamic: dyn, NodePools: cool.nodePools()}, cool.span, cool.byScaleSet
	}
	pass, err := s.Once(ctx, dryRun)
	pass.OutOfService = outOfService
	if outErr != nil {
		pass.Errors = append(pass.Errors, "taking broken GPUs out of service: "+outErr.Error())
	}
	return pass, err
}

// coolDowns are --spot-cool-down and --cool-down-node-pools, read.
type coolDowns struct {
	span       time.Duration
	byScaleSet map[string]string // scale set → its pool's cool-down NodePool
}

func (c coolDowns) nodePools() []string {
	return slices.Compact(slices.Sorted(maps.Values(c.byScaleSet)))
}

// parseCoolDowns reads the cool-down flags; a cool-down needs its NodePools.
func parseCoolDowns(d time.Duration, pairs string) (coolDowns, error) {
	c := coolDowns{span: d, byScaleSet: map[string]string{}}
	for _, pair := range splitList(pairs) {
		set, np, ok := strings.Cut(pair, "=")
		if !ok || set == "" || np == "" {
			return c, fmt.Errorf("--cool-down-node-pools: %q is not <scale set>=<cool-down NodePool>", pair)
		}
		c.byScaleSet[set] = np
	}
	if d > 0 && len(c.byScaleSet) == 0 {
		return c, fmt.Errorf("--spot-cool-down %s names no NodePool: add --cool-down-node-pools", d)
	}
	return c, nil
}

// appendStepSummary adds Markdown to the job's summary where a workflow runs gpuci
// ($GITHUB_STEP_SUMMARY, the file the runner shows on the run's page); elsewhere nothing.
func appendStepSummary(markdown string) error {
	path := os.Getenv("GITHUB_STEP_SUMMARY")
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("writing the job summary: %w", err)
	}
	_, err = f.WriteString(markdown + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
