package k8s

import "github.com/luxfi/lux-gpu-ci/config"

// ImageCache maps an upstream registry's host (docker.io, ghcr.io, …) to the ECR
// pull-through cache repository that serves its images in the stack's region: the stack's
// imageCache output (config.CacheAddresses, which gpuci images shares). Nodes pull from ECR
// with their own role (the EKS AMIs' ECR credential provider); empty, every image comes from
// its registry.
type ImageCache = config.CacheAddresses
