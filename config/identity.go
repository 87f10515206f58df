package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// The deploy identity (identity/, a Pulumi project of its own): the IAM identities GitHub
// Actions uses to deploy and preview the repository's stacks. Its lifetime is the
// repository's, not a cluster's — a stack cannot hold the role that deploys it (a destroy run
// under that role would delete its own permissions half-way) — so it is a project apart,
// configured by its own keys and by the stack files it serves.

// IdentityProject is the deploy identity's Pulumi project name: its keys' namespace.
const IdentityProject = "lux-gpu-ci-identity"

// The deploy identity's keys (unqualified).
const (
	KeyIdentityRepository      = "repository"
	KeyIdentityStacks          = "stacks"
	KeyIdentityStateBackend    = "stateBackend"
	KeyIdentityOIDCProviderArn = "oidcProviderArn"
)

// PreviewEnvironment is the GitHub environment preview.yml's preview job runs in: the only
// one the preview role trusts.
const PreviewEnvironment = "preview"

// Identity is the deploy identity's validated configuration.
type Identity struct {
	// Region is aws:region: where the provider calls IAM (which is global).
	Region string
	// Repository is the GitHub repository ("owner/name") whose workflows deploy and preview.
	Repository string
	// Stacks are the stacks it deploys, each from its stack file: each gets a deploy role
	// that only its own GitHub environment (named after the stack) may assume.
	Stacks []IdentityStack
	// StateBucket and StatePrefix locate the Pulumi state in S3 (stateBackend
	// s3://bucket/prefix); StateBucket is "" for a backend outside AWS.
	StateBucket, StatePrefix string
	// OIDCProviderArn is the account's GitHub OIDC provider when it already has one (an
	// account has at most one per URL); "" creates it.
	OIDCProviderArn string
}

// IdentityStack is what the deploy identity needs of one stack.
type IdentityStack struct {
	Name        string
	Region      string
	ClusterName string
}

var (
	repositoryRE   = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$`)
	stackNameRE    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)
	oidcProviderRE = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:oidc-provider/token\.actions\.githubusercontent\.com$`)
)

// ParseIdentity reads and validates the deploy identity's configuration; stackDir holds the
// Pulumi.<stack>.yaml files it serves. Every problem is returned, each naming its key and fix.
func ParseIdentity(get Getter, stackDir string) (*Identity, error) {
	var errs []error
	fail := func(key, problem, fix string) {
		errs = append(errs, fmt.Errorf("%s:%s: %s (fix: %s)", IdentityProject, key, problem, fix))
	}
	str := func(key string) string {
		v, _ := get(IdentityProject + ":" + key)
		return strings.TrimSpace(v)
	}
	id := &Identity{Repository: str(KeyIdentityRepository), OIDCProviderArn: str(KeyIdentityOIDCProviderArn)}
	id.Region, _ = get(KeyRegion)
	if !regionRE.MatchString(id.Region) {
		errs = append(errs, fmt.Errorf("%s: %q is not an AWS region name (fix: pulumi config set aws:region us-west-2)", KeyRegion, id.Region))
	}
	if !repositoryRE.MatchString(id.Repository) {
		fail(KeyIdentityRepository, fmt.Sprintf("%q is not a GitHub repository as owner/name", id.Repository), "pulumi config set repository luxfi/lux-gpu-ci")
	}
	if id.OIDCProviderArn != "" && !oidcProviderRE.MatchString(id.OIDCProviderArn) {
		fail(KeyIdentityOIDCProviderArn, fmt.Sprintf("%q is not the ARN of a GitHub Actions OIDC provider", id.OIDCProviderArn),
			"pulumi config set oidcProviderArn arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com, or leave it unset to create one")
	}

	backend := str(KeyIdentityStateBackend)
	switch u, err := url.Parse(backend); {
	case backend == "":
		fail(KeyIdentityStateBackend, "is not set; the deploy role needs the state the stacks keep", "pulumi config set stateBackend s3://my-pulumi-state (the PULUMI_BACKEND_URL the workflows use), or https://api.pulumi.com")
	case err != nil || u.Scheme == "":
		fail(KeyIdentityStateBackend, fmt.Sprintf("%q is not a backend URL", backend), "pulumi config set stateBackend s3://my-pulumi-state")
	case u.Scheme == "s3":
		id.StateBucket, id.StatePrefix = u.Host, strings.Trim(u.Path, "/")
	}

	var names []string
	if raw := str(KeyIdentityStacks); raw != "" {
		if err := json.Unmarshal([]byte(raw), &names); err != nil {
			fail(KeyIdentityStacks, fmt.Sprintf("cannot be read: %v", err), `set stacks in Pulumi.<stack>.yaml, e.g. ["dev", "prod"]`)
		}
	}
	if len(names) == 0 {
		fail(KeyIdentityStacks, "names no stack; the identity deploys the stacks it names", `set stacks in Pulumi.<stack>.yaml, e.g. ["dev", "prod"]`)
	}
	seen := map[string]bool{}
	for _, n := range names {
		switch {
		case !stackNameRE.MatchString(n) || n == PreviewEnvironment:
			fail(KeyIdentityStacks, fmt.Sprintf("%q cannot name a stack and its GitHub environment", n), "name the stack's Pulumi.<stack>.yaml, never preview")
			continue
		case seen[n]:
			fail(KeyIdentityStacks, fmt.Sprintf("%q is listed twice", n), "list each stack once")
			continue
		}
		seen[n] = true
		file := StackFile(stackDir, n)
		if _, err := os.Stat(file); err != nil {
			fail(KeyIdentityStacks, fmt.Sprintf("%q has no stack file %s", n, file), "list only stacks the repository has a Pulumi.<stack>.yaml for")
			continue
		}
		cfg, err := ParseStackFileOffline(file)
		if err != nil {
			fail(KeyIdentityStacks, fmt.Sprintf("stack %s is not valid: %v", n, err), "fix the stack file first")
			continue
		}
		id.Stacks = append(id.Stacks, IdentityStack{Name: n, Region: cfg.Region, ClusterName: cfg.ClusterName})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return id, nil
}

// BoundaryPolicyName is the permissions boundary the deploy identity makes for the stack of
// cluster (infra.NewDeployIdentity): every role the stack makes carries it once a deploy
// identity serves the stack (Config.PermissionsBoundaryArn).
func BoundaryPolicyName(cluster string) string { return cluster + "-boundary" }

// PermissionsBoundaryArn is the stack's permissions boundary, in the deploy role's account
// and partition, when a deploy identity serves the stack (deployRoleArn is set); "" without
// one. The deploy role changes a role of the stack only when it carries this boundary.
func (c *Config) PermissionsBoundaryArn() string {
	parts := strings.SplitN(c.DeployRoleArn, ":", 6) // arn:<partition>:iam::<account>:role/<name>
	if len(parts) != 6 || parts[2] != "iam" {
		return ""
	}
	return fmt.Sprintf("arn:%s:iam::%s:policy/%s", parts[1], parts[4], BoundaryPolicyName(c.ClusterName))
}
