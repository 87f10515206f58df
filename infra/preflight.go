package infra

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/eks"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// What the AWS layer looks up in the account before it creates anything, so that a stack
// the account cannot hold fails with a config error and changes nothing.

// eksUnsupportedZoneIDs are the zones EKS refuses for a cluster's subnets (EKS user guide,
// "Subnet requirements for clusters"). They are IDs, not names: names map to different
// physical zones in each account.
var eksUnsupportedZoneIDs = []string{"use1-az3", "usw1-az2", "cac1-az3"}

// Zone is an availability zone the network uses.
type Zone struct{ Name, ID string }

func (z Zone) String() string { return z.Name + " (" + z.ID + ")" }

// chooseZones picks n zones, by name, among those EKS accepts that offer at least one
// instance type of every GPU pool (EC2's instance type offerings): a pool can then launch
// in every zone its nodes' subnets are in. It logs which zones it chose and why it skipped
// the others.
//
// The choice is made once: a stack whose subnets exist keeps their zones (liveZones), since
// moving a subnet replaces it, EKS keeps the zones a cluster was created in and a managed node
// group cannot change its subnets — a moved choice (a new pool, an instance type a zone earlier
// in the order offers, azCount) would wedge every later `up`. What no longer fits the kept
// zones is a config error that says what to change.
func chooseZones(ctx *pulumi.Context, cluster string, n int, pools []config.GPUPool) ([]Zone, error) {
	state := "available"
	azs, err := aws.GetAvailabilityZones(ctx, &aws.GetAvailabilityZonesArgs{
		State:          &state,
		ExcludeZoneIds: eksUnsupportedZoneIDs,
		Filters:        []aws.GetAvailabilityZonesFilter{{Name: "opt-in-status", Values: []string{"opt-in-not-required"}}},
	})
	if err != nil {
		return nil, fmt.Errorf("looking up availability zones: %w", err)
	}
	var types []string
	for _, p := range pools {
		types = append(types, p.InstanceTypes...)
	}
	slices.Sort(types)
	types = slices.Compact(types)
	locationType := "availability-zone"
	offers, err := ec2.GetInstanceTypeOfferings(ctx, &ec2.GetInstanceTypeOfferingsArgs{
		LocationType: &locationType,
		Filters:      []ec2.GetInstanceTypeOfferingsFilter{{Name: "instance-type", Values: types}},
	})
	if err != nil {
		return nil, fmt.Errorf("looking up where the GPU instance types are offered: %w", err)
	}
	offered := map[string]map[string]bool{}
	for i, zone := range offers.Locations {
		if offered[zone] == nil {
			offered[zone] = map[string]bool{}
		}
		offered[zone][offers.InstanceTypes[i]] = true
	}

	live, err := liveZones(ctx, cluster)
	if err != nil {
		return nil, err
	}
	if len(live) > 0 {
		return keepZones(ctx, live, n, pools, offered)
	}

	var all []Zone
	for i, name := range azs.Names {
		all = append(all, Zone{Name: name, ID: azs.ZoneIds[i]})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	var eligible []Zone
	var skipped []string
	for _, z := range all {
		var lacking []string
		for _, p := range pools {
			if !slices.ContainsFunc(p.InstanceTypes, func(t string) bool { return offered[z.Name][t] }) {
				lacking = append(lacking, fmt.Sprintf("none of pool %s's %s", p.Name, strings.Join(p.InstanceTypes, ", ")))
			}
		}
		if len(lacking) > 0 {
			skipped = append(skipped, fmt.Sprintf("%s offers %s", z, strings.Join(lacking, "; ")))
			continue
		}
		eligible = append(eligible, z)
	}
	if len(eligible) < n {
		return nil, fmt.Errorf("%s:%s: the region has %d availability zones EKS accepts that offer every pool's GPU types (%v), fewer than the %d asked for%s (fix: pulumi config set %s %d, or add instance types to the pools)",
			config.Project, config.KeyAzCount, len(eligible), eligible, n, skippedNote(skipped), config.KeyAzCount, max(len(eligible), 2))
	}
	chosen := eligible[:n]
	why := fmt.Sprintf("availability zones %v: EKS accepts them and each offers a GPU type of every pool", chosen)
	if len(skipped) > 0 {
		why += skippedNote(skipped)
	}
	if err := ctx.Log.Info(why, nil); err != nil {
		return nil, err
	}
	return chosen, nil
}

// liveZones are the zones the stack's subnets are in (tagged kubernetes.io/cluster/<cluster>),
// by name: none before the first `up` and after a destroy.
func liveZones(ctx *pulumi.Context, cluster string) ([]Zone, error) {
	subnets, err := ec2.GetSubnets(ctx, &ec2.GetSubnetsArgs{Filters: []ec2.GetSubnetsFilter{{Name: "tag:kubernetes.io/cluster/" + cluster, Values: []string{"shared"}}}})
	if err != nil {
		return nil, fmt.Errorf("looking up the stack's subnets: %w", err)
	}
	var zones []Zone
	for _, id := range subnets.Ids {
		sn, err := ec2.LookupSubnet(ctx, &ec2.LookupSubnetArgs{Id: &id})
		if err != nil {
			return nil, fmt.Errorf("looking up subnet %s: %w", id, err)
		}
		if z := (Zone{Name: sn.AvailabilityZone, ID: sn.AvailabilityZoneId}); !slices.Contains(zones, z) {
			zones = append(zones, z)
		}
	}
	sort.Slice(zones, func(i, j int) bool { return zones[i].Name < zones[j].Name })
	return zones, nil
}

// keepZones keeps the zones a live stack's subnets are in, or says what cannot be kept.
func keepZones(ctx *pulumi.Context, live []Zone, n int, pools []config.GPUPool, offered map[string]map[string]bool) ([]Zone, error) {
	if len(live) != n {
		return nil, fmt.Errorf("%s:%s: the stack's subnets are in %d availability zones %v; %d would move them, which replaces the network and the cluster (EKS keeps the zones a cluster was created in) (fix: pulumi config set %s %d; a different zone count needs a new stack)",
			config.Project, config.KeyAzCount, len(live), live, n, config.KeyAzCount, len(live))
	}
	var problems []string
	for _, z := range live {
		for _, p := range pools {
			if !slices.ContainsFunc(p.InstanceTypes, func(t string) bool { return offered[z.Name][t] }) {
				problems = append(problems, fmt.Sprintf("zone %s, where the stack's subnets are, offers none of pool %s's %s", z, p.Name, strings.Join(p.InstanceTypes, ", ")))
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s:%s: %s; the stack keeps its zones (moving a subnet replaces the network and the cluster) (fix: give each pool an instance type every one of %v offers)",
			config.Project, config.KeyGPUPools, strings.Join(problems, "; "), live)
	}
	if err := ctx.Log.Info(fmt.Sprintf("availability zones %v: the stack's subnets are there, and zones are kept once chosen", live), nil); err != nil {
		return nil, err
	}
	return live, nil
}

func skippedNote(skipped []string) string {
	if len(skipped) == 0 {
		return ""
	}
	return "; skipped: " + strings.Join(skipped, "; ")
}

// clusterExists tells whether the region has the stack's EKS cluster: a live stack, whose
// creator's access entry is settled and whose system node group exists.
func clusterExists(ctx *pulumi.Context, cluster string) (bool, error) {
	existing, err := eks.GetClusters(ctx)
	if err != nil {
		return false, fmt.Errorf("looking up the region's EKS clusters: %w", err)
	}
	return slices.Contains(existing.Names, cluster), nil
}

// checkAdmins refuses an admin principal that is the identity creating the cluster: EKS makes
// the creator an admin itself (pulumi-eks sets bootstrapClusterCreatorAdminPermissions), and a
// second access entry for the same principal fails the update with ResourceInUseException.
// Once the cluster exists, whoever runs `up` may be a listed admin.
func checkAdmins(ctx *pulumi.Context, cluster string, live bool, admins []admin, callerArn string) error {
	if len(admins) == 0 || live {
		return nil
	}
	session, err := iam.GetSessionContext(ctx, &iam.GetSessionContextArgs{Arn: callerArn})
	if err != nil {
		return fmt.Errorf("looking up who runs this update: %w", err)
	}
	for _, a := range admins {
		if a.Arn != session.IssuerArn {
			continue
		}
		fix := fmt.Sprintf("remove it from %s:%s in Pulumi.<stack>.yaml; list only other principals", config.Project, a.Key)
		if a.Key == config.KeyDeployRoleArn {
			// deploy.yml creating the cluster: after a destroy, the first up is a person's.
			fix = fmt.Sprintf("create the cluster with make bootstrap (or pulumi up as yourself), then deploy.yml deploys it; or unset %s:%s for this one up", config.Project, a.Key)
		}
		return fmt.Errorf("%s:%s: %q is the identity creating cluster %s; EKS makes the identity that creates the cluster an admin itself, and a second access entry for it fails with ResourceInUseException (fix: %s)",
			config.Project, a.Key, session.IssuerArn, cluster, fix)
	}
	return nil
}

// admin is a principal the stack gives a cluster-admin access entry, with the key that names it.
type admin struct{ Key, Arn string }

// adminsOf are the stack's admin principals: adminPrincipals, and the deploy role.
func adminsOf(cfg *config.Config) []admin {
	var out []admin
	for _, a := range cfg.AdminPrincipals {
		out = append(out, admin{config.KeyAdminPrincipals, a})
	}
	if cfg.DeployRoleArn != "" {
		out = append(out, admin{config.KeyDeployRoleArn, cfg.DeployRoleArn})
	}
	return out
}

// keepSystemNodes refuses what would replace the live system node group: a new instance type,
// AMI type or subnets (natMode moves the nodes between private and public subnets);
// pulumi-aws replaces a node group for any of them, EKS having no update for them. EKS
// deletes the old group's nodes with a drain it gives up on after 5 minutes ("Delete a
// managed node group"), so a container-form job running there would be killed; an update
// that replaces the nodes in place (a new version or launch template) waits for the jobs
// instead. replaceSystemNodes lets it through, for a deploy when no container-form job runs.
//
// A system group that already is what the stack asks for is the stack's (a replacement that
// failed half-way leaves the old group beside it, which the next up deletes): then nothing
// is refused.
func keepSystemNodes(ctx *pulumi.Context, cluster string, live bool, want config.SystemNodes, amiType string, nat bool) error {
	if !live {
		return nil
	}
	groups, err := eks.GetNodeGroups(ctx, &eks.GetNodeGroupsArgs{ClusterName: cluster})
	if err != nil {
		return fmt.Errorf("looking up cluster %s's node groups: %w", cluster, err)
	}
	wantTier := map[bool]string{true: "private", false: "public"}[nat]
	type mismatch struct {
		name, key, fix string
		changes        []string
	}
	var mismatches []mismatch
	for _, name := range groups.Names {
		g, err := eks.LookupNodeGroup(ctx, &eks.LookupNodeGroupArgs{ClusterName: cluster, NodeGroupName: name})
		if err != nil {
			return fmt.Errorf("looking up node group %s: %w", name, err)
		}
		if g.Labels[wellknown.SystemNodeLabel] != wellknown.SystemNodeValue {
			continue
		}
		m := mismatch{name: name, key: config.KeyReplaceSystemNodes}
		running := strings.Join(g.InstanceTypes, ", ")
		if !slices.Equal(g.InstanceTypes, []string{want.InstanceType}) {
			m.changes = append(m.changes, fmt.Sprintf("instance type %s → %s", running, want.InstanceType))
			m.key, m.fix = config.KeySystemNodeInstanceType, fmt.Sprintf("pulumi config set %s %s; ", config.KeySystemNodeInstanceType, running)
		}
		if g.AmiType != amiType {
			m.changes = append(m.changes, fmt.Sprintf("AMI type %s → %s (versions.SystemAMIType)", g.AmiType, amiType))
		}
		tier, err := subnetTier(ctx, g.SubnetIds)
		if err != nil {
			return err
		}
		if tier != wantTier {
			m.changes = append(m.changes, fmt.Sprintf("%s subnets → %s (natMode)", tier, wantTier))
			m.key, m.fix = config.KeyNatMode, fmt.Sprintf("set %s back (its nodes are in %s subnets); ", config.KeyNatMode, tier)
		}
		if len(m.changes) == 0 {
			return nil // the stack's group
		}
		mismatches = append(mismatches, m)
	}
	if len(mismatches) == 0 {
		return nil
	}
	m := mismatches[0]
	const consequence = "EKS terminates the old nodes 5 minutes into their drain, killing the container-form jobs running there"
	if want.Replace {
		return ctx.Log.Warn(fmt.Sprintf("%s:%s is set: the system node group %s is replaced (%s); %s. Unset it after this deploy.",
			config.Project, config.KeyReplaceSystemNodes, m.name, strings.Join(m.changes, "; "), consequence), nil)
	}
	if len(m.changes) > 1 {
		m.fix = "undo the changes; or, " // one undone still leaves the other's replacement
	} else if m.fix != "" {
		m.fix += "or, "
	}
	return fmt.Errorf("%s:%s: the system node group %s would be replaced (%s), and %s (fix: %sto replace the group, deploy once with pulumi config set %s true when no container-form job runs, then unset it)",
		config.Project, m.key, m.name, strings.Join(m.changes, "; "), consequence, m.fix, config.KeyReplaceSystemNodes)
}

// subnetTier is "private" or "public": the tier of the subnets, by the load-balancer role
// the network tags them with (kubernetes.io/role/internal-elb on private ones).
func subnetTier(ctx *pulumi.Context, ids []string) (string, error) {
	for _, id := range ids {
		sn, err := ec2.LookupSubnet(ctx, &ec2.LookupSubnetArgs{Id: &id})
		if err != nil {
			return "", fmt.Errorf("looking up subnet %s: %w", id, err)
		}
		if _, ok := sn.Tags["kubernetes.io/role/internal-elb"]; ok {
			return "private", nil
		}
	}
	return "public", nil
}

// spotRoleArn is the ARN of the account's EC2 Spot service-linked role, or "" if it has none.
func spotRoleArn(ctx *pulumi.Context) (string, error) {
	prefix, pattern := "/aws-service-role/spot.amazonaws.com/", "^AWSServiceRoleForEC2Spot$"
	roles, err := iam.GetRoles(ctx, &iam.GetRolesArgs{PathPrefix: &prefix, NameRegex: &pattern})
	if err != nil {
		return "", fmt.Errorf("looking up the EC2 Spot service-linked role: %w", err)
	}
	if len(roles.Arns) == 0 {
		return "", nil
	}
	return roles.Arns[0], nil
}
