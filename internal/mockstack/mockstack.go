// Package mockstack runs the lux-gpu-ci program under Pulumi's mocks, with no cloud and no
// cluster, and records every resource it declares. The tests assert on the recording;
// `gpuci render` writes it out.
//
// The mocks stand in for AWS with plausible outputs (account 123456789012, fake ARNs) and
// render IAM policy documents the way the provider's getPolicyDocument does. pulumi-eks's
// Cluster is a remote component whose children do not exist under mocks, so the mock
// registers a stand-in for its inner EKS cluster to give resource-typed outputs a value.
package mockstack

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	awseks "github.com/pulumi/pulumi-aws/sdk/v6/go/aws/eks"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
)

// Stand-in values the mocks give AWS outputs.
const (
	Account   = "123456789012"
	ClusterSG = "sg-0cluster"
)

// CA is the stand-in certificate authority data of the EKS cluster (base64, as EKS gives it).
var CA = base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"))

// Endpoint is the stand-in EKS API endpoint for a region.
func Endpoint(region string) string {
	return "https://0123456789ABCDEF.gr7." + region + ".eks.amazonaws.com"
}

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
	// AZs are what getAvailabilityZones returns (default: a–d of the region).
	AZs []string

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

func (m *Mocks) region() string {
	if r, ok := m.ctx.GetConfig("aws:region"); ok && r != "" {
		return r
	}
	return "us-west-2"
}

// NewResource implements pulumi.MockResourceMonitor.
func (m *Mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	outs := args.Inputs.Copy()
	id := args.Name + "_id"
	str := func(k string) string {
		if v, ok := args.Inputs[resource.PropertyKey(k)]; ok && v.IsString() {
			return v.StringValue()
		}
		return ""
	}
	nameOr := func(k string) string {
		if s := str(k); s != "" {
			return s
		}
		return args.Name
	}
	region := m.region()
	switch args.TypeToken {
	case "eks:index:Cluster":
		ref, err := m.fakeInnerCluster(args.Name+"-eksCluster", str("name"))
		if err != nil {
			return "", nil, err
		}
		outs["eksCluster"] = ref
		outs["kubeconfigJson"] = resource.NewProperty(`{"note":"pulumi-eks kubeconfig, unused"}`)
		id = ""
	case "aws:eks/cluster:Cluster":
		outs["name"] = resource.NewProperty(nameOr("name"))
		outs["endpoint"] = resource.NewProperty(Endpoint(region))
		outs["certificateAuthority"] = resource.NewObjectProperty(resource.PropertyMap{"data": resource.NewProperty(CA)})
		outs["vpcConfig"] = resource.NewObjectProperty(resource.PropertyMap{
			"clusterSecurityGroupId": resource.NewProperty(ClusterSG),
			"subnetIds":              resource.NewArrayProperty(nil),
		})
	case "aws:sqs/queue:Queue":
		outs["arn"] = resource.NewProperty(fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, Account, nameOr("name")))
		outs["url"] = resource.NewProperty(fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", region, Account, nameOr("name")))
	case "aws:iam/role:Role":
		outs["name"] = resource.NewProperty(nameOr("name"))
		outs["arn"] = resource.NewProperty("arn:aws:iam::" + Account + ":role/" + nameOr("name"))
	case "aws:iam/policy:Policy":
		outs["arn"] = resource.NewProperty("arn:aws:iam::" + Account + ":policy/" + nameOr("name"))
	case "aws:cloudwatch/eventRule:EventRule":
		outs["name"] = resource.NewProperty(nameOr("name"))
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
// it, as pulumi-eks's Cluster returns its eksCluster output.
func (m *Mocks) fakeInnerCluster(logical, physical string) (resource.PropertyValue, error) {
	inner, err := awseks.NewCluster(m.ctx, logical, &awseks.ClusterArgs{
		Name:      pulumi.String(physical),
		RoleArn:   pulumi.String("arn:aws:iam::" + Account + ":role/eks-service"),
		VpcConfig: &awseks.ClusterVpcConfigArgs{SubnetIds: pulumi.StringArray{}},
	})
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
	region := m.region()
	switch args.Token {
	case "aws:index/getAvailabilityZones:getAvailabilityZones":
		azs := m.AZs
		if azs == nil {
			azs = []string{region + "d", region + "a", region + "c", region + "b"}
		}
		return resource.NewPropertyMapFromMap(map[string]any{"names": azs, "id": region}), nil
	case "aws:index/getPartition:getPartition":
		return resource.NewPropertyMapFromMap(map[string]any{"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}), nil
	case "aws:index/getCallerIdentity:getCallerIdentity":
		return resource.NewPropertyMapFromMap(map[string]any{
			"accountId": Account, "arn": "arn:aws:iam::" + Account + ":user/ci", "userId": "AIDEXAMPLE", "id": Account,
		}), nil
	case "aws:iam/getPolicyDocument:getPolicyDocument":
		doc, err := RenderPolicy(args.Args.Mappable())
		if err != nil {
			return nil, err
		}
		return resource.NewPropertyMapFromMap(map[string]any{"json": doc, "id": "doc"}), nil
	case "aws:eks/getAddonVersion:getAddonVersion":
		name := args.Args["addonName"].StringValue()
		return resource.NewPropertyMapFromMap(map[string]any{
			"addonName": name, "kubernetesVersion": args.Args["kubernetesVersion"].StringValue(),
			"version": "v-eks-default-" + name, "id": name,
		}), nil
	}
	return nil, fmt.Errorf("mock: unexpected invoke %s", args.Token)
}

// PolicyDocument is an IAM policy document as RenderPolicy writes it.
type PolicyDocument struct {
	Version   string            `json:"Version"`
	ID        string            `json:"Id,omitempty"`
	Statement []PolicyStatement `json:"Statement"`
}

// PolicyStatement is one statement of a PolicyDocument. Principal is "*" or a map of
// principal type to identifiers.
type PolicyStatement struct {
	Sid       string                         `json:"Sid,omitempty"`
	Effect    string                         `json:"Effect"`
	Action    []string                       `json:"Action"`
	Resource  []string                       `json:"Resource,omitempty"`
	Principal any                            `json:"Principal,omitempty"`
	Condition map[string]map[string][]string `json:"Condition,omitempty"`
}

// RenderPolicy does what the AWS provider's getPolicyDocument does, in a normalised form:
// every Action/Resource/Condition value is a list, and Effect defaults to Allow.
func RenderPolicy(args map[string]any) (string, error) {
	doc := PolicyDocument{Version: "2012-10-17"}
	doc.ID, _ = args["policyId"].(string)
	strs := func(v any) []string {
		var out []string
		for _, x := range asList(v) {
			out = append(out, x.(string))
		}
		return out
	}
	for _, raw := range asList(args["statements"]) {
		s := raw.(map[string]any)
		st := PolicyStatement{Effect: "Allow", Action: strs(s["actions"]), Resource: strs(s["resources"])}
		st.Sid, _ = s["sid"].(string)
		if e, _ := s["effect"].(string); e != "" {
			st.Effect = e
		}
		for _, p := range asList(s["principals"]) {
			pm := p.(map[string]any)
			if pm["type"] == "*" {
				st.Principal = "*"
				continue
			}
			principals, _ := st.Principal.(map[string][]string)
			if principals == nil {
				principals = map[string][]string{}
			}
			typ := pm["type"].(string)
			principals[typ] = append(principals[typ], strs(pm["identifiers"])...)
			st.Principal = principals
		}
		for _, c := range asList(s["conditions"]) {
			cm := c.(map[string]any)
			test, variable := cm["test"].(string), cm["variable"].(string)
			if st.Condition == nil {
				st.Condition = map[string]map[string][]string{}
			}
			if st.Condition[test] == nil {
				st.Condition[test] = map[string][]string{}
			}
			if _, dup := st.Condition[test][variable]; dup {
				return "", fmt.Errorf("condition %s %s given twice", test, variable)
			}
			st.Condition[test][variable] = strs(cm["values"])
		}
		doc.Statement = append(doc.Statement, st)
	}
	b, err := json.Marshal(doc)
	return string(b), err
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
