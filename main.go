// Command lux-gpu-ci is the Pulumi program that stands up self-hosted GitHub Actions GPU CI
// on AWS: a VPC and EKS cluster (infra/), then Karpenter, the NVIDIA device plugin and
// Actions Runner Controller on it (k8s/). The wiring lives in stack/, so that `make render`
// and the tests run exactly what `pulumi up` runs.
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/stack"
)

func main() {
	pulumi.Run(stack.Program)
}
