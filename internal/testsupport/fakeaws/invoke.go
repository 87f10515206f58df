package fakeaws

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
)

// invokes are the data sources the program and pulumi-eks read, with the fake's answers.
var invokes = map[string]func(c *Cloud, args resource.PropertyMap) (map[string]any, error){
	"aws:index/getAvailabilityZones:getAvailabilityZones": func(c *Cloud, args resource.PropertyMap) (map[string]any, error) {
		excludedNames, excludedIDs := stringList(args["excludeNames"]), stringList(args["excludeZoneIds"])
		var names, ids []any
		for _, az := range c.azs() {
			if slices.Contains(excludedNames, az.Name) || slices.Contains(excludedIDs, az.ID) {
				continue
			}
			names, ids = append(names, az.Name), append(ids, az.ID)
		}
		return map[string]any{"names": names, "zoneIds": ids, "id": c.region()}, nil
	},
	// The account's subnets, filtered by tag (the only filter the program uses).
	"aws:ec2/getSubnets:getSubnets": func(c *Cloud, args resource.PropertyMap) (map[string]any, error) {
		st, err := c.read()
		if err != nil {
			return nil, err
		}
		ids := []any{}
		for _, id := range slices.Sorted(maps.Keys(st.Subnets)) {
			match := true
			for _, f := range args["filters"].ArrayValue() {
				name := str(f.ObjectValue()["name"])
				key, ok := strings.CutPrefix(name, "tag:")
				if !ok {
					return nil, fmt.Errorf("fakeaws: getSubnets filter %q is not one the fake knows", name)
				}
				match = match && slices.Contains(stringList(f.ObjectValue()["values"]), st.Subnets[id].Tags[key])
			}
			if match {
				ids = append(ids, id)
			}
		}
		return map[string]any{"ids": ids, "id": c.region()}, nil
	},
	"aws:ec2/getSubnet:getSubnet": func(c *Cloud, args resource.PropertyMap) (map[string]any, error) {
		st, err := c.read()
		if err != nil {
			return nil, err
		}
		id := str(args["id"])
		sn, ok := st.Subnets[id]
		if !ok {
			return nil, fmt.Errorf("reading EC2 Subnet (%s): InvalidSubnetID.NotFound", id)
		}
		tags := map[string]any{}
		for k, v := range sn.Tags {
			tags[k] = v
		}
		return map[string]any{"id": id, "availabilityZone": sn.AZ, "availabilityZoneId": sn.AZID, "tags": tags}, nil
	},
	"aws:index/getPartition:getPartition": func(c *Cloud, _ resource.PropertyMap) (map[string]any, error) {
		return map[string]any{"partition": "aws", "dnsSuffix": "amazonaws.com", "reverseDnsPrefix": "com.amazonaws", "id": "aws"}, nil
	},
	"aws:index/getCallerIdentity:getCallerIdentity": func(c *Cloud, _ resource.PropertyMap) (map[string]any, error) {
		return map[string]any{"accountId": Account, "arn": c.caller(), "userId": "AIDAEXAMPLE", "id": Account}, nil
	},
	// The IAM identity behind a session: an assumed role's role ARN, or the ARN itself.
	"aws:iam/getSessionContext:getSessionContext": func(c *Cloud, args resource.PropertyMap) (map[string]any, error) {
		arn := str(args["arn"])
		out := map[string]any{"arn": arn, "issuerArn": arn, "id": arn}
		if _, rest, ok := strings.Cut(arn, ":assumed-role/"); ok {
			role, session, _ := strings.Cut(rest, "/")
			out["issuerArn"] = "arn:aws:iam::" + Account + ":role/" + role
			out["issuerName"], out["sessionName"] = role, session
		}
		return out, nil
	},
	// Which zones offer which instance types (location type availability-zone).
	"aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": func(c *Cloud, args resource.PropertyMap) (map[string]any, error) {
		if lt := str(args["locationType"]); lt != "availability-zone" {
			return nil, fmt.Errorf("the fake answers for locationType availability-zone only, not %q", lt)
		}
		var wanted []string
		for _, f := range args["filters"].ArrayValue() {
			if str(f.ObjectValue()["name"]) == "instance-type" {
				wanted = append(wanted, stringList(f.ObjectValue()["values"])...)
			}
		}
		var typesOut, locations, locationTypes []any
		for _, az := range c.azs() {
			offered, listed := c.Offerings[az.Name]
			for _, t := range wanted {
				if !listed || slices.Contains(offered, t) {
					typesOut, locations, locationTypes = append(typesOut, t), append(locations, az.Name), append(locationTypes, "availability-zone")
				}
			}
		}
		return map[string]any{"instanceTypes": typesOut, "locations": locations, "locationTypes": locationTypes, "locationType": "availability-zone", "id": c.region()}, nil
	},
	// IAM roles by path prefix and name pattern; the account's only role the fake knows is
	// the EC2 Spot service-linked role, when it exists.
	"aws:iam/getRoles:getRoles": func(c *Cloud, args resource.PropertyMap) (map[string]any, error) {
		out := map[string]any{"names": []any{}, "arns": []any{}, "id": "roles"}
		if c.spotRoleExists() && strings.HasPrefix(SpotRolePath, str(args["pathPrefix"])) {
			out["names"] = []any{SpotRoleName}
			out["arns"] = []any{SpotRoleArn}
		}
		return out, nil
	},
	"aws:eks/getClusters:getClusters": func(c *Cloud, _ resource.PropertyMap) (map[string]any, error) {
		st, err := c.read()
		if err != nil {
			return nil, err
		}
		names := []any{}
		for _, n := range append(slices.Clone(c.Clusters), st.Clusters...) {
			names = append(names, n)
		}
		return map[string]any{"names": names, "id": c.region()}, nil
	},
	"aws:eks/getNodeGroups:getNodeGroups": func(c *Cloud, args resource.PropertyMap) (map[string]any, error) {
		groups, err := c.nodeGroups()
		if err != nil {
			return nil, err
		}
		cluster := str(args["clusterName"])
		names := []any{}
		for _, g := range groups {
			if g.Cluster == cluster {
				names = append(names, g.Name)
			}
		}
		return map[string]any{"clusterName": cluster, "names": names, "id": cluster}, nil
	},
	"aws:eks/getNodeGroup:getNodeGroup": func(c *Cloud, args resource.PropertyMap) (map[string]any, error) {
		groups, err := c.nodeGroups()
		if err != nil {
			return nil, err
		}
		cluster, name := str(args["clusterName"]), str(args["nodeGroupName"])
		for _, g := range groups {
			if g.Cluster == cluster && g.Name == name {
				types, labels, subnets := []any{}, map[string]any{}, []any{}
				for _, t := range g.InstanceTypes {
					types = append(types, t)
				}
				for _, s := range g.SubnetIDs {
					subnets = append(subnets, s)
				}
				for k, v := range g.Labels {
					labels[k] = v
				}
				return map[string]any{"clusterName": cluster, "nodeGroupName": name, "instanceTypes": types, "amiType": g.AMIType, "subnetIds": subnets, "labels": labels, "id": cluster + ":" + name}, nil
			}
		}
		return nil, fmt.Errorf("reading EKS Node Group (%s:%s): ResourceNotFoundException: No node group found for name: %s", cluster, name, name)
	},
	"aws:index/getRegion:getRegion": func(c *Cloud, _ resource.PropertyMap) (map[string]any, error) {
		return map[string]any{"name": c.region(), "id": c.region(), "endpoint": "ec2." + c.region() + ".amazonaws.com", "description": c.region()}, nil
	},
	"aws:iam/getPolicyDocument:getPolicyDocument": func(c *Cloud, args resource.PropertyMap) (map[string]any, error) {
		doc, err := RenderPolicy(args.Mappable())
		if err != nil {
			return nil, err
		}
		return map[string]any{"json": doc, "minifiedJson": doc, "id": "doc"}, nil
	},
	"aws:eks/getAddonVersion:getAddonVersion": func(c *Cloud, args resource.PropertyMap) (map[string]any, error) {
		name := str(args["addonName"])
		k8s := str(args["kubernetesVersion"])
		return map[string]any{"addonName": name, "kubernetesVersion": k8s, "version": DefaultAddonVersion(name, k8s), "id": name}, nil
	},
}

// The EC2 Spot service-linked role, as IAM names it.
const (
	SpotRoleName = "AWSServiceRoleForEC2Spot"
	SpotRolePath = "/aws-service-role/spot.amazonaws.com/"
	SpotRoleArn  = "arn:aws:iam::" + Account + ":role" + SpotRolePath + SpotRoleName
)

func (c *Cloud) caller() string {
	if c.CallerArn != "" {
		return c.CallerArn
	}
	return CallerArn
}

// DefaultAddonVersion is the version EKS reports as an add-on's default for a Kubernetes
// version: one of its own per minor, as EKS publishes them.
func DefaultAddonVersion(addon, kubernetesVersion string) string {
	return "v-eks-default-" + addon + "-k8s" + kubernetesVersion
}

// Invoke answers a data source.
func (c *Cloud) Invoke(token string, args resource.PropertyMap) (resource.PropertyMap, error) {
	f, ok := invokes[token]
	if !ok {
		known := make([]string, 0, len(invokes))
		for t := range invokes {
			known = append(known, t)
		}
		slices.Sort(known)
		return nil, fmt.Errorf("fakeaws: invoke %s is not one the fake knows (%s): add it to internal/testsupport/fakeaws", token, strings.Join(known, ", "))
	}
	out, err := f(c, args)
	if err != nil {
		return nil, fmt.Errorf("fakeaws: %s: %w", token, err)
	}
	return resource.NewPropertyMapFromMap(out), nil
}

func str(v resource.PropertyValue) string {
	if v.IsString() {
		return v.StringValue()
	}
	return ""
}

func stringList(v resource.PropertyValue) []string {
	var out []string
	if v.IsArray() {
		for _, x := range v.ArrayValue() {
			out = append(out, str(x))
		}
	}
	return out
}
