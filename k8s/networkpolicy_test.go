package k8s_test

// The runners' namespace's NetworkPolicies, as the builders make them, judged by what they
// let each kind of pod reach. make e2e proves which policies select which real pod (hostile
// jobs); nothing in it enforces a policy, so what a policy allows is judged here, by
// NetworkPolicy's own rules (k8s.io/api networking/v1 types.go at the pinned version: a pod
// any Egress policy selects is isolated for egress, and a connection is allowed when a rule
// of a policy selecting it matches both a peer and a port; an empty rule matches all).

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// destination is where a pod connects: an address and port, and the pod there if it is one.
type destination struct {
	what      string
	ip        string
	port      int32
	proto     corev1.Protocol
	namespace map[string]string // the labels of the pod's namespace; nil when not a pod
	pod       map[string]string
}

var (
	kubeDNS      = destination{what: "CoreDNS", ip: "10.0.1.20", port: 53, proto: corev1.ProtocolUDP, namespace: map[string]string{"kubernetes.io/metadata.name": "kube-system"}, pod: map[string]string{"k8s-app": "kube-dns"}}
	github       = destination{what: "github.com", ip: "140.82.112.3", port: 443, proto: corev1.ProtocolTCP}
	apiENI       = destination{what: "the API server's private endpoint", ip: "10.0.2.15", port: 443, proto: corev1.ProtocolTCP}
	apiCluster   = destination{what: "the API server's ClusterIP", ip: "172.20.0.1", port: 443, proto: corev1.ProtocolTCP}
	kubelet      = destination{what: "a node's kubelet", ip: "10.0.2.40", port: 10250, proto: corev1.ProtocolTCP}
	karpenter    = destination{what: "Karpenter's metrics", ip: "10.0.1.33", port: 8080, proto: corev1.ProtocolTCP, namespace: map[string]string{"kubernetes.io/metadata.name": "kube-system"}, pod: map[string]string{"app.kubernetes.io/name": "karpenter"}}
	imds         = destination{what: "IMDS", ip: "169.254.169.254", port: 80, proto: corev1.ProtocolTCP}
	podIdentity  = destination{what: "the Pod Identity agent", ip: "169.254.170.23", port: 80, proto: corev1.ProtocolTCP}
	otherPodHTTP = destination{what: "another pod's port 443", ip: "100.64.3.9", port: 443, proto: corev1.ProtocolTCP, namespace: map[string]string{"kubernetes.io/metadata.name": "arc-systems"}, pod: map[string]string{"app": "x"}}
)

func TestTheRunnersNamespaceIsABoundary(t *testing.T) {
	policies := k8s.RunnersNetworkPolicies()
	require.NotEmpty(t, policies)
	for _, np := range policies {
		require.Equal(t, wellknown.RunnersNamespace, np.Namespace, np.Name)
	}

	pod := func(role string) map[string]string {
		l := map[string]string{"app": "runner"}
		if role != "" {
			l[wellknown.RunnerRoleLabel] = role
		}
		return l
	}
	cases := []struct {
		pod     string
		labels  map[string]string
		reaches []destination
		refused []destination
	}{
		{"a job's pod (runner-form runner, container-form job)", pod(wellknown.RunnerRoleJob),
			[]destination{kubeDNS, github},
			[]destination{apiENI, apiCluster, kubelet, karpenter, imds, podIdentity, otherPodHTTP}},
		{"a relay (container-form runner, retry runner)", pod(wellknown.RunnerRoleRelay),
			[]destination{kubeDNS, github, apiENI, apiCluster},
			[]destination{kubelet, karpenter, imds, podIdentity}},
		{"a pod of another role", pod("other"),
			nil,
			[]destination{kubeDNS, github, apiENI, imds}},
		{"a pod that predates the roles", pod(""),
			[]destination{kubeDNS, github, apiENI, kubelet, imds}, // what it had before the boundary
			nil},
	}
	for _, c := range cases {
		for _, d := range c.reaches {
			assert.True(t, egressAllowed(t, policies, c.labels, d), "%s reaches %s", c.pod, d.what)
		}
		for _, d := range c.refused {
			assert.False(t, egressAllowed(t, policies, c.labels, d), "%s does not reach %s", c.pod, d.what)
		}
		assert.True(t, ingressIsolated(t, policies, c.labels), "nothing connects to %s", c.pod)
	}
}

// egressAllowed applies NetworkPolicy's egress rules: isolated if any Egress policy selects
// the pod, then allowed if one of those policies has a rule matching d.
func egressAllowed(t *testing.T, policies []networkingv1.NetworkPolicy, pod map[string]string, d destination) bool {
	isolated := false
	for _, np := range policies {
		if !selects(t, np.Spec.PodSelector, pod) || !hasType(np, networkingv1.PolicyTypeEgress) {
			continue
		}
		isolated = true
		for _, rule := range np.Spec.Egress {
			if peersMatch(t, rule.To, d, np.Namespace) && portsMatch(rule.Ports, d) {
				return true
			}
		}
	}
	return !isolated
}

func ingressIsolated(t *testing.T, policies []networkingv1.NetworkPolicy, pod map[string]string) bool {
	for _, np := range policies {
		if selects(t, np.Spec.PodSelector, pod) && hasType(np, networkingv1.PolicyTypeIngress) && len(np.Spec.Ingress) == 0 {
			for _, other := range policies {
				if selects(t, other.Spec.PodSelector, pod) && len(other.Spec.Ingress) > 0 {
					return false
				}
			}
			return true
		}
	}
	return false
}

// hasType says whether np isolates for typ, with policyTypes as the API server defaults them
// when a policy leaves them out: Ingress always, and Egress when it has egress rules
// (kubernetes v1.36.3 pkg/apis/networking/v1/defaults.go, SetDefaults_NetworkPolicySpec; the
// field's doc in k8s.io/api networking/v1 types.go says the same).
func hasType(np networkingv1.NetworkPolicy, typ networkingv1.PolicyType) bool {
	types := np.Spec.PolicyTypes
	if len(types) == 0 {
		types = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) > 0 {
			types = append(types, networkingv1.PolicyTypeEgress)
		}
	}
	return slices.Contains(types, typ)
}

// A policy without policyTypes isolates as the API server defaults it: one with egress rules
// isolates egress too, so a pod it selects reaches what its rules name and nothing else.
func TestTheJudgeDefaultsPolicyTypesAsTheAPIServerDoes(t *testing.T) {
	dnsOnly := networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{
		Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
		}}}},
	}}
	pod := map[string]string{"app": "x"}
	assert.True(t, egressAllowed(t, []networkingv1.NetworkPolicy{dnsOnly}, pod, kubeDNS))
	assert.False(t, egressAllowed(t, []networkingv1.NetworkPolicy{dnsOnly}, pod, github), "egress isolated by its rules alone")
	assert.True(t, ingressIsolated(t, []networkingv1.NetworkPolicy{dnsOnly}, pod), "and ingress, always")
	ingressOnly := networkingv1.NetworkPolicy{}
	assert.True(t, egressAllowed(t, []networkingv1.NetworkPolicy{ingressOnly}, pod, github), "no egress rule: egress not isolated")
}

func selects(t *testing.T, sel metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(&sel)
	require.NoError(t, err)
	return s.Matches(labels.Set(l))
}

// peersMatch tells whether one of peers is d; a pod peer without a namespace selector is in
// the policy's own namespace (policyNS).
func peersMatch(t *testing.T, peers []networkingv1.NetworkPolicyPeer, d destination, policyNS string) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		switch {
		case p.IPBlock != nil:
			if inBlock(t, *p.IPBlock, d.ip) {
				return true
			}
		case d.pod != nil:
			nsOK := p.NamespaceSelector == nil && d.namespace["kubernetes.io/metadata.name"] == policyNS ||
				p.NamespaceSelector != nil && selects(t, *p.NamespaceSelector, d.namespace)
			podOK := p.PodSelector == nil || selects(t, *p.PodSelector, d.pod)
			if nsOK && podOK {
				return true
			}
		}
	}
	return false
}

func inBlock(t *testing.T, b networkingv1.IPBlock, ip string) bool {
	addr := netip.MustParseAddr(ip)
	if !netip.MustParsePrefix(b.CIDR).Contains(addr) {
		return false
	}
	for _, e := range b.Except {
		if netip.MustParsePrefix(e).Contains(addr) {
			return false
		}
	}
	return true
}

func portsMatch(ports []networkingv1.NetworkPolicyPort, d destination) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto == d.proto && (p.Port == nil || p.Port.IntVal == d.port) {
			return true
		}
	}
	return false
}

// Who reaches a server, by NetworkPolicy's rules on both ends: a pool's job pods its own
// server, not another pool's; nothing else in the runners' namespace; the servers S3 and the
// Pod Identity agent, not IMDS nor the cluster.
func TestOnlyAPoolsJobsReachItsCacheServer(t *testing.T) {
	// gpu-spot's cache is read-write; gpu-spot-container's reads gpu-spot's prefix.
	// gpu-spot-container's job pods are in its own namespace.
	policies := slices.Concat(k8s.RunnersNetworkPolicies(), k8s.ContainerJobsNetworkPolicies("arc-jobs-gpu-spot-container"),
		k8s.CompilerCacheNetworkPolicies([]config.CompilerCacheService{
			{Name: "gpu-spot", Prefix: "gpu-spot", Access: config.CacheReadWrite},
			{Name: "gpu-spot-container", Prefix: "gpu-spot", Access: config.CacheReadOnly},
		}))
	cacheNS := map[string]string{"kubernetes.io/metadata.name": "gpuci-cache"}
	runnersNS := map[string]string{"kubernetes.io/metadata.name": "arc-runners"}
	server := func(pool string) endpoint {
		return endpoint{ns: cacheNS, pod: map[string]string{"app.kubernetes.io/name": "compiler-cache", wellknown.CompilerCacheLabel: pool}, ip: "10.0.1.50", port: 8080}
	}
	jobIn := func(ns, pool string) endpoint {
		return endpoint{ns: map[string]string{"kubernetes.io/metadata.name": ns}, pod: map[string]string{wellknown.RunnerRoleLabel: wellknown.RunnerRoleJob, wellknown.CompilerCacheLabel: pool}}
	}
	jobOf := func(pool string) endpoint {
		if pool == "gpu-spot-container" {
			return jobIn("arc-jobs-gpu-spot-container", pool)
		}
		return jobIn("arc-runners", pool)
	}
	relay := endpoint{ns: runnersNS, pod: map[string]string{wellknown.RunnerRoleLabel: wellknown.RunnerRoleRelay}}

	assert.True(t, connects(t, policies, jobOf("gpu-spot"), server("gpu-spot")), "a read-write pool's job reaches its server")
	assert.True(t, connects(t, policies, jobOf("gpu-spot-container"), server("gpu-spot-container")), "a read-only pool's job reaches its own")
	assert.False(t, connects(t, policies, jobOf("gpu-spot-container"), server("gpu-spot")), "and not the server that writes the bucket")
	assert.False(t, connects(t, policies, jobIn("arc-jobs-gpu-spot-container", "gpu-spot"), server("gpu-spot")),
		"a pod of another pool's jobs' namespace, whatever its labels, is not a gpu-spot job")
	assert.False(t, connects(t, policies, relay, server("gpu-spot")), "a relay builds nothing")
	assert.False(t, connects(t, policies, endpoint{ns: runnersNS, pod: map[string]string{wellknown.RunnerRoleLabel: wellknown.RunnerRoleJob}}, server("gpu-spot")), "a job pod of no pool's cache")

	srv := server("gpu-spot")
	srv.port = 0
	s3 := endpoint{ip: "52.218.128.10", port: 443}
	agent := endpoint{ip: "169.254.170.23", port: 80}
	imds := endpoint{ip: "169.254.169.254", port: 80}
	kubelet := endpoint{ip: "10.0.1.20", port: 10250}
	assert.True(t, connects(t, policies, srv, s3), "S3, through the gateway endpoint")
	assert.True(t, connects(t, policies, srv, agent), "its credentials")
	assert.False(t, connects(t, policies, srv, imds), "never the node's role")
	assert.False(t, connects(t, policies, srv, kubelet))
}

// A container-form pool's jobs' namespace: its job pods reach what a job's pod in the
// runners' namespace reaches (DNS, the internet), nothing of the cluster, and nothing reaches
// them.
func TestAContainerPoolsJobsNamespaceIsABoundary(t *testing.T) {
	const ns = "arc-jobs-gpu-spot-container"
	policies := k8s.ContainerJobsNetworkPolicies(ns)
	require.NotEmpty(t, policies)
	job := map[string]string{wellknown.RunnerRoleLabel: wellknown.RunnerRoleJob, wellknown.PoolLabel: "gpu-spot-container"}
	for _, np := range policies {
		require.Equal(t, ns, np.Namespace, np.Name)
	}
	for _, d := range []destination{kubeDNS, github} {
		assert.True(t, egressAllowed(t, policies, job, d), "a job pod reaches %s", d.what)
	}
	for _, d := range []destination{apiENI, apiCluster, kubelet, karpenter, imds, podIdentity, otherPodHTTP} {
		assert.False(t, egressAllowed(t, policies, job, d), "a job pod does not reach %s", d.what)
	}
	assert.True(t, ingressIsolated(t, policies, job), "nothing connects to a job pod")
	assert.False(t, egressAllowed(t, policies, map[string]string{"app": "x"}, github), "a pod of no role there reaches nothing")
}

// endpoint is a pod (its namespace's and its own labels) or an address, and a TCP port.
type endpoint struct {
	ns, pod map[string]string
	ip      string
	port    int32
}

// connects applies NetworkPolicy's rules at both ends (k8s.io/api networking/v1 types.go):
// the source's egress, then, for a pod, the destination's ingress.
func connects(t *testing.T, policies []networkingv1.NetworkPolicy, from, to endpoint) bool {
	in := func(ns map[string]string, np networkingv1.NetworkPolicy) bool {
		return ns["kubernetes.io/metadata.name"] == np.Namespace
	}
	dest := destination{what: "", ip: to.ip, port: to.port, proto: corev1.ProtocolTCP, namespace: to.ns, pod: to.pod}
	if dest.ip == "" {
		dest.ip = "10.0.1.50"
	}
	var fromNS []networkingv1.NetworkPolicy
	for _, np := range policies {
		if in(from.ns, np) {
			fromNS = append(fromNS, np)
		}
	}
	if !egressAllowed(t, fromNS, from.pod, dest) {
		return false
	}
	if to.pod == nil {
		return true
	}
	isolated := false
	for _, np := range policies {
		if !in(to.ns, np) || !selects(t, np.Spec.PodSelector, to.pod) || !hasType(np, networkingv1.PolicyTypeIngress) {
			continue
		}
		isolated = true
		for _, rule := range np.Spec.Ingress {
			src := destination{namespace: from.ns, pod: from.pod, ip: "10.0.2.9", port: to.port, proto: corev1.ProtocolTCP}
			if peersMatch(t, rule.From, src, np.Namespace) && portsMatch(rule.Ports, dest) {
				return true
			}
		}
	}
	return !isolated
}
