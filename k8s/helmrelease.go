package k8s

import (
	"reflect"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// HelmRelease is pulumi-kubernetes' Helm release (kubernetes:helm.sh/v3:Release), declared
// with the inputs this program sets. It is not imported from the SDK: the SDK's package
// (sdk/v4/go/kubernetes/helm/v3) also holds the Go-side Chart component, which imports
// kubernetes/yaml and through it every Kubernetes API group the SDK has — 61 packages, 22 MB
// of generated code, over five minutes of a cold build on two cores for a type the program
// uses as a token and a dozen inputs.
//
// The wire format is the SDK's at the pinned version (v4.32.0, go/kubernetes/helm/v3/release.go):
// the same type token and input names, and compat "true", which the SDK's NewRelease always
// sends and which live stacks hold in their state (without it every release would show a
// diff). k8s/helmrelease_test.go compares the inputs with the SDK's; make e2e runs them
// through the real provider.
type HelmRelease struct {
	pulumi.CustomResourceState
}

// helmReleaseInputs are the provider's input names, as the SDK's releaseArgs tags them.
type helmReleaseInputs struct {
	Chart          string            `pulumi:"chart"`
	Compat         *string           `pulumi:"compat"`
	Description    *string           `pulumi:"description"`
	Name           *string           `pulumi:"name"`
	Namespace      *string           `pulumi:"namespace"`
	RepositoryOpts map[string]string `pulumi:"repositoryOpts"`
	SkipAwait      *bool             `pulumi:"skipAwait"`
	SkipCrds       *bool             `pulumi:"skipCrds"`
	Timeout        *int              `pulumi:"timeout"`
	Values         map[string]any    `pulumi:"values"`
	Version        *string           `pulumi:"version"`
}

// helmReleaseArgs are helmReleaseInputs as Pulumi inputs.
type helmReleaseArgs struct {
	Chart       pulumi.StringInput
	Compat      pulumi.StringPtrInput
	Description pulumi.StringPtrInput
	Name        pulumi.StringPtrInput
	Namespace   pulumi.StringPtrInput
	// RepositoryOpts is the SDK's RepositoryOpts object; of its fields only repo is set.
	RepositoryOpts pulumi.StringMapInput
	SkipAwait      pulumi.BoolPtrInput
	SkipCrds       pulumi.BoolPtrInput
	Timeout        pulumi.IntPtrInput
	Values         pulumi.MapInput
	Version        pulumi.StringPtrInput
}

func (helmReleaseArgs) ElementType() reflect.Type {
	return reflect.TypeOf((*helmReleaseInputs)(nil)).Elem()
}

// helmReleaseType is the provider's type token for a Helm release.
const helmReleaseType = "kubernetes:helm.sh/v3:Release"

func newHelmRelease(ctx *pulumi.Context, name string, args *helmReleaseArgs, opts ...pulumi.ResourceOption) (*HelmRelease, error) {
	args.Compat = pulumi.StringPtr("true")
	var r HelmRelease
	if err := ctx.RegisterResource(helmReleaseType, name, args, &r, opts...); err != nil {
		return nil, err
	}
	return &r, nil
}
