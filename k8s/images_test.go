package k8s_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/luxfi/lux-gpu-ci/k8s"
)

// testCache is an image cache with a Docker Hub and a GHCR rule, as the AWS layer hands it
// over; the package's tests pull through it.
var testCache = k8s.ImageCache{
	"docker.io": "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/docker-hub",
	"ghcr.io":   "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/ghcr",
}

// Images are named through the cache as ECR's pull-through cache expects: Docker's own
// normalization (library/ for official images), tags kept, other registries untouched. An
// image pinned by digest bypasses the cache: ECR fills a cached repository only on a pull by
// tag, so its first pull by digest would fail (aws/containers-roadmap#2837), and a tag beside
// the digest is dropped by containerd.
func TestImageCachePull(t *testing.T) {
	c := testCache
	for image, want := range map[string]string{
		"ghcr.io/actions/actions-runner:latest":          "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/ghcr/actions/actions-runner:latest",
		"nvidia/cuda:12.8.1-devel-ubuntu24.04":           "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/docker-hub/nvidia/cuda:12.8.1-devel-ubuntu24.04",
		"docker.io/nvidia/cuda:12.8.1-devel-ubuntu24.04": "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/docker-hub/nvidia/cuda:12.8.1-devel-ubuntu24.04",
		"ubuntu:24.04": "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/docker-hub/library/ubuntu:24.04",
		"ghcr.io/luxfi/cuda-runner@sha256:" + sha:            "ghcr.io/luxfi/cuda-runner@sha256:" + sha,
		"ghcr.io/luxfi/cuda-runner:cuda12.8@sha256:" + sha:   "ghcr.io/luxfi/cuda-runner:cuda12.8@sha256:" + sha,
		"nvidia/cuda:12.8.1-devel-ubuntu24.04@sha256:" + sha: "nvidia/cuda:12.8.1-devel-ubuntu24.04@sha256:" + sha,
		"nvcr.io/nvidia/k8s-device-plugin:v0.19.3":           "nvcr.io/nvidia/k8s-device-plugin:v0.19.3",
		"quay.io/prometheus/node-exporter:v1":                "quay.io/prometheus/node-exporter:v1",
	} {
		assert.Equal(t, want, c.Pull(image), image)
	}
	assert.Equal(t, "ghcr.io/actions/actions-runner:latest", k8s.ImageCache(nil).Pull("ghcr.io/actions/actions-runner:latest"), "no cache")

	// Fully qualified, as ctr needs it (a snapshot's image list): registry and tag spelled out.
	for image, want := range map[string]string{
		"ubuntu":                                  "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/docker-hub/library/ubuntu:latest",
		"nvidia/cuda:12.8.1-devel-ubuntu24.04":    "123456789012.dkr.ecr.us-west-2.amazonaws.com/lux-gpu-ci/docker-hub/nvidia/cuda:12.8.1-devel-ubuntu24.04",
		"quay.io/prometheus/node-exporter":        "quay.io/prometheus/node-exporter:latest",
		"nvcr.io/nvidia/cuda@sha256:" + sha:       "nvcr.io/nvidia/cuda@sha256:" + sha,
		"ghcr.io/luxfi/cuda-runner@sha256:" + sha: "ghcr.io/luxfi/cuda-runner@sha256:" + sha,
	} {
		assert.Equal(t, want, c.Qualified(image), image)
	}
	assert.Equal(t, "docker.io/library/ubuntu:latest", k8s.ImageCache(nil).Qualified("ubuntu"), "no cache: Docker's own name, tag and all")
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
