package stack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/luxfi/lux-gpu-ci/k8s"
)

// Images are named through the cache as ECR's pull-through cache expects: Docker's own
// normalization (library/ for official images), tags and digests kept, other registries
// untouched.
func TestImageCachePull(t *testing.T) {
	c := k8s.ImageCache{
		"docker.io": "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/docker-hub",
		"ghcr.io":   "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/ghcr",
	}
	for image, want := range map[string]string{
		"ghcr.io/actions/actions-runner:latest":          "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/ghcr/actions/actions-runner:latest",
		"nvidia/cuda:12.8.1-devel-ubuntu24.04":           "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/docker-hub/nvidia/cuda:12.8.1-devel-ubuntu24.04",
		"docker.io/nvidia/cuda:12.8.1-devel-ubuntu24.04": "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/docker-hub/nvidia/cuda:12.8.1-devel-ubuntu24.04",
		"ubuntu:24.04": "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/docker-hub/library/ubuntu:24.04",
		"ghcr.io/luxfi/cuda-runner@sha256:" + sha:  "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/ghcr/luxfi/cuda-runner@sha256:" + sha,
		"nvcr.io/nvidia/k8s-device-plugin:v0.19.3": "nvcr.io/nvidia/k8s-device-plugin:v0.19.3",
		"quay.io/prometheus/node-exporter:v1":      "quay.io/prometheus/node-exporter:v1",
	} {
		assert.Equal(t, want, c.Pull(image), image)
	}
	assert.Equal(t, "ghcr.io/actions/actions-runner:latest", k8s.ImageCache(nil).Pull("ghcr.io/actions/actions-runner:latest"), "no cache")
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
