package k8s

import "github.com/luxfi/lux-gpu-ci/config"

// ImageCache maps an upstream registry's host (docker.io, ghcr.io, …) to the ECR
// pull-through cache repository that serves its images in the stack's region
// ("<account>.dkr.ecr.<region>.amazonaws.com/<prefix>"). Nodes pull from ECR with their own
// role (the EKS AMIs' ECR credential provider); empty, every image comes from its registry.
type ImageCache map[string]string

// Pull is the reference a node pulls for image: through the cache where its registry has a
// rule, else image itself. Names are normalized as Docker does ("nvidia/cuda:12" is
// docker.io/nvidia/cuda:12, "ubuntu" is docker.io/library/ubuntu), which is also the path
// ECR's Docker Hub rule expects.
func (c ImageCache) Pull(image string) string {
	host, rest, ok := config.ImageRegistry(image)
	if cache, cached := c[host]; ok && cached {
		return cache + "/" + rest
	}
	return image
}
