package infra

import (
	"fmt"
	"net/netip"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// NetworkArgs describes the VPC to build.
type NetworkArgs struct {
	// ClusterName is used in the discovery and cluster tags on the subnets.
	ClusterName string
	// Region names the S3 gateway endpoint's service.
	Region string
	// CIDR is the VPC's IPv4 block, a private /16 to /20.
	CIDR string
	// Zones are the availability zones to spread subnets across (2 or 3), in the order of
	// their CIDR blocks.
	Zones []Zone
	// NAT is true for private node subnets behind a single NAT gateway, false for the lean
	// profile: public subnets only, nodes with public IPs.
	NAT  bool
	Tags map[string]string
}

// Network is the VPC, its subnets and routing.
type Network struct {
	pulumi.ResourceState

	VpcID            pulumi.StringOutput      `pulumi:"vpcId"`
	PublicSubnetIDs  pulumi.StringArrayOutput `pulumi:"publicSubnetIds"`
	PrivateSubnetIDs pulumi.StringArrayOutput `pulumi:"privateSubnetIds"`
	// NodeSubnetIDs are where nodes (system and Karpenter's) run: the private subnets, or
	// the public ones in the lean profile. They carry the karpenter.sh/discovery tag.
	NodeSubnetIDs pulumi.StringArrayOutput `pulumi:"nodeSubnetIds"`

	// Resources are everything the network is made of: what nodes need for egress.
	Resources []pulumi.Resource
}

// NewNetwork creates a VPC with one public subnet per AZ and, with NAT, one private subnet
// per AZ routed through a single NAT gateway in the first AZ.
func NewNetwork(ctx *pulumi.Context, name string, args *NetworkArgs, opts ...pulumi.ResourceOption) (*Network, error) {
	privateCIDRs, publicCIDRs, err := SubnetCIDRs(args.CIDR, len(args.Zones))
	if err != nil {
		return nil, err
	}
	n := &Network{}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:infra:Network", name, n, opts...); err != nil {
		return nil, err
	}
	b := &networkBuilder{ctx: ctx, name: name, args: args, parent: pulumi.Parent(n)}

	vpc, igw, err := b.vpc()
	if err != nil {
		return nil, err
	}
	publicRT, err := b.routeTable(vpc, "public", &ec2.RouteTableRouteArgs{CidrBlock: pulumi.String("0.0.0.0/0"), GatewayId: igw.ID()})
	if err != nil {
		return nil, err
	}
	// Only the lean profile runs nodes in the public subnets; they need a public IP for egress.
	public, err := b.subnets(vpc, publicRT, tier{name: "public", cidrs: publicCIDRs, elbRole: "kubernetes.io/role/elb", nodes: !args.NAT})
	if err != nil {
		return nil, err
	}
	var private []*ec2.Subnet
	if args.NAT {
		nat, err := b.natGateway(public[0], igw)
		if err != nil {
			return nil, err
		}
		privateRT, err := b.routeTable(vpc, "private", &ec2.RouteTableRouteArgs{CidrBlock: pulumi.String("0.0.0.0/0"), NatGatewayId: nat.ID()})
		if err != nil {
			return nil, err
		}
		if private, err = b.subnets(vpc, privateRT, tier{name: "private", cidrs: privateCIDRs, elbRole: "kubernetes.io/role/internal-elb", nodes: true}); err != nil {
			return nil, err
		}
		if err := b.s3Endpoint(vpc, privateRT); err != nil {
			return nil, err
		}
	}

	n.VpcID = vpc.ID().ToStringOutput()
	n.PublicSubnetIDs = subnetIDs(public)
	n.PrivateSubnetIDs = subnetIDs(private)
	n.NodeSubnetIDs = n.PrivateSubnetIDs
	if !args.NAT {
		n.NodeSubnetIDs = n.PublicSubnetIDs
	}
	n.Resources = b.created
	if err := ctx.RegisterResourceOutputs(n, pulumi.Map{
		"vpcId":            n.VpcID,
		"publicSubnetIds":  n.PublicSubnetIDs,
		"privateSubnetIds": n.PrivateSubnetIDs,
		"nodeSubnetIds":    n.NodeSubnetIDs,
	}); err != nil {
		return nil, err
	}
	return n, nil
}

// networkBuilder creates the network's resources, each a child of the component.
type networkBuilder struct {
	ctx     *pulumi.Context
	name    string
	args    *NetworkArgs
	parent  pulumi.ResourceOption
	created created
}

func (b *networkBuilder) tags(extra map[string]string) pulumi.StringMap {
	return tagMap(b.args.Tags, extra)
}

// vpc creates the VPC and its internet gateway.
func (b *networkBuilder) vpc() (*ec2.Vpc, *ec2.InternetGateway, error) {
	vpc, err := ec2.NewVpc(b.ctx, b.name+"-vpc", &ec2.VpcArgs{
		CidrBlock: pulumi.String(b.args.CIDR),
		// EKS requires both: nodes register by private DNS name.
		EnableDnsHostnames: pulumi.Bool(true),
		EnableDnsSupport:   pulumi.Bool(true),
		Tags:               b.tags(map[string]string{"Name": b.args.ClusterName}),
	}, b.parent)
	if err != nil {
		return nil, nil, fmt.Errorf("creating VPC: %w", err)
	}
	igw, err := ec2.NewInternetGateway(b.ctx, b.name+"-igw", &ec2.InternetGatewayArgs{
		VpcId: vpc.ID(),
		Tags:  b.tags(map[string]string{"Name": b.args.ClusterName}),
	}, b.parent)
	if err != nil {
		return nil, nil, fmt.Errorf("creating internet gateway: %w", err)
	}
	b.created.add(vpc, igw)
	return vpc, igw, nil
}

// routeTable creates a route table whose default route is route.
func (b *networkBuilder) routeTable(vpc *ec2.Vpc, tierName string, route *ec2.RouteTableRouteArgs) (*ec2.RouteTable, error) {
	rt, err := ec2.NewRouteTable(b.ctx, b.name+"-"+tierName+"-rt", &ec2.RouteTableArgs{
		VpcId:  vpc.ID(),
		Routes: ec2.RouteTableRouteArray{route},
		Tags:   b.tags(map[string]string{"Name": b.args.ClusterName + "-" + tierName}),
	}, b.parent)
	if err != nil {
		return nil, fmt.Errorf("creating %s route table: %w", tierName, err)
	}
	b.created.add(rt)
	return rt, nil
}

// tier is a set of subnets, one per AZ, sharing a route table.
type tier struct {
	name  string
	cidrs []string
	// elbRole is the tag that tells load balancers to use these subnets.
	elbRole string
	// nodes: Karpenter's nodes run here (discovery tag); in public subnets they get a
	// public IP.
	nodes bool
}

// subnets creates one subnet per AZ in the tier, each associated with rt. A subnet is named
// by its zone's ID, so a zone keeps its subnet whatever else changes; stacks created before
// that named them by position, which their alias keeps (zones are kept once chosen, so a
// position never moves to another zone).
func (b *networkBuilder) subnets(vpc *ec2.Vpc, rt *ec2.RouteTable, t tier) ([]*ec2.Subnet, error) {
	var out []*ec2.Subnet
	for i, zone := range b.args.Zones {
		az := zone.Name
		tags := map[string]string{
			"Name":    fmt.Sprintf("%s-%s-%s", b.args.ClusterName, t.name, az),
			t.elbRole: "1",
			"kubernetes.io/cluster/" + b.args.ClusterName: "shared",
		}
		if t.nodes {
			tags[wellknown.DiscoveryTag] = b.args.ClusterName
		}
		args := &ec2.SubnetArgs{
			VpcId:            vpc.ID(),
			AvailabilityZone: pulumi.String(az),
			CidrBlock:        pulumi.String(t.cidrs[i]),
			Tags:             b.tags(tags),
		}
		if t.name == "public" {
			args.MapPublicIpOnLaunch = pulumi.Bool(t.nodes)
		}
		logical := fmt.Sprintf("%s-%s-%s", b.name, t.name, zone.ID)
		byPosition := pulumi.Aliases([]pulumi.Alias{{Name: pulumi.String(fmt.Sprintf("%s-%s-%d", b.name, t.name, i))}})
		sn, err := ec2.NewSubnet(b.ctx, logical, args, b.parent, byPosition)
		if err != nil {
			return nil, fmt.Errorf("creating %s subnet in %s: %w", t.name, az, err)
		}
		assoc, err := ec2.NewRouteTableAssociation(b.ctx, logical, &ec2.RouteTableAssociationArgs{
			SubnetId: sn.ID(), RouteTableId: rt.ID(),
		}, b.parent, byPosition)
		if err != nil {
			return nil, fmt.Errorf("associating %s subnet in %s: %w", t.name, az, err)
		}
		b.created.add(sn, assoc)
		out = append(out, sn)
	}
	return out, nil
}

// natGateway creates the single NAT gateway, with its address, in the first public subnet.
func (b *networkBuilder) natGateway(subnet *ec2.Subnet, igw *ec2.InternetGateway) (*ec2.NatGateway, error) {
	eip, err := ec2.NewEip(b.ctx, b.name+"-nat", &ec2.EipArgs{
		Domain: pulumi.String("vpc"),
		Tags:   b.tags(map[string]string{"Name": b.args.ClusterName + "-nat"}),
	}, b.parent)
	if err != nil {
		return nil, fmt.Errorf("creating NAT address: %w", err)
	}
	nat, err := ec2.NewNatGateway(b.ctx, b.name+"-nat", &ec2.NatGatewayArgs{
		AllocationId: eip.ID(),
		SubnetId:     subnet.ID(),
		Tags:         b.tags(map[string]string{"Name": b.args.ClusterName}),
	}, b.parent, pulumi.DependsOn([]pulumi.Resource{igw}))
	if err != nil {
		return nil, fmt.Errorf("creating NAT gateway: %w", err)
	}
	b.created.add(eip, nat)
	return nat, nil
}

// s3Endpoint routes the private subnets' S3 traffic through a gateway endpoint: free, where
// the NAT gateway charges $0.045 per GB. ECR serves image layers from S3, so with the image
// cache (or any ECR image) a cold node's gigabytes of layers do not cross the NAT. (In the lean
// profile nodes reach S3 through the internet gateway, which charges nothing for data in.)
func (b *networkBuilder) s3Endpoint(vpc *ec2.Vpc, rt *ec2.RouteTable) error {
	ep, err := ec2.NewVpcEndpoint(b.ctx, b.name+"-s3", &ec2.VpcEndpointArgs{
		VpcId:           vpc.ID(),
		ServiceName:     pulumi.String("com.amazonaws." + b.args.Region + ".s3"),
		VpcEndpointType: pulumi.String("Gateway"),
		RouteTableIds:   pulumi.StringArray{rt.ID()},
		Tags:            b.tags(map[string]string{"Name": b.args.ClusterName + "-s3"}),
	}, b.parent)
	if err != nil {
		return fmt.Errorf("creating S3 gateway endpoint: %w", err)
	}
	b.created.add(ep)
	return nil
}

func subnetIDs(subnets []*ec2.Subnet) pulumi.StringArrayOutput {
	var ids pulumi.StringArray
	for _, sn := range subnets {
		ids = append(ids, sn.ID().ToStringOutput())
	}
	return ids.ToStringArrayOutput()
}

// SubnetCIDRs carves the VPC block: the first three quarters hold one private subnet per AZ
// (pods take VPC addresses, so they get the room), and the last quarter is split in eight
// for the public subnets, which only hold the NAT gateway, load balancers and, in the lean
// profile, a few nodes. For a /16: private /18s, public /21s.
func SubnetCIDRs(vpcCIDR string, azs int) (private, public []string, err error) {
	vpc, err := netip.ParsePrefix(vpcCIDR)
	if err != nil {
		return nil, nil, fmt.Errorf("vpc CIDR %q: %w", vpcCIDR, err)
	}
	if azs < 1 || azs > 3 {
		return nil, nil, fmt.Errorf("%d AZs: the layout holds 1 to 3", azs)
	}
	publicBlock := split(vpc, 2, 3)
	for i := range azs {
		private = append(private, split(vpc, 2, i).String())
		public = append(public, split(publicBlock, 3, i).String())
	}
	return private, public, nil
}

// split returns the index-th of the 2^newBits equal sub-blocks of p (Terraform's cidrsubnet).
func split(p netip.Prefix, newBits, index int) netip.Prefix {
	bits := p.Bits() + newBits
	base := p.Masked().Addr().As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v |= uint32(index) << (32 - bits)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), bits)
}
