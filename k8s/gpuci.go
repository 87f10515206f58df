package k8s

// The stack's own pods that run gpuci (the retrier, each compiler cache's gate) run the
// release the stack pins (config.Gpuci): an init container downloads the release's Linux
// binary and refuses it unless its SHA-256 is the pinned one (the release cannot rewrite the
// pin), with the runner image, which has curl and sha256sum and which the system nodes pull
// through the cache already; the binary is in a volume only the pod sees.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/versions"
)

const (
	gpuciDir    = "/opt/gpuci"
	gpuciBinary = gpuciDir + "/gpuci"
)

// fetchGpuci is the init container that puts g's binary at gpuciBinary.
func fetchGpuci(g config.Gpuci, image string, res corev1.ResourceRequirements) corev1.Container {
	return corev1.Container{
		Name:            "fetch-gpuci",
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"sh", "-c", `curl -fsSL --retry 3 -o "$DIR/gpuci" "$URL" && echo "$SHA256  $DIR/gpuci" | sha256sum -c - && chmod 0555 "$DIR/gpuci"`},
		Env: []corev1.EnvVar{
			{Name: "DIR", Value: gpuciDir},
			{Name: "URL", Value: fmt.Sprintf("%s/%s/gpuci_linux_amd64", versions.GpuciReleases, g.Version)},
			{Name: "SHA256", Value: g.SHA256},
		},
		Resources:       res,
		SecurityContext: restrictedReadOnly(),
		VolumeMounts:    []corev1.VolumeMount{{Name: "gpuci", MountPath: gpuciDir}},
	}
}

// gpuciMount is where the pod's other containers find the binary, read-only.
func gpuciMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: "gpuci", MountPath: gpuciDir, ReadOnly: true}
}

func gpuciVolume() corev1.Volume {
	return corev1.Volume{Name: "gpuci", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}
