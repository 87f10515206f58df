// Command gpuci is the lux-gpu-ci operator CLI. Its commands and flags are listed once, in the
// usage constant below (`gpuci help`); each command is a file of this package (run<Command>),
// and what only it uses is under internal/.
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

const usage = `usage: gpuci <command> [flags]

commands:
  cost        what a stack costs idle, per build and per month: gpuci cost --stack dev [--builds-per-day N --minutes M --interruption-rate R]
  verify      check a live cluster against its stack: gpuci verify --stack dev [--kubeconfig PATH] [--json]
  doctor      troubleshoot a live cluster: symptom, evidence, fix: gpuci doctor --stack dev [--fix] [--json]
  crd-owners  who besides the stack owns fields of ARC's CRDs; --fix, once, makes it the only owner: gpuci crd-owners --stack dev [--fix] [--json]
  quota       the EC2 G and VT vCPU quotas a stack's pools need: gpuci quota --stack dev [--json]
  reach       does the stack's EKS API endpoint admit a client address: gpuci reach --stack prod --from IP [--json]
  env         what a workflow needs from the stack file, for $GITHUB_ENV: gpuci env --stack prod [--json]
  workflows   the workflows a repository needs for the stack's pools (smoke test, retry): gpuci workflows --stack dev [--out .github/workflows] [--json]
  actionlint-config  .github/actionlint.yaml from every stack file's runner labels: gpuci actionlint-config [--project .] [--out .github/actionlint.yaml]
  images      the images a pool's nodes start a job from, as its pods name them (an image snapshot's list): gpuci images --stack dev --pool gpu-spot [--job-image IMG,…] [--json]
  stats       per scale set, what GitHub recorded of its jobs: queue p50/p90/max, minutes, interruptions, spend: gpuci stats --stack dev [--since 7d] [--repos a,b] [--json]
  retry       re-run a run's jobs once if they lost the stack's runners: gpuci retry --stack dev --repo O/R --run-id N [--dry-run] [--json] [--cluster]
  grow        let a pool run more GPUs (gpuLimit, maxRunners) in its stack file; make grow also asks AWS for the quota and runs the up: gpuci grow --stack starter --pool gpu-spot --gpus 4
  cuda-image  put a runner-form pool on the CUDA runner image the copy publishes, once its nodes can pull it (make cuda-image also runs the up): gpuci cuda-image --stack starter --pool gpu-spot [--image REF]
  github-app  make the organization's GitHub App for ARC (two presses in a browser; make bootstrap runs it): gpuci github-app --org O --key-out PATH
  cache-gate  a pool's compiler cache behind its gate (in the stack's cache pods): gpuci cache-gate --upstream URL --pool P --pod-namespaces A,B [--write-refs refs/heads/main] [--shared]
  version     gpuci's version and the versions the stack pins [--json]

Every command prints a table or sentences for people, and JSON with --json.

--stack defaults to the Pulumi stack selected in --project (an error if none is).
gpuci <command> -h lists a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "cost":
		err = runCost(os.Args[2:])
	case "verify":
		err = runVerify(os.Args[2:])
	case "doctor":
		err = runDoctor(os.Args[2:])
	case "crd-owners":
		err = runCRDOwners(os.Args[2:])
	case "quota":
		err = runQuota(os.Args[2:])
	case "retry":
		err = runRetry(os.Args[2:])
	case "stats":
		err = runStats(os.Args[2:])
	case "reach":
		err = runReach(os.Args[2:])
	case "env":
		err = runEnv(os.Args[2:])
	case "images":
		err = runImages(os.Args[2:])
	case "actionlint-config":
		err = runActionlintConfig(os.Args[2:])
	case "workflows":
		err = runWorkflows(os.Args[2:])
	case "grow":
		err = runGrow(os.Args[2:])
	case "cuda-image":
		err = runCUDAImage(os.Args[2:])
	case "github-app":
		err = runGitHubApp(os.Args[2:])
	case "cache-gate":
		err = runCacheGate(os.Args[2:])
	case "version", "--version":
		err = runVersion(os.Args[2:])
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

// printJSON writes v as indented JSON (the --json output of every command).
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
