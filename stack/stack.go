// Package stack wires the layers of lux-gpu-ci into one Pulumi program. main.go runs it
// under the Pulumi engine; `make render` and the tests run the very same function under
// mocks.
package stack

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/infra"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// Program is the whole stack, with the gpuci it builds for its pods (BuildGpuci).
func Program(ctx *pulumi.Context) error { return ProgramWith(BuildGpuci)(ctx) }

// ProgramWith is the whole stack, its pods' gpuci built by build (the tests give a stand-in):
// configuration is read and validated before any resource is registered (so a bad value
// changes nothing), gpuci built where a pod of the stack runs it and no release is pinned,
// then the AWS layer, then the Kubernetes layer on it, then the exports.
func ProgramWith(build func() (infra.GpuciBinary, error)) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error { return program(ctx, build) }
}

func program(ctx *pulumi.Context, build func() (infra.GpuciBinary, error)) error {
	cfg, err := config.Parse(ctx.Stack(), ctx.GetConfig, ctx.IsConfigSecret)
	if err != nil {
		return err
	}
	gpuci := k8s.Gpuci{Release: cfg.Gpuci}
	var built *infra.GpuciBinary
	if !cfg.Gpuci.Pinned() && (cfg.Retrier.Enabled() || len(cfg.CompilerCaches()) > 0) {
		b, err := build()
		if err != nil {
			return err
		}
		built, gpuci.Stored = &b, b.SHA256
	}
	aws, err := infra.New(ctx, cfg, built)
	if err != nil {
		return err
	}
	cluster, err := k8s.New(ctx, "gpu-ci", &k8s.Args{
		Kubeconfig:         aws.Kubeconfig,
		Lifelines:          aws.Lifelines,
		ClusterName:        aws.ClusterName,
		Region:             aws.Region,
		InterruptionQueue:  aws.InterruptionQueue,
		NodeRoleName:       aws.NodeRoleName,
		KarpenterLifelines: aws.KarpenterLifelines,
		NodesPublic:        aws.NodesPublic,
		SystemNodes:        cfg.SystemNodes.Count,
		Tags:               cfg.Tags,
		Pools:              cfg.Pools(),
		GitHub:             cfg.GitHub,
		ImageCache:         aws.ImageCache,
		KubernetesMinor:    cfg.KubernetesMinor(),
		SkipAwait:          cfg.HelmSkipAwait,
		Charts:             k8s.ChartsWith(cfg.HelmCharts),
		ARCVersion:         cfg.ARCVersion(),
		RunnerDrainSeconds: int(cfg.RunnerDrainTimeout.Seconds()),
		RetryRunner:        cfg.RetryRunner,
		Retrier:            cfg.Retrier,
		Gpuci:              gpuci,
		RetrierLifelines:   aws.RetrierLifelines,

		CompilerCaches:         cfg.CompilerCaches(),
		CompilerCacheBucket:    aws.CompilerCacheBucket,
		CompilerCacheLifelines: aws.CompilerCacheLifelines,
	})
	if err != nil {
		return err
	}

	ctx.Export("region", pulumi.String(aws.Region))
	ctx.Export("clusterName", pulumi.String(aws.ClusterName))
	ctx.Export("clusterEndpoint", aws.Endpoint)
	ctx.Export("kubeconfig", aws.Kubeconfig)
	var zones []string
	for _, z := range aws.Zones {
		zones = append(zones, z.String())
	}
	ctx.Export("availabilityZones", pulumi.ToStringArray(zones))
	ctx.Export("vpcId", aws.VpcID)
	ctx.Export("privateSubnetIds", aws.PrivateSubnetIDs)
	ctx.Export("publicSubnetIds", aws.PublicSubnetIDs)
	ctx.Export("karpenterQueueName", aws.InterruptionQueue)
	ctx.Export("karpenterNodeRoleName", aws.NodeRoleName)
	ctx.Export("karpenterControllerRoleArn", aws.ControllerRoleArn)
	ctx.Export("runsOn", cluster.RunsOn)
	// Where a job names its image to pull it through the cache, by upstream registry
	// (examples/workflows/cuda.yml: container: <imageCache["docker.io"]>/nvidia/cuda:…).
	ctx.Export("imageCache", pulumi.ToStringMap(aws.ImageCache))
	// The compiler cache's bucket ("" when no pool has a cache): what gpuci cost prices.
	ctx.Export("compilerCacheBucket", aws.CompilerCacheBucket)
	return nil
}
