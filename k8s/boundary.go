package k8s

// The runners' namespace is a boundary: a job is untrusted code, and it runs there. Pure
// builders of what draws it (the components in runners.go register them):
//
//   - Pod Security admission: baseline enforced (no privileged pod, no host path, network,
//     PID or port), restricted audited and warned. Not restricted: a runner-form job keeps the
//     runner image's sudo inside its container, and a container job runs its image's user.
//   - No service-account token where nothing uses one (gpuPodTemplate): a pool's job code runs
//     only in pods without a token. The retry runner is the exception: its job runs gpuci
//     retry with the retry account's token, which reads events and nothing else.
//   - NetworkPolicies: nothing reaches a runner; a job's pod reaches DNS, the internet and its
//     pool's compiler cache server (CompilerCacheNetworkPolicies admits its pool only), not
//     the cluster's private addresses (other pods, nodes, the API server's private endpoint
//     and ClusterIP) nor the link-local ones (IMDS, the Pod Identity agent); a relay (a
//     container-form runner, the retry runner) reaches the private addresses on 443 only, for
//     the API server. EKS's VPC CNI enforces them (infra: vpc-cni's enableNetworkPolicy), in
//     strict mode: a pod is denied everything until its policies are in place.
//     The API server's public endpoint is on the internet, reachable as publicAccessCidrs
//     allows; an anonymous caller gets its version and health only (docs/operations.md).

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// PodSecurityLabels are the Pod Security admission labels of the namespaces where ARC's pods
// run: baseline enforced, restricted reported. The version is the API server's own (the
// labels carry none): a control plane upgrade brings its newer checks with it.
func PodSecurityLabels() map[string]string {
	return map[string]string{
		psaapi.EnforceLevelLabel: string(psaapi.LevelBaseline),
		psaapi.AuditLevelLabel:   string(psaapi.LevelRestricted),
		psaapi.WarnLevelLabel:    string(psaapi.LevelRestricted),
	}
}

// privateRanges are the addresses a job's pod may not reach: the cluster's own (RFC 1918 and
// shared address space: the VPC, its pods and nodes, the Service range with the API server's
// ClusterIP) and link-local (IMDS at 169.254.169.254, the Pod Identity agent at
// 169.254.170.23). The VPC CNI's policy agent sees a packet before kube-proxy translates a
// ClusterIP (aws/amazon-network-policy-controller-k8s pkg/resolvers/endpoints.go), so a
// Service address counts as its own range here.
var privateRanges = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16"}

// clusterRanges are privateRanges but link-local: where the API server answers a relay, on
// apiServerPort (its private endpoint's ENIs in the VPC, its ClusterIP in the Service range).
var clusterRanges = privateRanges[:4]

// apiServerPort is the API server's port, on its endpoint and its ClusterIP.
const apiServerPort = 443

// Names of the runners' namespace's NetworkPolicies.
const (
	DenyAllPolicy       = "deny-all"
	JobEgressPolicy     = "job-egress"
	RelayEgressPolicy   = "relay-egress"
	PredatesRolesPolicy = "predates-runner-roles"
)

// RunnersNetworkPolicies are the runners' namespace's policies: every pod denied in and out,
// then each role's egress allowed.
//
// A pod without a role keeps the network it had: such a pod predates the roles (a runner or
// job pod started before the stack drew this boundary; ARC and the hooks label a pod only
// when they make it, and relabel none), and denying it would cut a running job off GitHub in
// the middle of the up that brings the boundary. Nothing makes one now: ARC's templates and
// the hooks' carry a role (ScaleSetValues, JobPodTemplate), no job's account may
// create a pod (e2e: hostile jobs), and the e2e checks that every pod there has one.
// Drop this policy once no stack has a pod older than the roles (docs/design.md).
func RunnersNetworkPolicies() []networkingv1.NetworkPolicy {
	role := func(r string) k8smeta.LabelSelector {
		return k8smeta.LabelSelector{MatchLabels: map[string]string{wellknown.RunnerRoleLabel: r}}
	}
	egress := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	ns := wellknown.RunnersNamespace
	noRole := k8smeta.LabelSelector{MatchExpressions: []k8smeta.LabelSelectorRequirement{{Key: wellknown.RunnerRoleLabel, Operator: k8smeta.LabelSelectorOpDoesNotExist}}}
	return []networkingv1.NetworkPolicy{
		DenyAll(ns),
		jobEgressPolicy(ns),
		networkPolicy(ns, RelayEgressPolicy, role(wellknown.RunnerRoleRelay), egress,
			[]networkingv1.NetworkPolicyEgressRule{dnsEgress(), internetEgress(privateRanges), tcpEgress(clusterRanges, apiServerPort)}),
		networkPolicy(ns, PredatesRolesPolicy, noRole, egress, []networkingv1.NetworkPolicyEgressRule{{}}),
	}
}

// jobEgressPolicy is where a pod that runs a job's code (wellknown.RunnerRoleJob) in namespace
// may connect: DNS, the internet (not the cluster's private addresses nor the link-local
// ones) and its pool's compiler cache server.
func jobEgressPolicy(namespace string) networkingv1.NetworkPolicy {
	return networkPolicy(namespace, JobEgressPolicy,
		k8smeta.LabelSelector{MatchLabels: map[string]string{wellknown.RunnerRoleLabel: wellknown.RunnerRoleJob}},
		[]networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		[]networkingv1.NetworkPolicyEgressRule{dnsEgress(), internetEgress(privateRanges), compilerCacheEgress()})
}

// Strict network policy mode (infra: the VPC CNI's NETWORK_POLICY_ENFORCING_MODE): a pod that
// no NetworkPolicy selects is denied everything, from the moment it starts until one does
// (amazon-vpc-cni-k8s README, NETWORK_POLICY_ENFORCING_MODE; aws-network-policy-agent
// pkg/rpc/rpc_handler.go EnforceNpToPod). So every namespace the stack runs pods in has
// policies before its pods: the ones that run a job's code or hold a credential deny all and
// allow what each role needs; kube-system (CoreDNS, Karpenter) and the device plugin's keep
// the network they had (AllowAll). A selected pod still answers its node's kubelet probes (the
// agent allows the node's own address: aws-network-policy-agent PR #65).

// AllowAllPolicy names AllowAll's policy.
const AllowAllPolicy = "allow-all"

// AllowAll lets every pod of namespace connect anywhere and be reached from anywhere: what a
// namespace without policies has in standard mode.
func AllowAll(namespace string) networkingv1.NetworkPolicy {
	np := networkPolicy(namespace, AllowAllPolicy, k8smeta.LabelSelector{},
		[]networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, []networkingv1.NetworkPolicyEgressRule{{}})
	np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
	return np
}

// ControllerEgressPolicy names the egress of arc-systems' and the retrier's pods.
const ControllerEgressPolicy = "controller-egress"

// controllerEgress is what a controller of the stack's own reaches: DNS, public addresses
// (GitHub's API and broker, on 443), and the API server's private endpoint and ClusterIP.
func controllerEgress(namespace string) networkingv1.NetworkPolicy {
	return networkPolicy(namespace, ControllerEgressPolicy, k8smeta.LabelSelector{}, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		[]networkingv1.NetworkPolicyEgressRule{dnsEgress(), internetEgress(privateRanges), tcpEgress(clusterRanges, apiServerPort)})
}

// ARCMetricsPolicy names the policy that lets a scraper in the cluster read ARC's metrics.
const ARCMetricsPolicy = "arc-metrics"

// ARCSystemsNetworkPolicies are ARC's namespace's (the controller and the listeners, which
// hold copies of the GitHub credential): everything denied; out to DNS, GitHub and the API
// server; in only to the metrics port (ControllerValues), from the cluster's addresses (a job's
// pod reaches none of them: its egress excludes them).
func ARCSystemsNetworkPolicies() []networkingv1.NetworkPolicy {
	ns := wellknown.ARCNamespace
	tcp, port := corev1.ProtocolTCP, intstr.FromInt32(wellknown.ARCMetricsPort)
	metrics := networkPolicy(ns, ARCMetricsPolicy, k8smeta.LabelSelector{}, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, nil)
	var from []networkingv1.NetworkPolicyPeer
	for _, c := range clusterRanges {
		from = append(from, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	metrics.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: from, Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}
	return []networkingv1.NetworkPolicy{DenyAll(ns), controllerEgress(ns), metrics}
}

// RetrierNetworkPolicies are the in-cluster retrier's namespace's (its token may re-run jobs):
// everything denied; out to DNS, GitHub, S3 (its stored gpuci) and the API server, and to the
// Pod Identity agent (the credentials that read the stored gpuci).
func RetrierNetworkPolicies() []networkingv1.NetworkPolicy {
	egress := controllerEgress(wellknown.RetrierNamespace)
	egress.Spec.Egress = append(egress.Spec.Egress, podIdentityAgentEgress())
	return []networkingv1.NetworkPolicy{DenyAll(wellknown.RetrierNamespace), egress}
}

// DenyAll denies every pod of namespace every connection, in and out.
func DenyAll(namespace string) networkingv1.NetworkPolicy {
	return networkPolicy(namespace, DenyAllPolicy, k8smeta.LabelSelector{}, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, nil)
}

func networkPolicy(namespace, name string, selector k8smeta.LabelSelector, types []networkingv1.PolicyType, egress []networkingv1.NetworkPolicyEgressRule) networkingv1.NetworkPolicy {
	return networkingv1.NetworkPolicy{
		TypeMeta:   k8smeta.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: k8smeta.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: selector, PolicyTypes: types, Egress: egress},
	}
}

// dnsEgress reaches the cluster's DNS (CoreDNS, as EKS's add-on labels it) on port 53.
func dnsEgress() networkingv1.NetworkPolicyEgressRule {
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	port := intstr.FromInt32(53)
	return networkingv1.NetworkPolicyEgressRule{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &k8smeta.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
			PodSelector:       &k8smeta.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
		}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &port}, {Protocol: &tcp, Port: &port}},
	}
}

// tcpEgress reaches port on the addresses of cidrs.
func tcpEgress(cidrs []string, port int32) networkingv1.NetworkPolicyEgressRule {
	tcp, p := corev1.ProtocolTCP, intstr.FromInt32(port)
	var to []networkingv1.NetworkPolicyPeer
	for _, c := range cidrs {
		to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	return networkingv1.NetworkPolicyEgressRule{To: to, Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}}}
}

// internetEgress reaches every IPv4 address but those in except.
func internetEgress(except []string) networkingv1.NetworkPolicyEgressRule {
	return networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{
		IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: except},
	}}}
}
