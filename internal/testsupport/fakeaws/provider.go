package fakeaws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// PluginVersion is the version the fake plugin reports: the pulumi-aws version go.mod pins,
// which is the plugin version the program's SDK and pulumi-eks's @pulumi/aws ask for.
const PluginVersion = "6.83.4"

// Call is one request the plugin served, as written to its log (one JSON object per line).
type Call struct {
	Method  string `json:"method"`
	Type    string `json:"type,omitempty"`
	Name    string `json:"name,omitempty"`
	URN     string `json:"urn,omitempty"`
	Token   string `json:"token,omitempty"`
	Preview bool   `json:"preview,omitempty"`
	Error   string `json:"error,omitempty"`
	// Args and Env are a CLI stand-in's arguments and the AWS_* variables it saw.
	Args []string          `json:"args,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
}

// Provider serves the fake as a pulumi-resource-aws plugin: Check passes inputs through,
// Diff compares inputs, Create/Update compute outputs with the Cloud (unknown in previews),
// Delete forgets, Invoke answers data sources. It refuses what the Cloud does not know. A
// managed node group is the exception where AWS's state and the stack's can part: see
// nodegroup.go.
type Provider struct {
	pulumirpc.UnimplementedResourceProviderServer

	mu    sync.Mutex
	cloud Cloud
	log   string

	// NodeGroups runs managed node groups' nodes; nil: the fake has no cluster, and an
	// update replaces no node.
	NodeGroups NodeGroups
}

// NewProvider returns a provider for cloud that appends every call to logPath ("" for none).
func NewProvider(cloud Cloud, logPath string) *Provider {
	return &Provider{cloud: cloud, log: logPath}
}

// ReadCalls reads a plugin log.
func ReadCalls(path string) ([]Call, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var calls []Call
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var c Call
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		calls = append(calls, c)
	}
	return calls, nil
}

func (p *Provider) record(c Call, err error) {
	if err != nil {
		c.Error = err.Error()
	}
	if p.log == "" {
		return
	}
	b, _ := json.Marshal(c)
	p.mu.Lock()
	defer p.mu.Unlock()
	// Several plugin processes may share one log: O_APPEND keeps each line whole.
	f, ferr := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if ferr != nil {
		return
	}
	defer f.Close()
	_, _ = f.Write(append(b, '\n'))
}

var rpcOpts = plugin.MarshalOptions{KeepUnknowns: true, KeepSecrets: true, KeepResources: true}

func unmarshal(s *structpb.Struct) (resource.PropertyMap, error) {
	return plugin.UnmarshalProperties(s, rpcOpts)
}

func marshal(m resource.PropertyMap) (*structpb.Struct, error) {
	return plugin.MarshalProperties(m, rpcOpts)
}

func urnParts(urn string) (typ, name string) {
	u := resource.URN(urn)
	return string(u.Type()), u.Name()
}

// GetPluginInfo reports the pinned pulumi-aws version.
func (p *Provider) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: PluginVersion}, nil
}

// CheckConfig accepts the provider configuration as given.
func (p *Provider) CheckConfig(_ context.Context, req *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	p.record(Call{Method: "CheckConfig", URN: req.GetUrn()}, nil)
	return &pulumirpc.CheckResponse{Inputs: req.GetNews()}, nil
}

// DiffConfig never asks for a new provider.
func (p *Provider) DiffConfig(context.Context, *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_NONE}, nil
}

// Configure takes the region from the provider configuration.
func (p *Provider) Configure(_ context.Context, req *pulumirpc.ConfigureRequest) (*pulumirpc.ConfigureResponse, error) {
	args, err := unmarshal(req.GetArgs())
	if err == nil {
		if r := str(args["region"]); r != "" {
			p.mu.Lock()
			p.cloud.Region = r
			p.mu.Unlock()
		} else if r := req.GetVariables()["aws:config:region"]; r != "" {
			p.mu.Lock()
			p.cloud.Region = r
			p.mu.Unlock()
		}
	}
	p.record(Call{Method: "Configure", Name: p.cloud.region()}, err)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.ConfigureResponse{AcceptSecrets: true, AcceptResources: true, SupportsPreview: true}, nil
}

// Invoke answers a data source.
func (p *Provider) Invoke(_ context.Context, req *pulumirpc.InvokeRequest) (*pulumirpc.InvokeResponse, error) {
	args, err := unmarshal(req.GetArgs())
	var out resource.PropertyMap
	if err == nil {
		out, err = p.cloud.Invoke(req.GetTok(), args)
	}
	p.record(Call{Method: "Invoke", Token: req.GetTok()}, err)
	if err != nil {
		return nil, err
	}
	s, err := marshal(out)
	return &pulumirpc.InvokeResponse{Return: s}, err
}

// Check passes the inputs through, refusing types the fake does not know. Like the real
// provider, it names a resource given only a namePrefix: once, keeping the name on later
// checks, and differently each time it is created anew.
func (p *Provider) Check(_ context.Context, req *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	typ, name := urnParts(req.GetUrn())
	var err error
	if !Knows(typ) {
		_, _, err = p.cloud.Create(typ, name, nil, true)
	}
	news, olds := resource.PropertyMap{}, resource.PropertyMap{}
	if err == nil {
		news, err = unmarshal(req.GetNews())
	}
	if err == nil {
		olds, err = unmarshal(req.GetOlds())
	}
	p.record(Call{Method: "Check", Type: typ, Name: name, URN: req.GetUrn()}, err)
	if err != nil {
		return nil, err
	}
	if prefix := str(news["namePrefix"]); prefix != "" && str(news["name"]) == "" {
		if old := str(olds["name"]); strings.HasPrefix(old, prefix) {
			news["name"] = resource.NewProperty(old)
		} else {
			// A timestamp and a counter, 26 characters, as the provider's.
			stamp := strings.ReplaceAll(time.Now().UTC().Format("20060102150405.000000"), ".", "")
			news["name"] = resource.NewProperty(prefix + stamp + "000001")
		}
	}
	inputs, err := marshal(news)
	return &pulumirpc.CheckResponse{Inputs: inputs}, err
}

// Diff reports which top-level inputs changed; every change is an in-place update. A
// managed node group is diffed against its state (its outputs), as the bridge diffs: the
// state is what a refresh read, or what a failed update left.
func (p *Provider) Diff(_ context.Context, req *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	typ, name := urnParts(req.GetUrn())
	olds := req.GetOldInputs()
	if olds == nil {
		olds = req.GetOlds()
	}
	oldIn, err := unmarshal(olds)
	var news, oldOuts resource.PropertyMap
	if err == nil {
		news, err = unmarshal(req.GetNews())
	}
	if err == nil && typ == nodeGroupType {
		if oldOuts, err = unmarshal(req.GetOlds()); err == nil {
			oldIn = stateOf(oldIn, oldOuts, news)
		}
	}
	p.record(Call{Method: "Diff", Type: typ, Name: name, URN: req.GetUrn()}, err)
	if err != nil {
		return nil, err
	}
	diff := oldIn.Diff(news)
	if diff == nil || !diff.AnyChanges() {
		return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_NONE}, nil
	}
	var keys []string
	for _, k := range diff.ChangedKeys() {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_SOME, Diffs: keys}, nil
}

// Create computes the new resource's ID and outputs (unknowns in a preview).
func (p *Provider) Create(_ context.Context, req *pulumirpc.CreateRequest) (*pulumirpc.CreateResponse, error) {
	typ, name := urnParts(req.GetUrn())
	in, err := unmarshal(req.GetProperties())
	var id string
	var outs resource.PropertyMap
	if err == nil {
		id, outs, err = p.cloud.Create(typ, name, in, req.GetPreview())
	}
	p.record(Call{Method: "Create", Type: typ, Name: name, URN: req.GetUrn(), Preview: req.GetPreview()}, err)
	if err != nil {
		return nil, err
	}
	s, err := marshal(outs)
	return &pulumirpc.CreateResponse{Id: id, Properties: s}, err
}

// Update recomputes the outputs from the new inputs. A managed node group's update that
// replaces its nodes runs on the NodeGroups, and fails as the real provider does: the new
// outputs are returned with the error (terraform-plugin-sdk saves the proposed state when an
// update fails, and the bridge returns it as a partial failure), so the engine keeps them.
func (p *Provider) Update(ctx context.Context, req *pulumirpc.UpdateRequest) (*pulumirpc.UpdateResponse, error) {
	typ, name := urnParts(req.GetUrn())
	news, err := unmarshal(req.GetNews())
	var olds, outs resource.PropertyMap
	if err == nil {
		olds, err = unmarshal(req.GetOlds())
	}
	if err == nil {
		outs, err = p.cloud.Update(typ, name, req.GetId(), olds, news, req.GetPreview())
	}
	var rolled error
	if err == nil && typ == nodeGroupType && !req.GetPreview() {
		rolled = p.rollNodes(ctx, req.GetId(), olds, outs)
	}
	p.record(Call{Method: "Update", Type: typ, Name: name, URN: req.GetUrn(), Preview: req.GetPreview()}, errors.Join(err, rolled))
	if err != nil {
		return nil, err
	}
	s, err := marshal(outs)
	if err != nil {
		return nil, err
	}
	if rolled != nil {
		failed, serr := status.New(codes.Unknown, rolled.Error()).WithDetails(&pulumirpc.ErrorResourceInitFailed{
			Id: req.GetId(), Properties: s, Inputs: req.GetNews(), Reasons: []string{rolled.Error()},
		})
		if serr != nil {
			return nil, serr
		}
		return nil, failed.Err()
	}
	return &pulumirpc.UpdateResponse{Properties: s}, nil
}

// Read returns the resource as the state has it (a refresh changes nothing), except a
// managed node group, which reads what its nodes were last launched from; for an import
// (no state yet) it reads what the account holds: only the EC2 Spot service-linked role,
// which the program adopts when the account has it.
func (p *Provider) Read(_ context.Context, req *pulumirpc.ReadRequest) (*pulumirpc.ReadResponse, error) {
	typ, name := urnParts(req.GetUrn())
	resp := &pulumirpc.ReadResponse{Id: req.GetId(), Properties: req.GetProperties(), Inputs: req.GetInputs()}
	var err error
	switch {
	case len(req.GetProperties().GetFields()) == 0:
		resp, err = p.importRead(typ, req.GetId())
	case typ == nodeGroupType:
		resp.Properties, err = p.readNodeGroup(req.GetId(), req.GetProperties())
	}
	p.record(Call{Method: "Read", Type: typ, Name: name, URN: req.GetUrn()}, err)
	return resp, err
}

func (p *Provider) importRead(typ, id string) (*pulumirpc.ReadResponse, error) {
	if typ != "aws:iam/serviceLinkedRole:ServiceLinkedRole" || id != SpotRoleArn || !p.cloud.spotRoleExists() {
		return nil, fmt.Errorf("fakeaws: cannot import %s %s: the fake account holds only the EC2 Spot service-linked role", typ, id)
	}
	in := resource.PropertyMap{"awsServiceName": resource.NewProperty("spot.amazonaws.com")}
	outs := in.Copy()
	outs["name"], outs["arn"], outs["path"] = resource.NewProperty(SpotRoleName), resource.NewProperty(SpotRoleArn), resource.NewProperty(SpotRolePath)
	props, err := marshal(outs)
	if err != nil {
		return nil, err
	}
	inputs, err := marshal(in)
	return &pulumirpc.ReadResponse{Id: id, Properties: props, Inputs: inputs}, err
}

// Delete forgets the resource (and remembers what AWS would: a deleted queue's name).
func (p *Provider) Delete(_ context.Context, req *pulumirpc.DeleteRequest) (*emptypb.Empty, error) {
	typ, name := urnParts(req.GetUrn())
	props, err := unmarshal(req.GetProperties())
	if err == nil {
		err = p.cloud.Delete(typ, req.GetId(), props)
	}
	p.record(Call{Method: "Delete", Type: typ, Name: name, URN: req.GetUrn()}, err)
	if err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// Cancel has nothing in flight to stop.
func (p *Provider) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

// ConfigEnv names the environment variable that points the fake's executables (the plugin
// and the CLI stand-ins of hack/fakeaws) at their Config file.
const ConfigEnv = "LUX_FAKEAWS_CONFIG"

// Config is what the e2e tells the fake's executables.
type Config struct {
	Cloud Cloud `json:"cloud"`
	// Log receives every call, one JSON Call per line.
	Log string `json:"log"`
	// ClientCert and ClientKey are PEM files: the credential `aws eks get-token` hands out
	// (the local API server's admin client certificate).
	ClientCert string `json:"clientCert"`
	ClientKey  string `json:"clientKey"`
	// Kubeconfig is the admin kubeconfig of the API server that plays the EKS cluster, where
	// the managed node group's nodes run ("": an update replaces no node).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// EvictionTimeout is how long a node group update's drain retries refused evictions
	// before it fails with PodEvictionFailure (EKS: 15 minutes; a Go duration).
	EvictionTimeout string `json:"evictionTimeout,omitempty"`
}

// LoadConfig reads the Config that ConfigEnv names.
func LoadConfig() (Config, error) {
	var c Config
	path := os.Getenv(ConfigEnv)
	if path == "" {
		return c, fmt.Errorf("%s is not set: the fake AWS runs only inside the e2e (make e2e)", ConfigEnv)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Record appends a call to the log of c (used by the CLI stand-ins).
func (c Config) Record(call Call) { NewProvider(c.Cloud, c.Log).record(call, nil) }
