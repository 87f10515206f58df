// Package fakeaws is the AWS that lux-gpu-ci's tests run against. For every resource type the
// program and pulumi-eks create it computes the outputs AWS would (IDs, ARNs, the EKS
// endpoint and CA, ...), and for every data source they read it gives an answer. Anything
// else is an error naming the token, so a new resource type or invoke cannot slip past.
//
// It has one implementation and two users: the unit tests' mocks (internal/testsupport/mockstack), and
// the e2e's pulumi-resource-aws plugin (Provider, built by hack/fakeaws), which the real
// Pulumi engine and the real pulumi-eks component talk to. What the program sees is the same
// in both.
package fakeaws

import (
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
)

// Stand-in values for the account and its EKS clusters.
const (
	Account = "123456789012"
	// ClusterSG is the security group EKS creates for every cluster.
	ClusterSG = "sg-0cluster"
	// CallerArn is the identity running `pulumi up`.
	CallerArn = "arn:aws:iam::" + Account + ":user/ci"
)

// AutonameSuffix is what the fake appends to a namePrefix (the provider appends a timestamp
// and a counter, 26 characters).
const AutonameSuffix = "20261203000000000000000001"

// FakeCA is the stand-in certificate authority data of an EKS cluster (base64, as EKS
// gives it).
var FakeCA = base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"))

// FakeEndpoint is the stand-in EKS API endpoint for a region.
func FakeEndpoint(region string) string {
	return "https://0123456789ABCDEF.gr7." + region + ".eks.amazonaws.com"
}

// AZ is an availability zone: its name and its account-independent ID.
type AZ struct {
	Name string `json:"name"`
	ID   string `json:"id"`
}

// Cloud is one fake AWS account in one region.
type Cloud struct {
	Region string `json:"region"`
	// AZs are the region's zones as getAvailabilityZones lists them (deliberately not sorted
	// by name). Default: four zones a, d, c, b.
	AZs []AZ `json:"azs,omitempty"`
	// EKSEndpoint and EKSCA are what every EKS cluster reports; the e2e points them at its
	// local kube-apiserver. Default: FakeEndpoint and FakeCA.
	EKSEndpoint string `json:"eksEndpoint,omitempty"`
	EKSCA       string `json:"eksCA,omitempty"`
	// CallerArn is who runs `pulumi up` (getCallerIdentity). Default: CallerArn.
	CallerArn string `json:"callerArn,omitempty"`
	// Offerings are the instance types each zone offers, by zone name; a zone not listed
	// offers every type (nil: every zone offers every type).
	Offerings map[string][]string `json:"offerings,omitempty"`
	// Clusters are the EKS clusters the account already has (getClusters), besides the ones
	// the stack creates; NodeGroups, the managed node groups they run.
	Clusters   []string    `json:"clusters,omitempty"`
	NodeGroups []NodeGroup `json:"nodeGroups,omitempty"`
	// SpotRoleExists: the account already has the EC2 Spot service-linked role, so creating
	// it again fails, as in AWS.
	SpotRoleExists bool `json:"spotRoleExists,omitempty"`
	// StateDir keeps what AWS remembers between plugin processes (recently deleted queue
	// names, the spot role); "" keeps it in memory.
	StateDir string `json:"stateDir,omitempty"`

	memory *accountState
}

func (c *Cloud) region() string {
	if c.Region == "" {
		return "us-west-2"
	}
	return c.Region
}

func (c *Cloud) azs() []AZ {
	if c.AZs != nil {
		return c.AZs
	}
	r := c.region()
	short := regionShort(r)
	var out []AZ
	for i, l := range []string{"a", "d", "c", "b"} {
		out = append(out, AZ{Name: r + l, ID: fmt.Sprintf("%s-az%d", short, []int{1, 4, 3, 2}[i])})
	}
	return out
}

// regionShort is the zone-ID prefix of a region: us-west-2 → usw2.
func regionShort(region string) string {
	parts := strings.Split(region, "-")
	if len(parts) != 3 {
		return region
	}
	dir := map[string]string{"north": "n", "south": "s", "east": "e", "west": "w", "central": "c", "northeast": "ne", "southeast": "se", "northwest": "nw", "southwest": "sw"}[parts[1]]
	return parts[0] + dir + parts[2]
}

// res is one resource being created or updated.
type res struct {
	cloud   *Cloud
	typ     string
	name    string // logical name
	id      string
	in      resource.PropertyMap
	preview bool
}

// str returns a string input, or "".
func (r res) str(key string) string {
	if v, ok := r.in[resource.PropertyKey(key)]; ok && v.IsString() {
		return v.StringValue()
	}
	return ""
}

// physical is the resource's physical name: the name it was given, else its prefix plus a
// suffix, else its logical name. (The real provider autonames with a random suffix; a stable
// one is what a second `up` with no changes needs.)
func (r res) physical(key string) string {
	if s := r.str(key); s != "" {
		return s
	}
	if prefix := r.str("namePrefix"); prefix != "" {
		return prefix + AutonameSuffix
	}
	return r.name
}

// computed is a value AWS assigns on create: unknown in a preview.
func (r res) computed(v any) resource.PropertyValue {
	if r.preview {
		return resource.MakeComputed(resource.NewStringProperty(""))
	}
	return resource.NewPropertyValue(v)
}

func (r res) arn(service, rest string) resource.PropertyValue {
	region := r.cloud.region()
	if service == "iam" {
		region = ""
	}
	return r.computed(fmt.Sprintf("arn:aws:%s:%s:%s:%s", service, region, Account, rest))
}

// outputs computes a resource type's outputs from its inputs.
type outputs func(r res) map[string]resource.PropertyValue

// types are the resource types the program and pulumi-eks create, with the outputs AWS
// computes for them. A type missing here is an error, not an echo.
var types = map[string]outputs{
	"aws:ec2/vpc:Vpc": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"arn": r.arn("ec2", "vpc/"+r.id), "ownerId": r.computed(Account), "mainRouteTableId": r.computed(r.name + "_main_rt")}
	},
	"aws:ec2/subnet:Subnet": func(r res) map[string]resource.PropertyValue {
		azID := ""
		for _, az := range r.cloud.azs() {
			if az.Name == r.str("availabilityZone") {
				azID = az.ID
			}
		}
		return map[string]resource.PropertyValue{"arn": r.arn("ec2", "subnet/"+r.id), "ownerId": r.computed(Account), "availabilityZoneId": r.computed(azID)}
	},
	"aws:ec2/internetGateway:InternetGateway": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"arn": r.arn("ec2", "internet-gateway/"+r.id), "ownerId": r.computed(Account)}
	},
	"aws:ec2/eip:Eip": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"allocationId": r.computed(r.id), "publicIp": r.computed("203.0.113.10")}
	},
	"aws:ec2/natGateway:NatGateway": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"publicIp": r.computed("203.0.113.10"), "networkInterfaceId": r.computed("eni-nat")}
	},
	"aws:ec2/routeTable:RouteTable": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"arn": r.arn("ec2", "route-table/"+r.id), "ownerId": r.computed(Account)}
	},
	"aws:ec2/routeTableAssociation:RouteTableAssociation": nothing,
	"aws:ec2/securityGroup:SecurityGroup": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"arn": r.arn("ec2", "security-group/"+r.id), "name": resource.NewProperty(r.physical("name")), "ownerId": r.computed(Account)}
	},
	"aws:ec2/securityGroupRule:SecurityGroupRule": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"securityGroupRuleId": r.computed("sgr-" + r.name)}
	},
	"aws:ec2/launchTemplate:LaunchTemplate": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"arn": r.arn("ec2", "launch-template/"+r.id), "name": resource.NewProperty(r.physical("name")), "latestVersion": r.computed(1.0), "defaultVersion": r.computed(1.0)}
	},
	"aws:ec2/tag:Tag": nothing,
	"aws:ec2/vpcEndpoint:VpcEndpoint": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"arn": r.arn("ec2", "vpc-endpoint/"+r.id), "state": r.computed("available"), "prefixListId": r.computed("pl-68a54001")}
	},

	"aws:ecr/pullThroughCacheRule:PullThroughCacheRule": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"registryId": r.computed(Account)}
	},
	"aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"registryId": r.computed(Account)}
	},
	"aws:secretsmanager/secret:Secret": func(r res) map[string]resource.PropertyValue {
		name := r.physical("name")
		return map[string]resource.PropertyValue{"name": resource.NewProperty(name), "arn": r.arn("secretsmanager", "secret:"+name+"-AbCdEf")}
	},
	"aws:secretsmanager/secretVersion:SecretVersion": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"arn": resource.NewProperty(r.str("secretId")), "versionId": r.computed("v-" + r.name)}
	},

	"aws:eks/cluster:Cluster": func(r res) map[string]resource.PropertyValue {
		endpoint, ca := r.cloud.EKSEndpoint, r.cloud.EKSCA
		if endpoint == "" {
			endpoint = FakeEndpoint(r.cloud.region())
		}
		if ca == "" {
			ca = FakeCA
		}
		vpc := resource.PropertyMap{}
		if v, ok := r.in["vpcConfig"]; ok && v.IsObject() {
			vpc = v.ObjectValue().Copy()
		}
		vpc["clusterSecurityGroupId"] = r.computed(ClusterSG)
		vpc["vpcId"] = r.computed("vpc-of-" + r.physical("name"))
		return map[string]resource.PropertyValue{
			"name":                 resource.NewProperty(r.physical("name")),
			"arn":                  r.arn("eks", "cluster/"+r.physical("name")),
			"endpoint":             r.computed(endpoint),
			"certificateAuthority": r.computedObject(resource.PropertyMap{"data": resource.NewProperty(ca)}),
			"vpcConfig":            resource.NewObjectProperty(vpc),
			"status":               r.computed("ACTIVE"),
			"platformVersion":      r.computed("eks.1"),
		}
	},
	"aws:eks/nodeGroup:NodeGroup": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"arn": r.arn("eks", "nodegroup/"+r.str("clusterName")+"/"+r.physical("nodeGroupName")), "nodeGroupName": resource.NewProperty(r.physical("nodeGroupName")), "status": r.computed("ACTIVE")}
	},
	"aws:eks/addon:Addon": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"arn": r.arn("eks", "addon/"+r.str("clusterName")+"/"+r.str("addonName"))}
	},
	"aws:eks/accessEntry:AccessEntry": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"accessEntryArn": r.arn("eks", "access-entry/"+r.str("clusterName")+"/"+r.name)}
	},
	"aws:eks/accessPolicyAssociation:AccessPolicyAssociation": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"associatedAt": r.computed("2026-01-01T00:00:00Z")}
	},
	"aws:eks/podIdentityAssociation:PodIdentityAssociation": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"associationArn": r.arn("eks", "podidentityassociation/"+r.str("clusterName")+"/"+r.id), "associationId": r.computed(r.id)}
	},

	"aws:iam/role:Role": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"name": resource.NewProperty(r.physical("name")), "arn": r.arn("iam", "role/"+r.physical("name")), "uniqueId": r.computed("AROA" + strings.ToUpper(r.name))}
	},
	"aws:iam/policy:Policy": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"name": resource.NewProperty(r.physical("name")), "arn": r.arn("iam", "policy/"+r.physical("name")), "policyId": r.computed("ANPA" + strings.ToUpper(r.name))}
	},
	"aws:iam/rolePolicyAttachment:RolePolicyAttachment": nothing,
	// IAM names a provider by its URL without the scheme (the deploy identity's, identity/).
	"aws:iam/openIdConnectProvider:OpenIdConnectProvider": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"arn": r.arn("iam", "oidc-provider/"+strings.TrimPrefix(r.str("url"), "https://"))}
	},
	"aws:iam/instanceProfile:InstanceProfile": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"name": resource.NewProperty(r.physical("name")), "arn": r.arn("iam", "instance-profile/"+r.physical("name"))}
	},
	"aws:iam/serviceLinkedRole:ServiceLinkedRole": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"name": r.computed(SpotRoleName), "arn": r.computed(SpotRoleArn), "path": r.computed(SpotRolePath)}
	},

	"aws:sqs/queue:Queue": func(r res) map[string]resource.PropertyValue {
		name := r.physical("name")
		return map[string]resource.PropertyValue{
			"name": resource.NewProperty(name),
			"arn":  r.arn("sqs", name),
			"url":  r.computed(fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", r.cloud.region(), Account, name)),
		}
	},
	"aws:sqs/queuePolicy:QueuePolicy": nothing,
	"aws:cloudwatch/eventRule:EventRule": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"name": resource.NewProperty(r.physical("name")), "arn": r.arn("events", "rule/"+r.physical("name"))}
	},
	"aws:cloudwatch/eventTarget:EventTarget": nothing,
	"aws:s3/bucketV2:BucketV2": func(r res) map[string]resource.PropertyValue {
		name := r.str("bucket")
		if name == "" {
			name = r.str("bucketPrefix") + AutonameSuffix
		}
		return map[string]resource.PropertyValue{
			"bucket": resource.NewProperty(name), "arn": r.computed("arn:aws:s3:::" + name),
			"bucketRegionalDomainName": r.computed(name + ".s3." + r.cloud.region() + ".amazonaws.com"),
			"region":                   r.computed(r.cloud.region()),
		}
	},
	// An object: S3's ETag of a single-part upload with SSE-S3 is its content's MD5 (S3 user
	// guide, "Checking object integrity"), read from the asset's file where there is one.
	"aws:s3/bucketObjectv2:BucketObjectv2": func(r res) map[string]resource.PropertyValue {
		out := map[string]resource.PropertyValue{"key": resource.NewProperty(r.str("key")), "versionId": r.computed("")}
		if src, ok := r.in["source"]; ok && src.IsAsset() && src.AssetValue().Path != "" {
			if b, err := os.ReadFile(src.AssetValue().Path); err == nil {
				out["etag"] = r.computed(fmt.Sprintf("%x", md5.Sum(b)))
			}
		}
		return out
	},
	"aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock":                                     nothing,
	"aws:s3/bucketOwnershipControls:BucketOwnershipControls":                                     nothing,
	"aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2": nothing,
	"aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2":                       nothing,
	"aws:s3/bucketPolicy:BucketPolicy":                                                           nothing,
	"aws:iam/rolePolicy:RolePolicy":                                                              nothing,
	"aws:budgets/budget:Budget": func(r res) map[string]resource.PropertyValue {
		return map[string]resource.PropertyValue{"arn": r.computed("arn:aws:budgets::" + Account + ":budget/" + r.physical("name"))}
	},
}

func nothing(res) map[string]resource.PropertyValue { return nil }

func (r res) computedObject(m resource.PropertyMap) resource.PropertyValue {
	if r.preview {
		return resource.MakeComputed(resource.NewStringProperty(""))
	}
	return resource.NewObjectProperty(m)
}

// Knows tells whether t is a resource type the fake can create.
func Knows(t string) bool {
	_, ok := types[t]
	return ok
}

// Types lists the resource types the fake knows, sorted.
func Types() []string {
	out := make([]string, 0, len(types))
	for t := range types {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// ID is the ID the fake gives a resource: its logical name with "_id", stable across runs
// and readable in test failures.
func ID(logicalName string) string { return logicalName + "_id" }

// Create returns the ID and outputs of a new resource: its inputs plus what AWS computes.
// In a preview the computed values are unknown and the ID empty, as the real provider does.
func (c *Cloud) Create(typ, name string, inputs resource.PropertyMap, preview bool) (string, resource.PropertyMap, error) {
	id := ID(name)
	if preview {
		id = ""
	}
	outs, err := c.outputs(typ, name, id, inputs, preview)
	if err == nil {
		err = checkRequest(c, typ, inputs)
	}
	if err == nil {
		err = c.refuse(typ, res{cloud: c, typ: typ, name: name, in: inputs}, preview)
	}
	if err == nil && !preview {
		err = c.versionSkew(typ, nil, inputs)
	}
	if err == nil && !preview {
		err = c.created(typ, id, outs)
	}
	if err != nil {
		return "", nil, err
	}
	return id, outs, nil
}

// Update returns the outputs of an updated resource (olds are its outputs before): the new
// inputs plus what AWS computes. The resource exists, so what it computed is known, in a
// preview too, except what the update itself changes: a launch template's new version.
func (c *Cloud) Update(typ, name, id string, olds, news resource.PropertyMap, preview bool) (resource.PropertyMap, error) {
	if err := checkRequest(c, typ, news); err != nil {
		return nil, err
	}
	outs, err := c.outputs(typ, name, id, news, false)
	if err != nil {
		return nil, err
	}
	if !preview {
		if err := c.versionSkew(typ, olds, news); err != nil {
			return nil, err
		}
		if err := c.versionChanged(typ, outs); err != nil {
			return nil, err
		}
	}
	if typ == "aws:ec2/launchTemplate:LaunchTemplate" && olds["latestVersion"].IsNumber() {
		outs["latestVersion"] = launchTemplateVersion(olds, news, preview)
	}
	return outs, nil
}

// launchTemplateVersion is a launch template's latest version after an update
// (terraform-provider-aws v5.100.0, ec2_launch_template.go): the update makes a new version
// for a change of anything but its name, default version and resource tags
// (resourceLaunchTemplateUpdate's updateKeys), and the plan shows it unknown for a change of
// anything but its name, description and default version (CustomizeDiff's ComputedIf) — a
// change of tags alone too, though it makes no version.
func launchTemplateVersion(olds, news resource.PropertyMap, preview bool) resource.PropertyValue {
	latest := olds["latestVersion"]
	newVersion, unknown := false, false
	for k := range changedInputs(olds, news, "arn", "name", "latestVersion", "defaultVersion") {
		switch k {
		case "name", "defaultVersion", "updateDefaultVersion", "tags", "tagsAll":
		default:
			newVersion = true
		}
		switch k {
		case "name", "namePrefix", "description", "defaultVersion", "updateDefaultVersion":
		default:
			unknown = true
		}
	}
	switch {
	case preview && unknown:
		return resource.MakeComputed(resource.NewProperty(""))
	case !preview && newVersion:
		return resource.NewProperty(latest.NumberValue() + 1)
	}
	return latest
}

// changedInputs are the inputs news sets differently from olds (a resource's outputs: its
// inputs and what AWS computed, the computed keys).
func changedInputs(olds, news resource.PropertyMap, computed ...resource.PropertyKey) map[resource.PropertyKey]bool {
	changed := map[resource.PropertyKey]bool{}
	for k, v := range news {
		if !v.DeepEquals(olds[k]) {
			changed[k] = true
		}
	}
	for k := range olds {
		if _, ok := news[k]; !ok && !slices.Contains(computed, k) {
			changed[k] = true
		}
	}
	return changed
}

func (c *Cloud) outputs(typ, name, id string, inputs resource.PropertyMap, preview bool) (resource.PropertyMap, error) {
	compute, ok := types[typ]
	if !ok {
		return nil, fmt.Errorf("fakeaws: resource type %s is not one the fake knows (%s): add its outputs to internal/testsupport/fakeaws", typ, strings.Join(Types(), ", "))
	}
	outs := inputs.Copy()
	for k, v := range compute(res{cloud: c, typ: typ, name: name, id: id, in: inputs, preview: preview}) {
		outs[resource.PropertyKey(k)] = v
	}
	return outs, nil
}
