package config

import (
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/luxfi/lux-gpu-ci/versions"
)

var (
	regionRE       = regexp.MustCompile(`^[a-z]{2}(-gov)?-[a-z]+-[0-9]$`)
	clusterNameRE  = regexp.MustCompile(`^[a-z][a-z0-9-]*[a-z0-9]$`)
	k8sVersionRE   = regexp.MustCompile(`^1\.([0-9]+)$`)
	instanceTypeRE = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9]+$`)
	iamRoleRE      = regexp.MustCompile(`^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:role/[\w+=,.@/-]+$`)
	iamPrincipalRE = regexp.MustCompile(`^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:(role|user)/[\w+=,.@/-]+$`)
	emailRE        = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)
)

// MaxClusterNameLen keeps derived physical names within AWS limits: the longest are the IAM
// role "<cluster>-karpenter-node" (64 characters at most) and the policy names.
const MaxClusterNameLen = 40

// MaxCacheClusterNameLen is the longest cluster name a stack with a compiler cache may have.
const MaxCacheClusterNameLen = 37 - len("--ccache-")

func (c *Config) validate(p *parser) {
	switch {
	case len(c.ClusterName) > MaxClusterNameLen:
		p.failHow(KeyClusterName, fmt.Sprintf("%q is %d characters; at most %d fit the IAM role names derived from it", c.ClusterName, len(c.ClusterName), MaxClusterNameLen),
			"a shorter name (pulumi config set clusterName lux-gpu-ci-dev), or none: pulumi config rm clusterName, and it is lux-gpu-ci-<stack>")
	case !clusterNameRE.MatchString(c.ClusterName):
		p.fail(KeyClusterName, fmt.Sprintf("%q must be lower-case letters, digits and '-', starting with a letter", c.ClusterName), "lux-gpu-ci-dev")
	case strings.Contains(c.ClusterName, "--"):
		// The image cache's ECR repository prefixes start with the name (RepositoryPrefix),
		// and ECR's pattern allows no two separators in a row: the up would fail half-way.
		p.fail(KeyClusterName, fmt.Sprintf("%q has two '-' in a row, which ECR refuses in the image cache's repository names", c.ClusterName), strings.Join(strings.FieldsFunc(c.ClusterName, func(r rune) bool { return r == '-' }), "-"))
	}

	// The compiler cache bucket's name starts with the cluster's (infra.CompilerCacheBucketPrefix:
	// "<cluster>--ccache-"), and S3 takes a 37-character prefix at most.
	if n := len(c.ClusterName); n > MaxCacheClusterNameLen && len(c.CompilerCaches()) > 0 {
		p.fail(KeyClusterName, fmt.Sprintf("%q is %d characters; with a compiler cache at most %d leave room for its bucket's name (<cluster>--ccache-, S3's prefix is 37 at most)", c.ClusterName, n, MaxCacheClusterNameLen),
			"a shorter name (pulumi config set clusterName lux-gpu-ci-dev), or compilerCache: none on every pool in Pulumi.<stack>.yaml")
	}

	if minor := c.KubernetesMinor(); minor == 0 {
		p.fail(KeyKubernetesVersion, fmt.Sprintf("%q is not a Kubernetes minor version like %q", c.KubernetesVersion, versions.KubernetesDefault), versions.KubernetesDefault)
	} else if minor < versions.KubernetesMin || minor > versions.KubernetesMax {
		p.fail(KeyKubernetesVersion, fmt.Sprintf("%s is outside 1.%d–1.%d, the versions EKS and Karpenter %s both support", c.KubernetesVersion, versions.KubernetesMin, versions.KubernetesMax, versions.KarpenterChart.Version), versions.KubernetesDefault)
	}

	c.validateNetwork(p)

	if r := c.AWS.AssumeRoleArn; r != "" && !iamRoleRE.MatchString(r) {
		p.failHow(KeyAssumeRole, fmt.Sprintf("roleArn %q is not an IAM role ARN", r), `set aws:assumeRole in Pulumi.<stack>.yaml, e.g. {"roleArn": "arn:aws:iam::123456789012:role/deployer"}`)
	}

	if !instanceTypeRE.MatchString(c.SystemNodes.InstanceType) {
		p.fail(KeySystemNodeInstanceType, fmt.Sprintf("%q is not an EC2 instance type like t3.medium", c.SystemNodes.InstanceType), "t3.medium")
	}
	if c.SystemNodes.Count < 1 || c.SystemNodes.Count > 10 {
		p.fail(KeySystemNodeCount, fmt.Sprintf("must be 1–10, got %d: Karpenter, CoreDNS and ARC need at least one always-on node", c.SystemNodes.Count), "1")
	}

	if len(c.PublicAccessCIDRs) == 0 {
		p.fail(KeyPublicAccessCidrs, "is empty, so nobody (including `pulumi up`) could reach the EKS API", `["203.0.113.0/24"] (your office or CI egress range)`)
	}
	for i, s := range c.PublicAccessCIDRs {
		if pfx, err := netip.ParsePrefix(s); err != nil || !pfx.Addr().Is4() || pfx.Masked() != pfx {
			p.fail(KeyPublicAccessCidrs, fmt.Sprintf("entry %d (%q) is not an IPv4 CIDR without host bits", i, s), `["203.0.113.0/24"]`)
		}
	}
	for i, s := range c.AdminPrincipals {
		if !iamPrincipalRE.MatchString(s) {
			p.fail(KeyAdminPrincipals, fmt.Sprintf("entry %d (%q) is not an IAM role or user ARN", i, s), `["arn:aws:iam::123456789012:role/platform-admins"]`)
		}
	}
	if dup := firstDuplicate(c.AdminPrincipals); dup != "" {
		p.failHow(KeyAdminPrincipals, fmt.Sprintf("%q is listed twice", dup), "list each principal once in Pulumi.<stack>.yaml's "+qualify(KeyAdminPrincipals))
	}
	for _, k := range []string{KeyDeployRoleArn, KeyPreviewRoleArn} {
		arn := map[string]string{KeyDeployRoleArn: c.DeployRoleArn, KeyPreviewRoleArn: c.PreviewRoleArn}[k]
		switch {
		case arn == "":
		case !iamRoleRE.MatchString(arn):
			p.failHow(k, fmt.Sprintf("%q is not an IAM role ARN", arn), "pulumi config set "+k+" <the role's ARN>, from the identity stack's outputs: pulumi -C identity stack output --json (deployRoles.<stack>, previewRole)")
		case slices.Contains(c.AdminPrincipals, arn):
			// Two access entries for one principal: EKS refuses the second.
			p.failHow(k, fmt.Sprintf("%q is in adminPrincipals too", arn), "remove it from "+qualify(KeyAdminPrincipals)+" in Pulumi.<stack>.yaml")
		}
	}
	if c.DeployRoleArn != "" && c.DeployRoleArn == c.PreviewRoleArn {
		p.failHow(KeyPreviewRoleArn, "is the deploy role: a preview reads, it never deploys", "pulumi config set "+KeyPreviewRoleArn+" <the identity stack's previewRole output: pulumi -C identity stack output previewRole>")
	}
	for _, k := range slices.Sorted(maps.Keys(c.Tags)) {
		switch v := c.Tags[k]; {
		case k == "" || len(k) > 128 || len(v) > 256:
			p.failHow(KeyTags, fmt.Sprintf("tag %q: keys must be 1–128 characters and values at most 256", k), "shorten it in Pulumi.<stack>.yaml's "+qualify(KeyTags))
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			p.failHow(KeyTags, fmt.Sprintf("tag %q uses the reserved aws: prefix", k), "rename it in Pulumi.<stack>.yaml's "+qualify(KeyTags))
		case hasAnyPrefix(k, "kubernetes.io/", "karpenter.sh/", "karpenter.k8s.aws/", "eks:"):
			p.fail(KeyTags, fmt.Sprintf("tag %q is in a namespace EKS or Karpenter manage (Karpenter's EC2NodeClass rejects it)", k), `{"team": "platform"}`)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.AddonVersions)) {
		if !slices.Contains(Addons, name) {
			p.failHow(KeyAddonVersions, fmt.Sprintf("%q is not an add-on this stack manages (%s)", name, strings.Join(Addons, ", ")), "remove it from Pulumi.<stack>.yaml's "+qualify(KeyAddonVersions)+", or fix its spelling")
		} else if !strings.HasPrefix(c.AddonVersions[name], "v") {
			p.failHow(KeyAddonVersions, fmt.Sprintf("%s: %q is not an EKS add-on version like v1.19.0-eksbuild.1", name, c.AddonVersions[name]), "set "+name+" in Pulumi.<stack>.yaml's "+qualify(KeyAddonVersions)+" to one of `aws eks describe-addon-versions --addon-name "+name+"`")
		}
	}
	c.validateHelmCharts(p)
	c.validateARCVersions(p)
	if b := c.Budget; b != nil {
		if b.MonthlyUSD <= 0 {
			p.fail(KeyBudget, fmt.Sprintf("monthlyUsd must be a positive amount, got %v", b.MonthlyUSD), budgetExample)
		}
		if len(b.Emails) == 0 {
			p.fail(KeyBudget, "emails is empty, so nobody would hear of an overrun", budgetExample)
		}
		for _, e := range b.Emails {
			if !emailRE.MatchString(e) {
				p.failHow(KeyBudget, fmt.Sprintf("%q is not an e-mail address", e), "correct it in emails of Pulumi.<stack>.yaml's "+qualify(KeyBudget))
			}
		}
	}
}

// validateHelmCharts checks the chart overrides: each names a chart the stack installs, and a
// chart from a registry is pinned to a version (a local directory is what it is).
func (c *Config) validateHelmCharts(p *parser) {
	for _, name := range slices.Sorted(maps.Keys(c.HelmCharts)) {
		o := c.HelmCharts[name]
		_, known := versions.ChartNamed(name)
		remote := o.Repo != "" || strings.Contains(o.Chart, "://")
		switch {
		case !known:
			p.fail(KeyHelmCharts, fmt.Sprintf("%q is not a chart this stack installs (%s)", name, strings.Join(versions.ChartNames(), ", ")), helmChartsExample)
		case o.Chart == "":
			p.fail(KeyHelmCharts, fmt.Sprintf("%s: chart is empty", name), helmChartsExample)
		case remote && o.Version == "":
			p.fail(KeyHelmCharts, fmt.Sprintf("%s: %s is not pinned to a version", name, o.Chart), helmChartsExample)
		case !remote && !filepath.IsAbs(o.Chart):
			p.fail(KeyHelmCharts, fmt.Sprintf("%s: %q is neither a chart in a registry (oci:// or with repo) nor an absolute directory", name, o.Chart), helmChartsExample)
		case name == versions.ARCControllerChart.Name() && remote && o.Version != versions.ARCControllerChart.Version:
			// The program declares ARC's CRDs from its copy of the pinned chart (k8s/arc).
			p.fail(KeyHelmCharts, fmt.Sprintf("%s: version %s, but the program holds ARC's CRDs of %s only; mirror %s, or give a local chart directory (its crds/ are used)", name, o.Version, versions.ARCControllerChart.Version, versions.ARCControllerChart.Version), helmChartsExample)
		}
	}
}

func (c *Config) validateNetwork(p *parser) {
	n := c.Network
	switch pfx, err := netip.ParsePrefix(n.CIDR); {
	case err != nil || !pfx.Addr().Is4():
		p.fail(KeyVpcCidr, fmt.Sprintf("%q is not an IPv4 CIDR", n.CIDR), "10.0.0.0/16")
	case pfx.Masked() != pfx:
		p.fail(KeyVpcCidr, fmt.Sprintf("%q has host bits set", n.CIDR), pfx.Masked().String())
	case !pfx.Addr().IsPrivate():
		p.fail(KeyVpcCidr, fmt.Sprintf("%q is not in a private (RFC 1918) range", n.CIDR), "10.0.0.0/16")
	case pfx.Bits() < 16 || pfx.Bits() > 20:
		p.fail(KeyVpcCidr, fmt.Sprintf("%q must be a /16 to /20: AWS allows at most /16, and pods take VPC addresses so smaller VPCs run out", n.CIDR), "10.0.0.0/16")
	}
	if n.AZCount < 2 || n.AZCount > MaxAZs {
		p.fail(KeyAzCount, fmt.Sprintf("must be 2 or 3, got %d: EKS needs subnets in at least two AZs", n.AZCount), "2")
	}
	if n.NatMode != NatSingle && n.NatMode != NatNone {
		p.fail(KeyNatMode, fmt.Sprintf("%q is not %q or %q", n.NatMode, NatSingle, NatNone), string(NatSingle))
	}
	if m := n.NetworkPolicyMode; m != NetworkPoliciesStrict && m != NetworkPoliciesStandard {
		p.fail(KeyNetworkPolicyMode, fmt.Sprintf("%q is not %q (a pod is denied everything until its policies are in place) or %q", m, NetworkPoliciesStrict, NetworkPoliciesStandard), string(NetworkPoliciesStrict))
	}
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func firstDuplicate[S ~string](xs []S) S {
	seen := map[S]bool{}
	for _, x := range xs {
		if seen[x] {
			return x
		}
		seen[x] = true
	}
	return ""
}

// APIAdmits tells whether the EKS API endpoint admits a client at addr (publicAccessCidrs),
// and if not, the error that says which key to change. deploy.yml asks it for the runner it
// runs on: the AWS layer would update, then every Kubernetes step fail.
func (c *Config) APIAdmits(addr netip.Addr) error {
	for _, s := range c.PublicAccessCIDRs {
		if pfx, err := netip.ParsePrefix(s); err == nil && pfx.Contains(addr) {
			return nil
		}
	}
	return fmt.Errorf("%s: %v does not admit %s, so `pulumi up` from there would update the AWS layer and then fail every Kubernetes step "+
		"(fix: add %s/32, or the runner's egress range, to publicAccessCidrs in Pulumi.%s.yaml, or deploy from a runner inside %v)",
		qualify(KeyPublicAccessCidrs), c.PublicAccessCIDRs, addr, addr, c.Stack, c.PublicAccessCIDRs)
}

// maxRunnerDrain keeps a drain inside deploy.yml's job (timeout-minutes 360, GitHub's limit
// for a hosted job), with an hour left for the rest of the up.
const maxRunnerDrain = 5 * time.Hour

// drainTimeout reads runnerDrainTimeout: a Go duration from 1s to 5h.
func (p *parser) drainTimeout() time.Duration {
	v := p.str(KeyRunnerDrainTimeout)
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		p.fail(KeyRunnerDrainTimeout, fmt.Sprintf("%q is not a duration", v), "1h")
	case d < time.Second || d > maxRunnerDrain:
		p.fail(KeyRunnerDrainTimeout, fmt.Sprintf("%s is outside 1s..5h: removing a scale set waits this long for its running jobs, inside deploy.yml's six-hour job", v), "1h")
	}
	return d
}

// validateRetryRunner: the retry runner's scale set is named like a pool's and names a scale
// set of its own, and it registers in a runner group of its own: its account reads the
// cluster's events, so a job from any repository the Default group admits must not land there.
func (c *Config) validateRetryRunner(p *parser) {
	r := c.RetryRunner
	if r.ScaleSetName == "" {
		if r.RunnerGroup != "" {
			p.failHow(KeyRetryRunnerGroup, fmt.Sprintf("%q is set, but retryScaleSetName is not, so there is no retry runner to put in it", r.RunnerGroup), "pulumi config rm "+KeyRetryRunnerGroup+", or set "+KeyRetryScaleSetName)
		}
		return
	}
	if len(r.ScaleSetName) > 45 || !dnsLabelRE.MatchString(r.ScaleSetName) {
		p.fail(KeyRetryScaleSetName, fmt.Sprintf("%q must be lower-case letters, digits and '-', at most 45 characters (ARC's limit)", r.ScaleSetName), "lux-gpu-retry")
		return
	}
	for _, pool := range c.Pools() {
		if pool.RunnerScaleSetName == r.ScaleSetName {
			p.fail(KeyRetryScaleSetName, fmt.Sprintf("%q is pool %s's scale set: a retry job would take a GPU runner, and a GPU job the retry runner", r.ScaleSetName, pool.Name), "lux-gpu-retry")
		}
	}
	const howToGroup = "create a runner group in the organization's Actions settings, limited to the repositories whose retry workflow runs there " +
		"(and to that workflow, where the plan allows: docs/operations.md), then pulumi config set " + KeyRetryRunnerGroup + " <group>"
	switch g := r.RunnerGroup; {
	case g == "":
		p.failHow(KeyRetryRunnerGroup, fmt.Sprintf("is not set, so the retry runner %s would register in the Default runner group, where any repository's job may run with its account, which reads the cluster's events", r.ScaleSetName), howToGroup)
	case strings.EqualFold(g, DefaultRunnerGroup):
		p.failHow(KeyRetryRunnerGroup, fmt.Sprintf("%q is the Default runner group, which admits every repository's jobs", g), howToGroup)
	case !validRunnerGroup(g):
		p.fail(KeyRetryRunnerGroup, fmt.Sprintf("%q must be a runner group's name as GitHub shows it (no surrounding spaces, at most 100 characters)", g), "lux-gpu-retry")
	}
}

// KubernetesMinor is KubernetesVersion's minor version (35 for "1.35"), or 0 if it is not of
// that form (which validate refuses).
func (c *Config) KubernetesMinor() int {
	m := k8sVersionRE.FindStringSubmatch(c.KubernetesVersion)
	if m == nil {
		return 0
	}
	minor, _ := strconv.Atoi(m[1])
	return minor
}
