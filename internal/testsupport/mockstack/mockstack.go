// Package mockstack runs the lux-gpu-ci program under Pulumi's mocks, with no cloud and no
// cluster, and records every resource it declares. The tests assert on the recording;
// `make render` writes it out.
//
// AWS is internal/testsupport/fakeaws, the same fake the e2e's pulumi-resource-aws plugin serves: it
// computes each resource's outputs and answers each invoke, and refuses a type or token it
// does not know. pulumi-eks's Cluster is a remote component whose children do not exist
// under mocks (its code never runs here: the e2e runs it), so the mock registers a stand-in
// for its inner EKS cluster to give the resource-typed eksCluster output a value.
package mockstack

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
)

// Stand-in values the mocks give AWS outputs.
const (
	Account   = fakeaws.Account
	ClusterSG = fakeaws.ClusterSG
)

// CA is the stand-in certificate authority data of the EKS cluster (base64, as EKS gives it).
var CA = fakeaws.FakeCA

// Endpoint is the stand-in EKS API endpoint for a region.
func Endpoint(region string) string { return fakeaws.FakeEndpoint(region) }

// Registration is one resource the program registered.
type Registration struct {
	// URN is the resource's URN as the engine would compute it.
	URN        string
	Type, Name string
	// Inputs are the registered inputs as plain Go values (secrets unwrapped: use Raw to
	// tell them apart).
	Inputs map[string]any
	Raw    pulumi.MockResourceArgs
}

// Key is "type::name", the way tests refer to a resource.
func (r Registration) Key() string { return r.Type + "::" + r.Name }

// Deps are the "type::name" keys of everything the resource depends on.
func (r Registration) Deps() []string {
	var keys []string
	for _, urn := range r.Raw.RegisterRPC.GetDependencies() {
		keys = append(keys, URNKey(urn))
	}
	return keys
}

// Parent is the "type::name" key of the resource's parent.
func (r Registration) Parent() string { return URNKey(r.Raw.RegisterRPC.GetParent()) }

// URNKey turns urn:pulumi:stack::project::parent$type::name into "type::name".
func URNKey(urn string) string {
	parts := strings.Split(urn, "::")
	if len(parts) < 4 {
		return urn
	}
	types := strings.Split(parts[2], "$")
	return types[len(types)-1] + "::" + strings.Join(parts[3:], "::")
}

// Mocks records registrations and answers invokes.
type Mocks struct {
	// Cloud is the fake AWS account the program runs in; its region is the stack's.
	Cloud fakeaws.Cloud

	project, stack string
	ctx            *pulumi.Context

	mu        sync.Mutex
	resources []Registration
	fakes     map[string]bool // registered by the mock itself, not by the program
}

// New returns mocks for a project and stack.
func New(project, stack string) *Mocks {
	return &Mocks{project: project, stack: stack, fakes: map[string]bool{}}
}

// Run executes program under the mocks with cfg (fully qualified keys → raw values,
// structured values as JSON); secretKeys are the keys stored as secrets.
func (m *Mocks) Run(program pulumi.RunFunc, cfg map[string]string, secretKeys []string) error {
	return pulumi.RunErr(func(ctx *pulumi.Context) error {
		m.ctx = ctx
		return program(ctx)
	}, pulumi.WithMocks(m.project, m.stack, m), func(ri *pulumi.RunInfo) {
		ri.Config = cfg
		ri.ConfigSecretKeys = secretKeys
	})
}

// Resources are the program's registrations in registration order (mock stand-ins excluded).
func (m *Mocks) Resources() []Registration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Registration
	for _, r := range m.resources {
		if !m.fakes[r.Key()] {
			out = append(out, r)
		}
	}
	return out
}

// All returns the program's registrations of a type, sorted by name.
func (m *Mocks) All(typ string) []Registration {
	var out []Registration
	for _, r := range m.Resources() {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// cloud is the fake AWS account, in the stack's region.
func (m *Mocks) cloud() *fakeaws.Cloud {
	c := m.Cloud
	if r, ok := m.ctx.GetConfig("aws:region"); ok && r != "" {
		c.Region = r
	}
	return &c
}

// NewResource implements pulumi.MockResourceMonitor.
func (m *Mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	id, outs := fakeaws.ID(args.Name), args.Inputs.Copy()
	switch {
	case args.TypeToken == "eks:index:Cluster":
		name := ""
		if v, ok := args.Inputs["name"]; ok && v.IsString() {
			name = v.StringValue()
		}
		version := ""
		if v, ok := args.Inputs["version"]; ok && v.IsString() {
			version = v.StringValue()
		}
		ref, err := m.fakeInnerCluster(args.Name+"-eksCluster", name, version)
		if err != nil {
			return "", nil, err
		}
		outs["eksCluster"] = ref
		outs["kubeconfigJson"] = resource.NewProperty(`{"note":"pulumi-eks kubeconfig, unused"}`)
		id = ""
	case strings.HasPrefix(args.TypeToken, "aws:") && args.ID != "":
		// An import: the resource exists in the account.
		var err error
		id = args.ID
		if outs, err = m.cloud().Update(args.TypeToken, args.Name, id, args.Inputs, args.Inputs, false); err != nil {
			return "", nil, err
		}
	case strings.HasPrefix(args.TypeToken, "aws:"):
		var err error
		if id, outs, err = m.cloud().Create(args.TypeToken, args.Name, args.Inputs, m.ctx.DryRun()); err != nil {
			return "", nil, err
		}
	case args.TypeToken == "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition":
		// The program reads nothing back from a CRD. Echoing its schema (ARC's are up to 140 KB,
		// nested 20 deep) back through the SDK, whose plugin.UnmarshalPropertyValue converts
		// every nested object's whole subtree to check for a signature (quadratic in depth),
		// was a quarter of stack/'s CPU.
		delete(outs, "spec")
	}

	if args.TypeToken != "pulumi:pulumi:Stack" {
		m.mu.Lock()
		m.resources = append(m.resources, Registration{
			URN: m.urn(args), Type: args.TypeToken, Name: args.Name, Inputs: args.Inputs.Mappable(), Raw: args,
		})
		m.mu.Unlock()
	}
	return id, outs, nil
}

// urn computes the resource's URN from its parent's, as the engine does.
func (m *Mocks) urn(args pulumi.MockResourceArgs) string {
	qualified := args.TypeToken
	if parent := args.RegisterRPC.GetParent(); parent != "" {
		parts := strings.Split(parent, "::")
		if len(parts) >= 4 && parts[2] != "pulumi:pulumi:Stack" {
			qualified = parts[2] + "$" + args.TypeToken
		}
	}
	return fmt.Sprintf("urn:pulumi:%s::%s::%s::%s", m.stack, m.project, qualified, args.Name)
}

// fakeInnerCluster registers a stand-in aws:eks/cluster:Cluster and returns a reference to
// it, as pulumi-eks's Cluster returns its eksCluster output (with the component's version,
// as cluster.js passes it on at v2.8.1).
// It registers by type token, so the mocks need none of pulumi-aws's SDK.
func (m *Mocks) fakeInnerCluster(logical, physical, version string) (resource.PropertyValue, error) {
	var inner pulumi.CustomResourceState
	err := m.ctx.RegisterResource("aws:eks/cluster:Cluster", logical, pulumi.Map{
		"name":      pulumi.String(physical),
		"version":   pulumi.String(version),
		"roleArn":   pulumi.String("arn:aws:iam::" + Account + ":role/eks-service"),
		"vpcConfig": pulumi.Map{"subnetIds": pulumi.StringArray{}},
	}, &inner)
	if err != nil {
		return resource.PropertyValue{}, err
	}
	urn, err := internals.UnsafeAwaitOutput(m.ctx.Context(), inner.URN())
	if err != nil {
		return resource.PropertyValue{}, err
	}
	id, err := internals.UnsafeAwaitOutput(m.ctx.Context(), inner.ID())
	if err != nil {
		return resource.PropertyValue{}, err
	}
	m.mu.Lock()
	m.fakes["aws:eks/cluster:Cluster::"+logical] = true
	m.mu.Unlock()
	return resource.MakeCustomResourceReference(resource.URN(urn.Value.(pulumi.URN)), resource.ID(id.Value.(pulumi.ID)), ""), nil
}

// Call implements pulumi.MockResourceMonitor (invokes).
func (m *Mocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return m.cloud().Invoke(args.Token, args.Args)
}
