//go:build e2e

package e2e

// EKS's own pods on the system nodes, where upstream publishes them. The stack installs the
// coredns add-on; EKS runs it as Kubernetes' CoreDNS add-on manifest
// (cluster/addons/dns/coredns in k8s.io/kubernetes, here at the API server's version, which
// hack/e2e-tools.sh downloads to build it) with two replicas. Its requests (100m CPU, 70Mi)
// are EKS's too. kube-proxy, the VPC CNI and the pod identity agent are DaemonSets with no
// manifest of EKS's in a module: they are not here.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	sigsyaml "sigs.k8s.io/yaml"
)

// startCoreDNS creates CoreDNS's ServiceAccount and Deployment from Kubernetes' manifest and
// waits until the scheduler has placed both replicas.
func startCoreDNS(t *testing.T, ctx context.Context, core kubernetes.Interface) {
	t.Helper()
	version := mustEnv(t, "E2E_KUBE_VERSION")
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", "k8s.io/kubernetes@v"+version).Output()
	require.NoError(t, err, "k8s.io/kubernetes v%s in the module cache", version)
	var mod struct{ Dir string }
	require.NoError(t, json.Unmarshal(out, &mod))
	b, err := os.ReadFile(filepath.Join(mod.Dir, "cluster", "addons", "dns", "coredns", "coredns.yaml.base"))
	require.NoError(t, err)
	// The placeholders coredns.yaml.sed fills: the cluster's domain, the DNS Service's IP (not
	// created here) and the memory limit (cluster/gce/config-default.sh's default).
	manifest := strings.NewReplacer("__DNS__DOMAIN__", "cluster.local", "__DNS__SERVER__", "10.100.0.10",
		"__DNS__MEMORY__LIMIT__", "170Mi").Replace(string(b))
	var created int
	for _, doc := range strings.Split(manifest, "\n---") {
		var kind struct{ Kind string }
		require.NoError(t, sigsyaml.Unmarshal([]byte(doc), &kind))
		switch kind.Kind {
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			require.NoError(t, sigsyaml.UnmarshalStrict([]byte(doc), &sa))
			_, err = core.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, &sa, metav1.CreateOptions{})
		case "Deployment":
			var d appsv1.Deployment
			require.NoError(t, sigsyaml.UnmarshalStrict([]byte(doc), &d))
			replicas := int32(2) // EKS's coredns add-on runs two
			d.Spec.Replicas = &replicas
			_, err = core.AppsV1().Deployments(d.Namespace).Create(ctx, &d, metav1.CreateOptions{})
		default:
			continue
		}
		require.NoError(t, err, kind.Kind)
		created++
	}
	require.Equal(t, 2, created, "the manifest's ServiceAccount and Deployment")
	require.Eventually(t, func() bool {
		list, err := core.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil || len(list.Items) != 2 {
			return false
		}
		for _, p := range list.Items {
			if p.Spec.NodeName == "" {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "the scheduler places both CoreDNS replicas")
}
