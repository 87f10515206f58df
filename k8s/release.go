package k8s

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/versions"
)

// release describes a Helm release. Every release has a pinned name: Pulumi would otherwise
// suffix it, and Karpenter's ServiceAccount and ARC's scale-set and controller names derive
// from the release name.
type release struct {
	Name, Namespace string
	Chart           versions.Chart
	Values          map[string]any
	SkipCrds        bool
	SkipAwait       bool
	// Description is the release's Helm description (shown by helm list and in a preview).
	Description string
	// TimeoutSeconds bounds the install, upgrade and uninstall waits (default helmTimeoutSeconds).
	TimeoutSeconds int
}

// helmTimeoutSeconds bounds install/upgrade/uninstall waits (the provider's default is 300).
const helmTimeoutSeconds = 600

func newRelease(ctx *pulumi.Context, logical string, r release, opts ...pulumi.ResourceOption) (*HelmRelease, error) {
	args := &helmReleaseArgs{
		Name:      pulumi.String(r.Name),
		Namespace: pulumi.String(r.Namespace),
		Chart:     pulumi.String(r.Chart.Chart),
		Values:    pulumi.ToMap(r.Values),
		SkipCrds:  pulumi.Bool(r.SkipCrds),
		SkipAwait: pulumi.Bool(r.SkipAwait),
		Timeout:   pulumi.Int(helmTimeoutSeconds),
	}
	if r.TimeoutSeconds != 0 {
		args.Timeout = pulumi.Int(r.TimeoutSeconds)
	}
	if r.Description != "" {
		args.Description = pulumi.String(r.Description)
	}
	// A local chart directory (tests) has no version to pin; a repository chart always does.
	if r.Chart.Version != "" {
		args.Version = pulumi.String(r.Chart.Version)
	}
	if r.Chart.Repo != "" {
		args.RepositoryOpts = pulumi.StringMap{"repo": pulumi.String(r.Chart.Repo)}
	}
	rel, err := newHelmRelease(ctx, logical, args, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating Helm release %s: %w", r.Name, err)
	}
	return rel, nil
}
