// Package config reads a stack's configuration once, fills in defaults and validates it
// before the program registers any resource. Every error names the config key and says
// how to fix it, and all problems are reported together.
//
// The keys, their types and defaults are also declared in Pulumi.yaml's `config:` block;
// a unit test keeps the two in step.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/versions"
)

// Project is the Pulumi project name and so the namespace of every key below.
const Project = "lux-gpu-ci"

// The project's config keys, without the "lux-gpu-ci:" namespace.
const (
	KeyClusterName                 = "clusterName"
	KeyKubernetesVersion           = "kubernetesVersion"
	KeyVpcCidr                     = "vpcCidr"
	KeyAzCount                     = "azCount"
	KeyNatMode                     = "natMode"
	KeySystemNodeInstanceType      = "systemNodeInstanceType"
	KeySystemNodeCount             = "systemNodeCount"
	KeyPublicAccessCidrs           = "publicAccessCidrs"
	KeyAdminPrincipals             = "adminPrincipals"
	KeyTags                        = "tags"
	KeyAddonVersions               = "addonVersions"
	KeyBudget                      = "budget"
	KeyCreateSpotServiceLinkedRole = "createSpotServiceLinkedRole"
	KeyGPUPools                    = "gpuPools"
	KeyGitHubOrg                   = "githubOrg"
	KeyGitHubToken                 = "githubToken"
	KeyGitHubAppID                 = "githubAppId"
	KeyGitHubAppInstallationID     = "githubAppInstallationId"
	KeyGitHubAppPrivateKey         = "githubAppPrivateKey"
	KeyHelmSkipAwait               = "helmSkipAwait"
	KeyHelmCharts                  = "helmCharts"

	// KeyRegion is the AWS provider's own key; it is read, not declared by this project.
	KeyRegion = "aws:region"
)

// NAT modes.
const (
	// NatSingle puts nodes in private subnets behind one NAT gateway (one AZ's NAT: the
	// cheap choice; a NAT outage cuts egress for every AZ).
	NatSingle = "single"
	// NatNone is the lean profile: no NAT gateway and no private subnets; nodes sit in public
	// subnets with a public IP and a security group that admits nothing from outside.
	NatNone = "none"
)

// MaxAZs is the most availability zones the network spreads across.
const MaxAZs = 3

// budgetExample and helmChartsExample are the fixes shown for bad values of those keys.
const (
	budgetExample     = `{"monthlyUsd": 250, "emails": ["you@example.com"]}`
	helmChartsExample = `{"karpenter": {"chart": "oci://123456789012.dkr.ecr.us-west-2.amazonaws.com/karpenter/karpenter", "version": "1.14.1"}}`
)

// Addons are the EKS managed add-ons the cluster runs, in the order they are listed in docs.
var Addons = []string{"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"}

// Config is the validated stack configuration.
type Config struct {
	Region            string
	ClusterName       string
	KubernetesVersion string
	Network           Network
	SystemNodes       SystemNodes
	// PublicAccessCIDRs may reach the EKS API endpoint.
	PublicAccessCIDRs []string
	// AdminPrincipals are IAM role/user ARNs given cluster-admin access entries, besides
	// the identity that runs `pulumi up` (EKS makes that one admin itself).
	AdminPrincipals []string
	// Tags go on every AWS resource that takes tags.
	Tags map[string]string
	// AddonVersions pins EKS add-on versions by add-on name; an add-on not listed gets the
	// default version EKS publishes for the cluster's Kubernetes version.
	AddonVersions map[string]string
	// Budget is nil unless the budget guard is configured.
	Budget                      *Budget
	CreateSpotServiceLinkedRole bool

	// GPUPools are the kinds of GPU runner; each is a NodePool, an EC2NodeClass and a runner
	// scale set.
	GPUPools []GPUPool
	GitHub   GitHub
	// HelmSkipAwait installs Helm releases without waiting for their workloads to become
	// ready. Off for real clusters; on where no kubelet runs (the e2e API server).
	HelmSkipAwait bool
	// HelmCharts overrides where charts come from, by chart name (a mirror registry, or a
	// local directory); a chart not listed comes from versions.
	HelmCharts map[string]versions.Chart
}

// Network is the VPC layout.
type Network struct {
	CIDR    string
	AZCount int
	NatMode string
}

// SystemNodes is the always-on managed node group that runs Karpenter, CoreDNS and ARC.
type SystemNodes struct {
	InstanceType string
	Count        int
}

// Budget is the opt-in AWS Budgets guard: e-mail when actual spend passes 80% of the monthly
// limit, and when forecast spend passes 100%.
type Budget struct {
	MonthlyUSD float64  `json:"monthlyUsd"`
	Emails     []string `json:"emails"`
}

// Defaults are the values a key takes when the stack does not set it. Pulumi.yaml declares
// the same defaults (checked by a test), and the engine hands them to the program: a key
// Pulumi.yaml declares without a default is one the engine requires. So every optional key
// has a default here that means "off": "" for the credentials a stack may leave unset, {}
// for the budget.
var Defaults = map[string]any{
	KeyClusterName:                 "lux-gpu-ci",
	KeyKubernetesVersion:           versions.KubernetesDefault,
	KeyVpcCidr:                     "10.0.0.0/16",
	KeyAzCount:                     2,
	KeyNatMode:                     NatSingle,
	KeySystemNodeInstanceType:      "t3.medium",
	KeySystemNodeCount:             1,
	KeyPublicAccessCidrs:           []string{"0.0.0.0/0"},
	KeyAdminPrincipals:             []string{},
	KeyTags:                        map[string]string{},
	KeyAddonVersions:               map[string]string{},
	KeyCreateSpotServiceLinkedRole: false,
	KeyGPUPools:                    []GPUPool{DefaultPool()},
	KeyHelmSkipAwait:               false,
	KeyHelmCharts:                  map[string]versions.Chart{},
	KeyBudget:                      map[string]any{},
	KeyGitHubToken:                 "",
	KeyGitHubAppID:                 "",
	KeyGitHubAppInstallationID:     "",
	KeyGitHubAppPrivateKey:         "",
}

// Required are the keys a stack must set: Pulumi.yaml declares them without a default, so the
// engine refuses a stack without them before the program runs.
var Required = []string{KeyGitHubOrg}

// Getter returns a raw config value and whether it is set. Keys are fully qualified
// ("lux-gpu-ci:azCount", "aws:region").
type Getter func(key string) (string, bool)

// Load reads the stack's configuration from the Pulumi context and validates it.
func Load(ctx *pulumi.Context) (*Config, error) {
	return Parse(ctx.GetConfig, ctx.IsConfigSecret)
}

// Parse builds a Config from raw values, applying defaults. isSecret tells whether a key is
// stored as a Pulumi secret (nil: do not check). It returns every problem it finds,
// joined, so one run shows them all; no message ever contains a secret's value.
func Parse(get Getter, isSecret func(key string) bool) (*Config, error) {
	p := &parser{get: get, isSecret: isSecret}
	c := &Config{
		Region:            p.region(),
		ClusterName:       p.str(KeyClusterName),
		KubernetesVersion: p.str(KeyKubernetesVersion),
		Network: Network{
			CIDR:    p.str(KeyVpcCidr),
			AZCount: p.integer(KeyAzCount),
			NatMode: p.str(KeyNatMode),
		},
		SystemNodes: SystemNodes{
			InstanceType: p.str(KeySystemNodeInstanceType),
			Count:        p.integer(KeySystemNodeCount),
		},
		CreateSpotServiceLinkedRole: p.boolean(KeyCreateSpotServiceLinkedRole),
		HelmSkipAwait:               p.boolean(KeyHelmSkipAwait),
	}
	c.GPUPools = p.parsePools()
	c.GitHub = p.parseGitHub()
	p.object(KeyPublicAccessCidrs, &c.PublicAccessCIDRs)
	p.object(KeyAdminPrincipals, &c.AdminPrincipals)
	p.object(KeyTags, &c.Tags)
	p.object(KeyAddonVersions, &c.AddonVersions)
	p.object(KeyHelmCharts, &c.HelmCharts)
	// The budget guard is off unless configured: the default {} (or an unset key) is off.
	var budget Budget
	p.object(KeyBudget, &budget)
	if budget.MonthlyUSD != 0 || len(budget.Emails) > 0 {
		c.Budget = &budget
	}
	if len(p.errs) == 0 {
		c.validate(p)
		c.validatePools(p)
	}
	if len(p.errs) > 0 {
		return nil, fmt.Errorf("invalid stack configuration:\n  %w", errors.Join(p.errs...))
	}
	return c, nil
}

var (
	regionRE       = regexp.MustCompile(`^[a-z]{2}(-gov)?-[a-z]+-[0-9]$`)
	clusterNameRE  = regexp.MustCompile(`^[a-z][a-z0-9-]*[a-z0-9]$`)
	k8sVersionRE   = regexp.MustCompile(`^1\.([0-9]+)$`)
	instanceTypeRE = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9]+$`)
	iamPrincipalRE = regexp.MustCompile(`^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:(role|user)/[\w+=,.@/-]+$`)
	emailRE        = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)
)

// MaxClusterNameLen keeps derived physical names within AWS limits: the longest is the IAM
// role "KarpenterController-<cluster>" (64 characters at most) and the policy names.
const MaxClusterNameLen = 40

func (c *Config) validate(p *parser) {
	switch {
	case len(c.ClusterName) > MaxClusterNameLen:
		p.fail(KeyClusterName, fmt.Sprintf("%q is %d characters; at most %d fit the IAM role names derived from it", c.ClusterName, len(c.ClusterName), MaxClusterNameLen), "a shorter name, e.g. lux-gpu-ci-dev")
	case !clusterNameRE.MatchString(c.ClusterName):
		p.fail(KeyClusterName, fmt.Sprintf("%q must be lower-case letters, digits and '-', starting with a letter", c.ClusterName), "e.g. lux-gpu-ci-dev")
	}

	if m := k8sVersionRE.FindStringSubmatch(c.KubernetesVersion); m == nil {
		p.fail(KeyKubernetesVersion, fmt.Sprintf("%q is not a Kubernetes minor version like %q", c.KubernetesVersion, versions.KubernetesDefault), versions.KubernetesDefault)
	} else if minor, _ := strconv.Atoi(m[1]); minor < versions.KubernetesMin || minor > versions.KubernetesMax {
		p.fail(KeyKubernetesVersion, fmt.Sprintf("%s is outside 1.%d–1.%d, the versions EKS and Karpenter 1.14 both support", c.KubernetesVersion, versions.KubernetesMin, versions.KubernetesMax), versions.KubernetesDefault)
	}

	c.validateNetwork(p)

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
			p.fail(KeyPublicAccessCidrs, fmt.Sprintf("entry %d (%q) is not an IPv4 CIDR without host bits", i, s), "e.g. 203.0.113.0/24")
		}
	}
	for i, s := range c.AdminPrincipals {
		if !iamPrincipalRE.MatchString(s) {
			p.fail(KeyAdminPrincipals, fmt.Sprintf("entry %d (%q) is not an IAM role or user ARN", i, s), "e.g. arn:aws:iam::123456789012:role/platform-admins")
		}
	}
	if dup := firstDuplicate(c.AdminPrincipals); dup != "" {
		p.fail(KeyAdminPrincipals, fmt.Sprintf("%q is listed twice", dup), "list each principal once")
	}
	for _, k := range slices.Sorted(maps.Keys(c.Tags)) {
		switch v := c.Tags[k]; {
		case k == "" || len(k) > 128 || len(v) > 256:
			p.fail(KeyTags, fmt.Sprintf("tag %q: keys must be 1–128 characters and values at most 256", k), "shorten the tag")
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			p.fail(KeyTags, fmt.Sprintf("tag %q uses the reserved aws: prefix", k), "rename the tag")
		case hasAnyPrefix(k, "kubernetes.io/", "karpenter.sh/", "karpenter.k8s.aws/", "eks:"):
			p.fail(KeyTags, fmt.Sprintf("tag %q is in a namespace EKS or Karpenter manage (Karpenter's EC2NodeClass rejects it)", k), `{"team": "platform"}`)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.AddonVersions)) {
		if !slices.Contains(Addons, name) {
			p.fail(KeyAddonVersions, fmt.Sprintf("%q is not an add-on this stack manages (%s)", name, strings.Join(Addons, ", ")), "remove it or fix the spelling")
		} else if !strings.HasPrefix(c.AddonVersions[name], "v") {
			p.fail(KeyAddonVersions, fmt.Sprintf("%s: %q is not an EKS add-on version like v1.19.0-eksbuild.1", name, c.AddonVersions[name]), "copy one from `aws eks describe-addon-versions --addon-name "+name+"`")
		}
	}
	c.validateHelmCharts(p)
	if b := c.Budget; b != nil {
		if b.MonthlyUSD <= 0 {
			p.fail(KeyBudget, fmt.Sprintf("monthlyUsd must be a positive amount, got %v", b.MonthlyUSD), budgetExample)
		}
		if len(b.Emails) == 0 {
			p.fail(KeyBudget, "emails is empty, so nobody would hear of an overrun", budgetExample)
		}
		for _, e := range b.Emails {
			if !emailRE.MatchString(e) {
				p.fail(KeyBudget, fmt.Sprintf("%q is not an e-mail address", e), "fix the address")
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
		p.fail(KeyNatMode, fmt.Sprintf("%q is not %q or %q", n.NatMode, NatSingle, NatNone), NatSingle)
	}
}

// parser reads raw values, recording a precise error for each one it cannot use.
type parser struct {
	get      Getter
	isSecret func(key string) bool
	errs     []error
}

func qualify(key string) string { return Project + ":" + key }

// structured keys hold lists or objects; they are edited in the stack file rather than
// with a one-line `pulumi config set`.
var structured = map[string]bool{
	KeyPublicAccessCidrs: true, KeyAdminPrincipals: true, KeyTags: true, KeyAddonVersions: true, KeyBudget: true, KeyGPUPools: true,
}

// credentials are set with `pulumi config set --secret`.
var credentials = map[string]bool{KeyGitHubToken: true, KeyGitHubAppPrivateKey: true}

// fail records an error for key (an unqualified project key, or "aws:region") with the
// value that fixes it.
func (p *parser) fail(key, problem, fix string) {
	short := key
	how := fmt.Sprintf("pulumi config set %s %s", short, shellQuote(fix))
	switch {
	case structured[short]:
		how = fmt.Sprintf("set %s in Pulumi.<stack>.yaml, e.g. %s", qualify(short), fix)
	case credentials[short]:
		how = fmt.Sprintf("pulumi config set --secret %s %s", short, fix)
	}
	p.failHow(key, problem, how)
}

// failHow records an error for key with a complete fix instruction.
func (p *parser) failHow(key, problem, how string) {
	if !strings.Contains(key, ":") {
		key = qualify(key)
	}
	p.errs = append(p.errs, fmt.Errorf("%s: %s (fix: %s)", key, problem, how))
}

func (p *parser) raw(key string) (string, bool) {
	v, ok := p.get(qualify(key))
	return v, ok
}

func (p *parser) region() string {
	r, ok := p.get(KeyRegion)
	switch {
	case !ok || r == "":
		p.fail(KeyRegion, "is not set; the stack needs to know which region to build in", "us-west-2")
	case !regionRE.MatchString(r):
		p.fail(KeyRegion, fmt.Sprintf("%q is not an AWS region name", r), "us-west-2")
	}
	return r
}

func (p *parser) str(key string) string {
	if v, ok := p.raw(key); ok {
		return v
	}
	return Defaults[key].(string)
}

func (p *parser) integer(key string) int {
	v, ok := p.raw(key)
	if !ok {
		return Defaults[key].(int)
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		p.fail(key, fmt.Sprintf("%q is not a whole number", v), fmt.Sprint(Defaults[key]))
	}
	return n
}

func (p *parser) boolean(key string) bool {
	v, ok := p.raw(key)
	if !ok {
		return Defaults[key].(bool)
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(key, fmt.Sprintf("%q is not true or false", v), "true")
	}
	return b
}

// object decodes a structured (JSON) value into out, rejecting unknown fields so a
// misspelt field is an error rather than a silently ignored setting.
func (p *parser) object(key string, out any) {
	v, ok := p.raw(key)
	if !ok {
		def, _ := json.Marshal(Defaults[key])
		v = string(def)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		examples := map[string]string{KeyBudget: budgetExample, KeyHelmCharts: helmChartsExample}
		example, ok := examples[key]
		if !ok {
			b, _ := json.Marshal(Defaults[key])
			example = string(b)
		}
		p.fail(key, fmt.Sprintf("cannot be read: %v", err), example)
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

func firstDuplicate(xs []string) string {
	seen := map[string]bool{}
	for _, x := range xs {
		if seen[x] {
			return x
		}
		seen[x] = true
	}
	return ""
}

func shellQuote(s string) string {
	if strings.ContainsAny(s, " \"'{}[]$`\\|&;<>()*?!#") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}
