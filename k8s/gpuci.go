package k8s

// The stack's own pods that run gpuci (the retrier, each compiler cache's gate) get it one of
// two ways, checked against the SHA-256 the stack pins either way, by an init container, into
// a volume only the pod sees:
//   - the stack's own build (stack.BuildGpuci), which the stack stores in its bucket
//     (wellknown.GpuciKey): the AWS CLI fetches it with the pod's Pod Identity, whose role reads
//     that one object;
//   - a published release (retrierGpuciVersion): curl, in the runner image, which has curl and
//     sha256sum and which the system nodes pull through the cache already.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// Gpuci is where the stack's pods get gpuci: a release, or the build the stack stored.
type Gpuci struct {
	Release config.Gpuci
	// Stored is the SHA-256 of the build in the stack's bucket ("" for none).
	Stored string
}

// Available reports whether the stack's pods have a gpuci to run.
func (g Gpuci) Available() bool { return g.Release.Pinned() || g.Stored != "" }

// SHA256 is the pin the fetched binary must match.
func (g Gpuci) SHA256() string {
	if g.Release.Pinned() {
		return g.Release.SHA256
	}
	return g.Stored
}

const (
	gpuciDir    = "/opt/gpuci"
	gpuciBinary = gpuciDir + "/gpuci"
	// bucketKey is the stack bucket's name in the ConfigMap a namespace that fetches the
	// stored gpuci has (the compiler cache's, the retrier's).
	bucketKey = "bucket"
)

// fetchGpuci is the init container that puts g's binary at gpuciBinary; bucket names the
// ConfigMap that holds the stack bucket's name (bucketKey), for the stored build.
func fetchGpuci(g Gpuci, cache ImageCache, region, bucket string, res corev1.ResourceRequirements) corev1.Container {
	const check = `echo "$SHA256  $DIR/gpuci" | sha256sum -c - && chmod 0555 "$DIR/gpuci"`
	c := corev1.Container{
		Name:            "fetch-gpuci",
		ImagePullPolicy: corev1.PullIfNotPresent,
		Env:             []corev1.EnvVar{{Name: "DIR", Value: gpuciDir}, {Name: "SHA256", Value: g.SHA256()}},
		Resources:       res,
		SecurityContext: restrictedReadOnly(),
		VolumeMounts:    []corev1.VolumeMount{{Name: "gpuci", MountPath: gpuciDir}},
	}
	if g.Release.Pinned() {
		c.Image = cache.Pull(versions.RunnerImage)
		c.Command = []string{"sh", "-c", `curl -fsSL --retry 3 -o "$DIR/gpuci" "$URL" && ` + check}
		c.Env = append(c.Env, corev1.EnvVar{Name: "URL", Value: fmt.Sprintf("%s/%s/gpuci_linux_amd64", versions.GpuciReleases, g.Release.Version)})
		return c
	}
	c.Image = cache.Pull(versions.AWSCLIImage)
	c.Command = []string{"sh", "-c", `aws s3api get-object --bucket "$BUCKET" --key "$KEY" "$DIR/gpuci" >/dev/null && ` + check}
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "BUCKET", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: bucket}, Key: bucketKey,
		}}},
		corev1.EnvVar{Name: "KEY", Value: wellknown.GpuciKey(g.Stored)},
		corev1.EnvVar{Name: "AWS_REGION", Value: region},
		// The CLI's own files (its cache, its history) under a volume: the root is read-only.
		corev1.EnvVar{Name: "HOME", Value: "/tmp"},
	)
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "fetch-home", MountPath: "/tmp"})
	return c
}

// gpuciMount is where the pod's other containers find the binary, read-only.
func gpuciMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: "gpuci", MountPath: gpuciDir, ReadOnly: true}
}

// gpuciVolumes are the binary's volume and the fetcher's home.
func gpuciVolumes() []corev1.Volume {
	return []corev1.Volume{
		{Name: "gpuci", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "fetch-home", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
}
