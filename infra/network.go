package infra

import (
	"fmt"
	"net/netip"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// NetworkArgs describes the VPC to build.
type NetworkArgs struct {
	// ClusterName is used in the discovery and cluster tags on the subnets.
	ClusterName string
	// CIDR is the VPC's IPv4 block, a private /16 to /20.
	CIDR string
	// AZs are the availability zones to spread subnets across (2 or 3).
	AZs []string
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
}

// NewNetwork creates a VPC with one public subnet per AZ and, with NAT, one private subnet
// per AZ routed through a single NAT gateway in the first AZ.
func NewNetwork(ctx *pulumi.Context, name string, args *NetworkArgs, opts ...pulumi.ResourceOption) (*Network, error) {
	private, public, err := SubnetCIDRs(args.CIDR, len(args.AZs))
	if err != nil {
		return nil, err
	}
	n := &Network{}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:infra:Network", name, n, opts...); err != nil {
		return nil, err
	}
	parent := pulumi.Parent(n)
	tags := func(extra map[string]string) pulumi.StringMap { return tagMap(args.Tags, extra) }
	clusterTag := "kubernetes.io/cluster/" + args.ClusterName

	vpc, err := ec2.NewVpc(ctx, name+"-vpc", &ec2.VpcArgs{
		CidrBlock: pulumi.String(args.CIDR),
		// EKS requires both: nodes register by private DNS name.
		EnableDnsHostnames: pulumi.Bool(true),
		EnableDnsSupport:   pulumi.Bool(true),
		Tags:               tags(map[string]string{"Name": args.ClusterName}),
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("creating VPC: %w", err)
	}
	igw, err := ec2.NewInternetGateway(ctx, name+"-igw", &ec2.InternetGatewayArgs{
		VpcId: vpc.ID(),
		Tags:  tags(map[string]string{"Name": args.ClusterName}),
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("creating internet gateway: %w", err)
	}
	publicRT, err := ec2.NewRouteTable(ctx, name+"-public-rt", &ec2.RouteTableArgs{
		VpcId:  vpc.ID(),
		Routes: ec2.RouteTableRouteArray{&ec2.RouteTableRouteArgs{CidrBlock: pulumi.String("0.0.0.0/0"), GatewayId: igw.ID()}},
		Tags:   tags(map[string]string{"Name": args.ClusterName + "-public"}),
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("creating public route table: %w", err)
	}

	var publicIDs, privateIDs pulumi.StringArray
	var firstPublic *ec2.Subnet
	for i, az := range args.AZs {
		subnetTags := map[string]string{
			"Name":                   fmt.Sprintf("%s-public-%s", args.ClusterName, az),
			"kubernetes.io/role/elb": "1",
			clusterTag:               "shared",
		}
		if !args.NAT {
			subnetTags[DiscoveryTag] = args.ClusterName
		}
		sn, err := ec2.NewSubnet(ctx, fmt.Sprintf("%s-public-%d", name, i), &ec2.SubnetArgs{
			VpcId:            vpc.ID(),
			AvailabilityZone: pulumi.String(az),
			CidrBlock:        pulumi.String(public[i]),
			// Only the lean profile runs nodes here, and they need a public IP for egress.
			MapPublicIpOnLaunch: pulumi.Bool(!args.NAT),
			Tags:                tags(subnetTags),
		}, parent)
		if err != nil {
			return nil, fmt.Errorf("creating public subnet in %s: %w", az, err)
		}
		if _, err := ec2.NewRouteTableAssociation(ctx, fmt.Sprintf("%s-public-%d", name, i), &ec2.RouteTableAssociationArgs{
			SubnetId: sn.ID(), RouteTableId: publicRT.ID(),
		}, parent); err != nil {
			return nil, fmt.Errorf("associating public subnet in %s: %w", az, err)
		}
		if i == 0 {
			firstPublic = sn
		}
		publicIDs = append(publicIDs, sn.ID().ToStringOutput())
	}

	if args.NAT {
		eip, err := ec2.NewEip(ctx, name+"-nat", &ec2.EipArgs{
			Domain: pulumi.String("vpc"),
			Tags:   tags(map[string]string{"Name": args.ClusterName + "-nat"}),
		}, parent)
		if err != nil {
			return nil, fmt.Errorf("creating NAT address: %w", err)
		}
		nat, err := ec2.NewNatGateway(ctx, name+"-nat", &ec2.NatGatewayArgs{
			AllocationId: eip.ID(),
			SubnetId:     firstPublic.ID(),
			Tags:         tags(map[string]string{"Name": args.ClusterName}),
		}, parent, pulumi.DependsOn([]pulumi.Resource{igw}))
		if err != nil {
			return nil, fmt.Errorf("creating NAT gateway: %w", err)
		}
		privateRT, err := ec2.NewRouteTable(ctx, name+"-private-rt", &ec2.RouteTableArgs{
			VpcId:  vpc.ID(),
			Routes: ec2.RouteTableRouteArray{&ec2.RouteTableRouteArgs{CidrBlock: pulumi.String("0.0.0.0/0"), NatGatewayId: nat.ID()}},
			Tags:   tags(map[string]string{"Name": args.ClusterName + "-private"}),
		}, parent)
		if err != nil {
			return nil, fmt.Errorf("creating private route table: %w", err)
		}
		for i, az := range args.AZs {
			sn, err := ec2.NewSubnet(ctx, fmt.Sprintf("%s-private-%d", name, i), &ec2.SubnetArgs{
				VpcId:            vpc.ID(),
				AvailabilityZone: pulumi.String(az),
				CidrBlock:        pulumi.String(private[i]),
				Tags: tags(map[string]string{
					"Name":                            fmt.Sprintf("%s-private-%s", args.ClusterName, az),
					"kubernetes.io/role/internal-elb": "1",
					clusterTag:                        "shared",
					DiscoveryTag:                      args.ClusterName,
				}),
			}, parent)
			if err != nil {
				return nil, fmt.Errorf("creating private subnet in %s: %w", az, err)
			}
			if _, err := ec2.NewRouteTableAssociation(ctx, fmt.Sprintf("%s-private-%d", name, i), &ec2.RouteTableAssociationArgs{
				SubnetId: sn.ID(), RouteTableId: privateRT.ID(),
			}, parent); err != nil {
				return nil, fmt.Errorf("associating private subnet in %s: %w", az, err)
			}
			privateIDs = append(privateIDs, sn.ID().ToStringOutput())
		}
	}

	n.VpcID = vpc.ID().ToStringOutput()
	n.PublicSubnetIDs = publicIDs.ToStringArrayOutput()
	n.PrivateSubnetIDs = privateIDs.ToStringArrayOutput()
	n.NodeSubnetIDs = n.PrivateSubnetIDs
	if !args.NAT {
		n.NodeSubnetIDs = n.PublicSubnetIDs
	}
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
