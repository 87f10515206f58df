package k8s

// The compiler cache (a pool's compilerCache, config.CompilerCaches): ccache in a job speaks
// HTTP to a cache server of the pool's own on the system nodes, and that server alone holds
// credentials for the stack's bucket (infra.CompilerCache), by EKS Pod Identity. Pure
// builders; the component in compilercacheservice.go registers them.
//
//   - The server is bazel-remote (versions.CompilerCacheServer): ccache's http storage with
//     layout=bazel stores under /ac/<64 hex> (ccache 4.7.5 src/storage/remote/HttpStorage.cpp
//     :254-265), which bazel-remote serves as raw entries only with
//     --disable_http_ac_validation (server/http.go:99-127 at v2.6.2; otherwise every PUT is
//     400). Its S3 proxy reads Pod Identity's container credentials (iam_role: config/s3.go
//     :49-52 → minio-go v7.0.98 pkg/credentials/iam_aws.go:198-200), so no key is stored.
//   - The gate (`gpuci cache-gate`, cmd/gpuci/internal/cachegate) is what jobs reach: the
//     server listens on the pod's loopback only. It looks each request's caller up (the pool's
//     pod at its address, that pod's EphemeralRunner, the job ARC recorded there) and lets
//     only a job of a trusted ref (compilerCacheWriteRefs) write; each repository's entries are
//     its own unless the pool shares them. It runs the stack's gpuci (gpuci.go); a server
//     without a gate (none to run) takes no write from anyone.
//   - Read-write pool: its server reads and writes the pool's prefix, and refreshes an object
//     it serves (--s3.update_timestamps) so the bucket's expiry counts from last use.
//   - Read-only pool: its server reads the prefix of the pool it reads from with a role that
//     cannot write, and takes no write from anyone: every request but GET and HEAD needs a
//     password (--htpasswd_file, --allow_unauthenticated_reads: main.go:486-503) that no
//     entry of its file can match ("!" is no hash go-http-auth knows: basic.go:86-95,
//     106-110 at e1cee1c), so a job's PUT is refused 401 and nothing reaches the bucket.
//   - Only the pool's own pods reach its server (NetworkPolicies on both sides), so a
//     read-only pool's job cannot reach a read-write server.

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// CompilerCacheDiskGiB is a server's local copy of its cache (bazel-remote's --max_size,
// whole GiB), on the system node's disk: hits it holds skip S3, the rest come from S3.
const CompilerCacheDiskGiB = 2

// compilerCacheAuthFile is the read-only servers' password file: one entry that matches no
// password.
const (
	compilerCacheAuthDir  = "/etc/gpuci-cache"
	compilerCacheAuthKey  = "htpasswd"
	CompilerCacheNoWriter = "nobody:!\n"
)

// CompilerCacheNamespaceLabels: the servers pass the restricted Pod Security level.
func CompilerCacheNamespaceLabels() map[string]string {
	return map[string]string{psaapi.EnforceLevelLabel: string(psaapi.LevelRestricted)}
}

// CompilerCacheURL is the ccache remote storage a pool's jobs use (ccache's
// CCACHE_REMOTE_STORAGE, MANUAL "Remote storage backends"): its server, in the bazel
// layout, read-only where the pool is. The connect timeout allows for a cluster network
// (ccache's 100 ms default is for a LAN); the operation timeout is ccache's own default, 10 s
// (src/ccache/storage/remote/remotestorage.hpp:38-39 at v4.12.1): ample for a fatbin from the
// server's disk or S3 in the region, and what a slow bucket costs each compilation at most
// (60 s, as it was, could make a build slower than no cache at all).
func CompilerCacheURL(pool config.GPUPool) string {
	svc := pool.CompilerCacheService()
	if svc == "" {
		return ""
	}
	u := fmt.Sprintf("http://%s.%s.svc.cluster.local:%d|layout=bazel|connect-timeout=1000|operation-timeout=10000",
		wellknown.CompilerCacheName(svc), wellknown.CompilerCacheNamespace, wellknown.CompilerCachePort)
	if pool.CompilerCache == config.CacheReadOnly {
		u += "|read-only"
	}
	return u
}

// compilerCacheBaseDir is where a job's checkout is, by form: ccache hashes paths under it
// relative (CCACHE_BASEDIR), so two repositories' or two runners' builds of one source hit.
func compilerCacheBaseDir(pool config.GPUPool) string {
	if pool.JobForm == config.JobFormContainer {
		return "/__w" // the hooks' workspace in the job pod
	}
	return "/home/runner/_work"
}

// CompilerCacheEnv is what a pool's job sees of its cache: ccache's settings, read by ccache
// itself, so a build that runs through ccache (CMAKE_<LANG>_COMPILER_LAUNCHER=ccache) uses it
// with no setting of its own. None for a pool without a cache.
func CompilerCacheEnv(pool config.GPUPool) []corev1.EnvVar {
	u := CompilerCacheURL(pool)
	if u == "" {
		return nil
	}
	return []corev1.EnvVar{
		{Name: "CCACHE_REMOTE_STORAGE", Value: u},
		{Name: "CCACHE_BASEDIR", Value: compilerCacheBaseDir(pool)},
		// The compiler's content, not its mtime: two nodes' copies of one image differ in mtime.
		{Name: "CCACHE_COMPILERCHECK", Value: "content"},
		// Depend mode: a compilation's key is its source, flags and the headers its dependency
		// file lists, never the preprocessor's output. nvcc -E preprocesses as the device pass
		// (__CUDA_ARCH__ defined), so in preprocessor mode an edit to host-only code keeps the
		// key and links the old object (mozilla/sccache#2299, the same flaw). ccache uses it
		// when the build writes dependency files (-MD/-MMD, as CMake does) and falls back to
		// preprocessor mode otherwise (src/ccache/ccache.cpp at v4.12.1: :2807-2811 disable,
		// :1263-1276 the key from the dependency file).
		{Name: "CCACHE_DEPEND", Value: "1"},
	}
}

// CompilerCacheBucketConfigMap holds the bucket's name (known once it exists), which the
// servers read as BAZEL_REMOTE_S3_BUCKET: every flag of bazel-remote has its variable
// (utils/flags/flags.go:323-328 at v2.6.2).
const (
	CompilerCacheBucketConfigMap = "compiler-cache"
	CompilerCacheBucketKey       = bucketKey
	compilerCacheBucketEnv       = "BAZEL_REMOTE_S3_BUCKET"
)

// compilerCacheServerPort is the server's, on the pod's loopback, behind its gate.
const compilerCacheServerPort = 8081

// CompilerCacheServerArgs are bazel-remote's flags for svc (utils/flags/flags.go at v2.6.2);
// the bucket comes from CompilerCacheBucketConfigMap. Behind a gate it listens on the pod's
// loopback; without one it takes no write.
func CompilerCacheServerArgs(svc config.CompilerCacheService, region string, gated bool) []string {
	listen := fmt.Sprintf("127.0.0.1:%d", compilerCacheServerPort)
	if !gated {
		listen = fmt.Sprintf(":%d", wellknown.CompilerCachePort)
	}
	args := []string{
		"--dir=/data",
		"--max_size=" + strconv.Itoa(CompilerCacheDiskGiB),
		"--http_address=" + listen,
		"--grpc_address=none",
		"--disable_http_ac_validation",
		"--s3.auth_method=iam_role",
		"--s3.endpoint=s3." + region + ".amazonaws.com",
		"--s3.region=" + region,
		"--s3.prefix=" + svc.Prefix,
	}
	if svc.Writes() && gated {
		return append(args, "--s3.update_timestamps")
	}
	return append(args, "--htpasswd_file="+compilerCacheAuthDir+"/"+compilerCacheAuthKey, "--allow_unauthenticated_reads")
}

// restrictedReadOnly is a container's share of Pod Security's restricted level (no privilege
// escalation, no capability), on a read-only root: the system nodes' own servers (the
// compiler cache's, the retrier) write only to their volumes.
func restrictedReadOnly() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// CompilerCacheGateArgs are `gpuci cache-gate`'s flags for svc (cmd/gpuci/cachegate.go).
func CompilerCacheGateArgs(svc config.CompilerCacheService) []string {
	args := []string{"cache-gate",
		fmt.Sprintf("--listen=:%d", wellknown.CompilerCachePort),
		fmt.Sprintf("--upstream=http://127.0.0.1:%d", compilerCacheServerPort),
		"--pool=" + svc.Name,
		"--pod-namespaces=" + strings.Join(svc.PodNamespaces, ","),
	}
	if svc.Writes() {
		args = append(args, "--write-refs="+strings.Join(svc.WriteRefs, ","))
	}
	if svc.Shared {
		args = append(args, "--shared")
	}
	return args
}

// CompilerCacheGateRules are what a gate reads, by namespace: the pods of its pool where they
// run, and ARC's EphemeralRunners (the job each runner took) beside the runners.
func CompilerCacheGateRules(svc config.CompilerCacheService) map[string][]rbacv1.PolicyRule {
	out := map[string][]rbacv1.PolicyRule{}
	for _, ns := range svc.PodNamespaces {
		out[ns] = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}
	}
	out[wellknown.RunnersNamespace] = append(out[wellknown.RunnersNamespace],
		rbacv1.PolicyRule{APIGroups: []string{"actions.github.com"}, Resources: []string{"ephemeralrunners"}, Verbs: []string{"get"}})
	return out
}

// CompilerCacheServer is svc's Deployment: one server on the system nodes, its local copy on
// an emptyDir, as the image's own non-root user, behind its gate where the stack has a gpuci
// (its own build or a pinned release: Gpuci.Available).
func CompilerCacheServer(svc config.CompilerCacheService, region string, cache ImageCache, gpuci Gpuci) appsv1.Deployment {
	name := wellknown.CompilerCacheName(svc.Name)
	labels := map[string]string{"app.kubernetes.io/name": "compiler-cache", wellknown.CompilerCacheLabel: svc.Name}
	user := gpuciUser // the server image's own (BUILD.bazel BAZEL_REMOTE_USER_ID at v2.6.2)
	disk := resource.MustParse(fmt.Sprintf("%dGi", CompilerCacheDiskGiB+1))
	pod := corev1.PodSpec{
		ServiceAccountName: name,
		// No Service's variables in its environment: bazel-remote reads BAZEL_REMOTE_* as flags.
		EnableServiceLinks: ptr(false),
		NodeSelector:       map[string]string{wellknown.SystemNodeLabel: wellknown.SystemNodeValue},
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: ptr(true), RunAsUser: &user, RunAsGroup: &user, FSGroup: &user,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name:            "server",
			Image:           cache.Pull(versions.CompilerCacheServerImage),
			ImagePullPolicy: corev1.PullIfNotPresent,
			// The image's entrypoint adds a profiling listener on :6060; these flags do not.
			Command: []string{versions.CompilerCacheServerBinary},
			Args:    CompilerCacheServerArgs(svc, region, gpuci.Available()),
			Env: []corev1.EnvVar{{Name: compilerCacheBucketEnv, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: CompilerCacheBucketConfigMap}, Key: CompilerCacheBucketKey,
			}}}},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: wellknown.CompilerCachePort}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceEphemeralStorage: disk},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi"), corev1.ResourceEphemeralStorage: disk},
			},
			SecurityContext: restrictedReadOnly(),
			VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &disk}}}},
	}
	if gpuci.Available() {
		small := corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		}
		pod.InitContainers = []corev1.Container{fetchGpuci(gpuci, cache, region, CompilerCacheBucketConfigMap, small)}
		pod.Containers[0].Ports = nil
		pod.Containers = append(pod.Containers, corev1.Container{
			Name:            "gate",
			Image:           gpuciImage(cache),
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{gpuciBinary},
			Args:            CompilerCacheGateArgs(svc),
			Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: wellknown.CompilerCachePort}},
			Resources:       small,
			SecurityContext: restrictedReadOnly(),
			VolumeMounts:    []corev1.VolumeMount{gpuciMount()},
		})
		pod.Volumes = append(pod.Volumes, gpuciVolumes()...)
	}
	if !svc.Writes() || !gpuci.Available() {
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "no-writer", MountPath: compilerCacheAuthDir, ReadOnly: true})
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "no-writer", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}},
		}})
	}
	one := int32(1)
	return appsv1.Deployment{
		TypeMeta:   k8smeta.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: k8smeta.ObjectMeta{Name: name, Namespace: wellknown.CompilerCacheNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &k8smeta.LabelSelector{MatchLabels: labels},
			// One local copy at a time: a new server starts once the old one is gone.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: k8smeta.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}
}

// CompilerCacheNoWriterFile is the password file of a server that takes no write (a read-only
// pool's, or any without a gate): a ConfigMap named like it.
func CompilerCacheNoWriterFile(svc config.CompilerCacheService) corev1.ConfigMap {
	return corev1.ConfigMap{
		TypeMeta:   k8smeta.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: k8smeta.ObjectMeta{Name: wellknown.CompilerCacheName(svc.Name), Namespace: wellknown.CompilerCacheNamespace},
		Data:       map[string]string{compilerCacheAuthKey: CompilerCacheNoWriter},
	}
}

// CompilerCacheService is svc's Service, where its pool's jobs reach it.
func CompilerCacheService(svc config.CompilerCacheService) corev1.Service {
	return corev1.Service{
		TypeMeta:   k8smeta.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: k8smeta.ObjectMeta{Name: wellknown.CompilerCacheName(svc.Name), Namespace: wellknown.CompilerCacheNamespace},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app.kubernetes.io/name": "compiler-cache", wellknown.CompilerCacheLabel: svc.Name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: wellknown.CompilerCachePort, TargetPort: intstr.FromString("http")}},
		},
	}
}

// CompilerCacheNetworkPolicies are the servers' namespace's policies: everything denied; each
// server reached only by its own pool's job pods, on its port; every server out to DNS, S3
// (public addresses, through the VPC's gateway endpoint) and the Pod Identity agent.
func CompilerCacheNetworkPolicies(services []config.CompilerCacheService) []networkingv1.NetworkPolicy {
	ns := wellknown.CompilerCacheNamespace
	tcp, port := corev1.ProtocolTCP, intstr.FromInt32(wellknown.CompilerCachePort)
	servers := k8smeta.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "compiler-cache"}}
	out := []networkingv1.NetworkPolicy{
		DenyAll(ns),
		networkPolicy(ns, "server-egress", servers, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, []networkingv1.NetworkPolicyEgressRule{
			dnsEgress(), internetEgress(privateRanges), tcpEgress(clusterRanges, apiServerPort), // the gate reads the API server
			podIdentityAgentEgress(),
		}),
	}
	for _, svc := range services {
		np := networkPolicy(ns, wellknown.CompilerCacheName(svc.Name)+"-clients",
			k8smeta.LabelSelector{MatchLabels: map[string]string{wellknown.CompilerCacheLabel: svc.Name}},
			[]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, nil)
		// A job's pod: a runner-form runner in the runners' namespace, a container-form job's
		// pod in its pool's jobs' namespace (the service is named for that pool).
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &k8smeta.LabelSelector{MatchExpressions: []k8smeta.LabelSelectorRequirement{{
					Key: "kubernetes.io/metadata.name", Operator: k8smeta.LabelSelectorOpIn,
					Values: []string{wellknown.RunnersNamespace, wellknown.ContainerJobsNamespace(svc.Name)},
				}}},
				PodSelector: &k8smeta.LabelSelector{MatchLabels: map[string]string{
					wellknown.CompilerCacheLabel: svc.Name, wellknown.RunnerRoleLabel: wellknown.RunnerRoleJob,
				}},
			}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
		}}
		out = append(out, np)
	}
	return out
}

// podIdentityAgent is the EKS Pod Identity agent's address on every node (its container
// credentials endpoint, AWS_CONTAINER_CREDENTIALS_FULL_URI).
const podIdentityAgent = "169.254.170.23/32"

// podIdentityAgentEgress reaches the agent, on its port 80.
func podIdentityAgentEgress() networkingv1.NetworkPolicyEgressRule {
	tcp, port := corev1.ProtocolTCP, intstr.FromInt32(80)
	return networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: podIdentityAgent}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
	}
}

// compilerCacheEgress lets a job's pod reach the compiler cache servers' port (each server's
// own policy then admits only its pool's pods).
func compilerCacheEgress() networkingv1.NetworkPolicyEgressRule {
	tcp, port := corev1.ProtocolTCP, intstr.FromInt32(wellknown.CompilerCachePort)
	return networkingv1.NetworkPolicyEgressRule{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &k8smeta.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": wellknown.CompilerCacheNamespace}},
			PodSelector:       &k8smeta.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "compiler-cache"}},
		}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
	}
}
