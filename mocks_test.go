package main

// The test harness: the real program runs under Pulumi's mocks, which record every resource
// registration and invoke, and stand in for AWS with plausible outputs.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	awseks "github.com/pulumi/pulumi-aws/sdk/v6/go/aws/eks"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
	"gopkg.in/yaml.v3"
)

const (
	testAccount   = "123456789012"
	testEndpoint  = "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com"
	testClusterSG = "sg-0cluster"
)

var testCA = base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"))

// registered is one resource the program registered.
type registered struct {
	Type, Name string
	Inputs     map[string]any
	Raw        pulumi.MockResourceArgs
}

// Key is "type::name", the way tests refer to a resource.
func (r registered) Key() string { return r.Type + "::" + r.Name }

// Deps are the "type::name" keys of everything this resource depends on.
func (r registered) Deps() []string {
	var keys []string
	for _, urn := range r.Raw.RegisterRPC.GetDependencies() {
		keys = append(keys, urnKey(urn))
	}
	return keys
}

// Parent is the "type::name" key of the resource's parent.
func (r registered) Parent() string { return urnKey(r.Raw.RegisterRPC.GetParent()) }

// urnKey turns urn:pulumi:stack::project::parent$type::name into "type::name".
func urnKey(urn string) string {
	parts := strings.Split(urn, "::")
	if len(parts) < 4 {
		return urn
	}
	types := strings.Split(parts[2], "$")
	return types[len(types)-1] + "::" + strings.Join(parts[3:], "::")
}

type mocks struct {
	ctx *pulumi.Context
	azs []string
	// secretKeys are the config keys stored as secrets (default: the credentials).
	secretKeys []string

	mu        sync.Mutex
	resources []registered
	fakes     map[string]bool // registered by the mock itself, not by the program
	invokes   []pulumi.MockCallArgs
}

func newMocks() *mocks {
	return &mocks{azs: []string{"us-west-2d", "us-west-2a", "us-west-2c", "us-west-2b"}, fakes: map[string]bool{}, secretKeys: secretKeys}
}

func (m *mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
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
	switch args.TypeToken {
	case "eks:index:Cluster":
		// A remote component: its children do not exist under mocks. Fake the inner EKS
		// cluster so resource-typed outputs (EksCluster) resolve like they would for real.
		inner, err := awseks.NewCluster(m.ctx, args.Name+"-eksCluster", &awseks.ClusterArgs{
			Name:      pulumi.String(str("name")),
			RoleArn:   pulumi.String("arn:aws:iam::" + testAccount + ":role/eks-service"),
			VpcConfig: &awseks.ClusterVpcConfigArgs{SubnetIds: pulumi.StringArray{}},
		})
		if err != nil {
			return "", nil, err
		}
		urn, err := internals.UnsafeAwaitOutput(m.ctx.Context(), inner.URN())
		if err != nil {
			return "", nil, err
		}
		innerID, err := internals.UnsafeAwaitOutput(m.ctx.Context(), inner.ID())
		if err != nil {
			return "", nil, err
		}
		m.mu.Lock()
		m.fakes["aws:eks/cluster:Cluster::"+args.Name+"-eksCluster"] = true
		m.mu.Unlock()
		outs["eksCluster"] = resource.MakeCustomResourceReference(resource.URN(urn.Value.(pulumi.URN)), resource.ID(innerID.Value.(pulumi.ID)), "")
		outs["kubeconfigJson"] = resource.NewProperty(`{"note":"pulumi-eks kubeconfig, unused"}`)
		id = ""
	case "aws:eks/cluster:Cluster":
		outs["name"] = resource.NewProperty(nameOr("name"))
		outs["endpoint"] = resource.NewProperty(testEndpoint)
		outs["certificateAuthority"] = resource.NewObjectProperty(resource.PropertyMap{"data": resource.NewProperty(testCA)})
		outs["vpcConfig"] = resource.NewObjectProperty(resource.PropertyMap{
			"clusterSecurityGroupId": resource.NewProperty(testClusterSG),
			"subnetIds":              resource.NewArrayProperty(nil),
		})
	case "aws:sqs/queue:Queue":
		outs["arn"] = resource.NewProperty("arn:aws:sqs:us-west-2:" + testAccount + ":" + nameOr("name"))
		outs["url"] = resource.NewProperty("https://sqs.us-west-2.amazonaws.com/" + testAccount + "/" + nameOr("name"))
	case "aws:iam/role:Role":
		outs["name"] = resource.NewProperty(nameOr("name"))
		outs["arn"] = resource.NewProperty("arn:aws:iam::" + testAccount + ":role/" + nameOr("name"))
	case "aws:iam/policy:Policy":
		outs["arn"] = resource.NewProperty("arn:aws:iam::" + testAccount + ":policy/" + nameOr("name"))
	case "aws:cloudwatch/eventRule:EventRule":
		outs["name"] = resource.NewProperty(nameOr("name"))
	}

	if args.TypeToken != "pulumi:pulumi:Stack" {
		m.mu.Lock()
		m.resources = append(m.resources, registered{Type: args.TypeToken, Name: args.Name, Inputs: args.Inputs.Mappable(), Raw: args})
		m.mu.Unlock()
	}
	return id, outs, nil
}

func (m *mocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	m.mu.Lock()
	m.invokes = append(m.invokes, args)
	m.mu.Unlock()
	switch args.Token {
	case "aws:index/getAvailabilityZones:getAvailabilityZones":
		return resource.NewPropertyMapFromMap(map[string]any{"names": m.azs, "id": "us-west-2"}), nil
	case "aws:index/getPartition:getPartition":
		return resource.NewPropertyMapFromMap(map[string]any{"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}), nil
	case "aws:index/getCallerIdentity:getCallerIdentity":
		return resource.NewPropertyMapFromMap(map[string]any{
			"accountId": testAccount, "arn": "arn:aws:iam::" + testAccount + ":user/ci", "userId": "AIDEXAMPLE", "id": testAccount,
		}), nil
	case "aws:iam/getPolicyDocument:getPolicyDocument":
		doc, err := renderPolicy(args.Args.Mappable())
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

// renderPolicy does what the AWS provider's getPolicyDocument does, in a normalised form:
// every Action/Resource/Condition value is a list, and Effect defaults to Allow.
func renderPolicy(args map[string]any) (string, error) {
	type stmt struct {
		Sid       string                         `json:"Sid,omitempty"`
		Effect    string                         `json:"Effect"`
		Action    []string                       `json:"Action"`
		Resource  []string                       `json:"Resource,omitempty"`
		Principal any                            `json:"Principal,omitempty"`
		Condition map[string]map[string][]string `json:"Condition,omitempty"`
	}
	doc := struct {
		Version   string `json:"Version"`
		ID        string `json:"Id,omitempty"`
		Statement []stmt `json:"Statement"`
	}{Version: "2012-10-17"}
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
		st := stmt{Effect: "Allow", Action: strs(s["actions"]), Resource: strs(s["resources"])}
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
			principals[pm["type"].(string)] = append(principals[pm["type"].(string)], strs(pm["identifiers"])...)
			st.Principal = principals
		}
		for _, c := range asList(s["conditions"]) {
			cm := c.(map[string]any)
			if st.Condition == nil {
				st.Condition = map[string]map[string][]string{}
			}
			test := cm["test"].(string)
			if st.Condition[test] == nil {
				st.Condition[test] = map[string][]string{}
			}
			if _, dup := st.Condition[test][cm["variable"].(string)]; dup {
				return "", fmt.Errorf("condition %s %s given twice", test, cm["variable"])
			}
			st.Condition[test][cm["variable"].(string)] = strs(cm["values"])
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

// secretKeys are the config keys a real stack stores with --secret.
var secretKeys = []string{"lux-gpu-ci:githubToken", "lux-gpu-ci:githubAppPrivateKey"}

// testToken stands in for a GitHub PAT; tests check it never leaves a secret.
const testToken = "ghp_TESTTOKEN0123456789"

// run executes the real program under mocks with the given config ("lux-gpu-ci:key" or
// "aws:region" → raw value; structured values as JSON). Credentials are marked secret, as
// `pulumi config set --secret` would.
func (m *mocks) run(cfg map[string]string) error {
	return pulumi.RunErr(func(ctx *pulumi.Context) error {
		m.ctx = ctx
		return program(ctx)
	}, pulumi.WithMocks("lux-gpu-ci", "dev", m), func(ri *pulumi.RunInfo) {
		ri.Config = cfg
		ri.ConfigSecretKeys = m.secretKeys
	})
}

// all returns the program's registrations of a type (mock fakes excluded), sorted by name.
func (m *mocks) all(typ string) []registered {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []registered
	for _, r := range m.resources {
		if r.Type == typ && !m.fakes[r.Key()] {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// one returns the single registration of a type, failing the test unless there is exactly one.
func (m *mocks) one(t *testing.T, typ string) registered {
	t.Helper()
	rs := m.all(typ)
	if len(rs) != 1 {
		t.Fatalf("want exactly one %s, got %d: %v", typ, len(rs), names(rs))
	}
	return rs[0]
}

// get returns the registration with this type and name.
func (m *mocks) get(t *testing.T, typ, name string) registered {
	t.Helper()
	for _, r := range m.all(typ) {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no %s named %s; have %v", typ, name, names(m.all(typ)))
	return registered{}
}

// programResources are all registrations the program made (mock fakes excluded).
func (m *mocks) programResources() []registered {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []registered
	for _, r := range m.resources {
		if !m.fakes[r.Key()] {
			out = append(out, r)
		}
	}
	return out
}

func names(rs []registered) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// stackConfig reads Pulumi.<stack>.yaml the way the Pulumi CLI hands it to a program:
// scalars as strings, lists and objects as JSON. The GitHub token, which a real stack holds
// encrypted, is testToken.
func stackConfig(t *testing.T, stack string) map[string]string {
	t.Helper()
	b, err := os.ReadFile("Pulumi." + stack + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Config map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatalf("Pulumi.%s.yaml: %v", stack, err)
	}
	cfg := map[string]string{"lux-gpu-ci:githubToken": testToken}
	for k, v := range file.Config {
		switch v := v.(type) {
		case string:
			cfg[k] = v
		case map[string]any, []any:
			j, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			cfg[k] = string(j)
		default:
			cfg[k] = fmt.Sprint(v)
		}
	}
	return cfg
}

// unset, as a value for with, removes the key.
const unset = "<unset>"

// with returns a copy of cfg with the given keys set. Project keys may be given without the
// "lux-gpu-ci:" prefix.
func with(cfg map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range cfg {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i]
		if !strings.Contains(k, ":") {
			k = "lux-gpu-ci:" + k
		}
		if kv[i+1] == unset {
			delete(out, k)
		} else {
			out[k] = kv[i+1]
		}
	}
	return out
}

func contains(xs []string, x string) bool { return slices.Contains(xs, x) }
