package k8s

// The stack's own pods that run gpuci (the retrier, each compiler cache's gate) get it one of
// two ways, checked against the SHA-256 the stack pins either way, by an init container, into
// a volume only the pod sees:
//   - the stack's own build (stack.BuildGpuci), which the stack stores in its bucket
//     (wellknown.GpuciKey): the AWS CLI fetches it with the pod's Pod Identity, whose role reads
//     that one object;
//   - a published release (retrierGpuciVersion): curl.
//
// Both, and the container that then runs the binary, use one image, the AWS CLI's at a pinned
// version (gpuciImage): these pods hold the organization's retrier token or a cache's writer
// credential, so none of them runs the runner image, whose tag moves with every runner
// release (versions.RunnerImage).

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
	c.Image = gpuciImage(cache)
	if g.Release.Pinned() {
		c.Command = []string{"sh", "-c", `curl -fsSL --retry 3 -o "$DIR/gpuci" "$URL" && ` + check}
		c.Env = append(c.Env, corev1.EnvVar{Name: "URL", Value: fmt.Sprintf("%s/%s/gpuci_linux_amd64", versions.GpuciReleases, g.Release.Version)})
		return c
	}
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

// gpuciImage is the image of every container of the stack's gpuci pods: the fetcher's (the
// AWS CLI for the stored build; curl-minimal, which AL2023 containers carry by default, for a
// release: AL2023 user guide, "Package changes for curl and libcurl"; sha256sum) and the one
// that runs the binary (static, CGO_ENABLED=0: stack.BuildGpuci, the Makefile's dist; its TLS
// roots from AL2023's /etc/pki/tls/certs/ca-bundle.crt, which Go's crypto/x509 reads:
// root_linux.go).
func gpuciImage(cache ImageCache) string { return cache.Pull(versions.AWSCLIImage) }

// gpuciUser is the uid of a gpuci pod whose image names no user of its own (the AWS CLI image
// runs as root): any non-root uid runs a static binary; this one is also the compiler cache
// server's (CompilerCacheServer), so every gpuci pod runs as the same uid.
const gpuciUser = int64(65532)

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
