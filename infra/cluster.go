package infra

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	awseks "github.com/pulumi/pulumi-aws/sdk/v6/go/aws/eks"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi-eks/sdk/v2/go/eks"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api/v1"

	"github.com/luxfi/lux-gpu-ci/versions"
)

// ClusterArgs describes the EKS cluster and its always-on system node group.
type ClusterArgs struct {
	Name, Version, Region, Partition string

	VpcID            pulumi.StringInput
	PublicSubnetIDs  pulumi.StringArrayInput
	PrivateSubnetIDs pulumi.StringArrayInput // empty in the lean profile
	NodeSubnetIDs    pulumi.StringArrayInput

	PublicAccessCIDRs []string
	AdminPrincipals   []string

	SystemNodeInstanceType string
	SystemNodeCount        int

	// AddonVersions pins add-on versions; unlisted add-ons get EKS's default version for
	// the cluster's Kubernetes version.
	AddonVersions map[string]string
	Tags          map[string]string
}

// Cluster is the EKS control plane, its managed add-ons and the system node group.
type Cluster struct {
	pulumi.ResourceState

	// Endpoint is the API server URL.
	Endpoint pulumi.StringOutput `pulumi:"endpoint"`
	// Kubeconfig authenticates with `aws eks get-token --region <region>`; it is a secret.
	Kubeconfig pulumi.StringOutput `pulumi:"kubeconfig"`
	// SecurityGroupID is the EKS-managed cluster security group, which managed nodes use
	// and which carries the karpenter.sh/discovery tag for Karpenter's nodes.
	SecurityGroupID pulumi.StringOutput `pulumi:"securityGroupId"`

	// EKS is the pulumi-eks component; AWS resources that attach to the cluster take their
	// cluster name from EKS.EksCluster so they depend on it.
	EKS *eks.Cluster
	// SystemNodeGroup must outlive everything that runs in the cluster (Karpenter drains GPU
	// nodes on destroy from here).
	SystemNodeGroup *eks.ManagedNodeGroup
	// PodIdentityAgent must exist before any Pod Identity association is relied upon.
	PodIdentityAgent *awseks.Addon
}

// Managed policies of the system node role. SSM gives operators a shell without SSH.
var systemNodePolicies = []string{
	"AmazonEKSWorkerNodePolicy",
	"AmazonEKS_CNI_Policy",
	"AmazonEC2ContainerRegistryPullOnly",
	"AmazonSSMManagedInstanceCore",
}

// NewCluster creates the EKS cluster with pulumi-eks v2, its managed add-ons, and the system
// managed node group.
func NewCluster(ctx *pulumi.Context, name string, args *ClusterArgs, opts ...pulumi.ResourceOption) (*Cluster, error) {
	c := &Cluster{}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:infra:Cluster", name, c, opts...); err != nil {
		return nil, err
	}
	parent := pulumi.Parent(c)
	tags := tagMap(args.Tags, nil)

	nodeRole, nodeAttachments, err := newRole(ctx, c, name+"-system-node", roleSpec{
		Description: "EKS system node group of " + args.Name,
		Trust:       serviceTrust("ec2.amazonaws.com", "sts:AssumeRole"),
		Managed:     managedPolicyARNs(args.Partition, systemNodePolicies),
		Tags:        tags,
	})
	if err != nil {
		return nil, err
	}

	adminEntries := map[string]eks.AccessEntryArgs{}
	for i, arn := range args.AdminPrincipals {
		adminEntries[fmt.Sprintf("admin-%d", i)] = eks.AccessEntryArgs{
			PrincipalArn: pulumi.String(arn),
			AccessPolicies: map[string]eks.AccessPolicyAssociationInput{
				"cluster-admin": eks.AccessPolicyAssociationArgs{
					PolicyArn:   pulumi.Sprintf("arn:%s:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy", args.Partition),
					AccessScope: awseks.AccessPolicyAssociationAccessScopeArgs{Type: pulumi.String("cluster")},
				},
			},
		}
	}

	authMode := eks.AuthenticationModeApi
	cl, err := eks.NewCluster(ctx, name, &eks.ClusterArgs{
		// An explicit name keeps it (and every tag and Karpenter setting derived from it)
		// known at preview; pulumi-eks would otherwise add a random suffix.
		Name:             pulumi.String(args.Name),
		Version:          pulumi.String(args.Version),
		VpcId:            args.VpcID,
		PublicSubnetIds:  args.PublicSubnetIDs,
		PrivateSubnetIds: args.PrivateSubnetIDs,
		// pulumi-eks v2's default node group uses Launch Configurations, which new AWS
		// accounts cannot create; the system nodes are a managed node group below.
		SkipDefaultNodeGroup: pulumi.BoolRef(true),
		// Access entries only: no aws-auth ConfigMap to drift.
		AuthenticationMode: &authMode,
		AccessEntries:      adminEntries,
		// Otherwise v2 applies its own dated VPC CNI manifest with kubectl; the vpc-cni
		// managed add-on below owns the CNI instead.
		UseDefaultVpcCni: pulumi.BoolRef(true),
		// pulumi-eks 2.8.1 (createCore, authenticationMode.ts) with API authentication:
		// instanceRoles only feeds aws-auth, so a non-empty list is refused; left unset, it
		// creates a default instance role (+3 policy attachments) and an EC2_LINUX access
		// entry for it, all unused; the singular instanceRole gets an access entry that EKS
		// also manages for a managed node group's role. An empty list passes its check and
		// creates neither: EKS makes the system node role's entry, KarpenterAWS makes
		// Karpenter's. (make e2e runs the component and asserts exactly that.)
		InstanceRoles:         iam.RoleArray{},
		EndpointPrivateAccess: pulumi.Bool(true),
		EndpointPublicAccess:  pulumi.Bool(true),
		PublicAccessCidrs:     pulumi.ToStringArray(args.PublicAccessCIDRs),
		// Karpenter uses EKS Pod Identity, not IRSA.
		CreateOidcProvider: pulumi.Bool(false),
		Tags:               tags,
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("creating EKS cluster: %w", err)
	}
	clusterName := cl.EksCluster.Name()

	// The EKS-managed cluster security group is what managed nodes use; tagging it lets
	// Karpenter's EC2NodeClass select the same group for GPU nodes.
	sgID := cl.EksCluster.VpcConfig().ClusterSecurityGroupId().Elem()
	if _, err := ec2.NewTag(ctx, name+"-sg-discovery", &ec2.TagArgs{
		ResourceId: sgID,
		Key:        pulumi.String(DiscoveryTag),
		Value:      pulumi.String(args.Name),
	}, parent); err != nil {
		return nil, fmt.Errorf("tagging cluster security group: %w", err)
	}

	// Add-ons the nodes need to become Ready go first; CoreDNS only turns ACTIVE once a
	// node can run it, so it follows the node group.
	addon := func(addonName string, deps ...pulumi.Resource) (*awseks.Addon, error) {
		version := pulumi.StringPtr(args.AddonVersions[addonName]).ToStringPtrOutput()
		if args.AddonVersions[addonName] == "" {
			version = awseks.GetAddonVersionOutput(ctx, awseks.GetAddonVersionOutputArgs{
				AddonName:         pulumi.String(addonName),
				KubernetesVersion: pulumi.String(args.Version),
				MostRecent:        pulumi.Bool(false),
			}, pulumi.Parent(c)).Version().ToStringPtrOutput()
		}
		a, err := awseks.NewAddon(ctx, name+"-"+addonName, &awseks.AddonArgs{
			ClusterName:  clusterName,
			AddonName:    pulumi.String(addonName),
			AddonVersion: version,
			// EKS installs self-managed vpc-cni, kube-proxy and CoreDNS with the cluster;
			// the managed add-on takes them over.
			ResolveConflictsOnCreate: pulumi.String("OVERWRITE"),
			ResolveConflictsOnUpdate: pulumi.String("OVERWRITE"),
			Tags:                     tags,
		}, parent, pulumi.DependsOn(deps))
		if err != nil {
			return nil, fmt.Errorf("creating %s add-on: %w", addonName, err)
		}
		return a, nil
	}
	var beforeNodes []pulumi.Resource
	for _, n := range []string{"vpc-cni", "kube-proxy", "eks-pod-identity-agent"} {
		a, err := addon(n)
		if err != nil {
			return nil, err
		}
		beforeNodes = append(beforeNodes, a)
		if n == "eks-pod-identity-agent" {
			c.PodIdentityAgent = a
		}
	}

	enableIMDSv2 := true
	mng, err := eks.NewManagedNodeGroup(ctx, name+"-system", &eks.ManagedNodeGroupArgs{
		Cluster:  cl,
		NodeRole: nodeRole,
		// pulumi-eks v2 defaults to AL2, which has no AMIs for Kubernetes 1.33+. No
		// kubelet/bootstrap extra args: v2 renders AL2 user data for those.
		AmiType:       pulumi.String(versions.SystemAMIType),
		InstanceTypes: pulumi.StringArray{pulumi.String(args.SystemNodeInstanceType)},
		CapacityType:  pulumi.String("ON_DEMAND"),
		ScalingConfig: &awseks.NodeGroupScalingConfigArgs{
			DesiredSize: pulumi.Int(args.SystemNodeCount),
			MinSize:     pulumi.Int(args.SystemNodeCount),
			MaxSize:     pulumi.Int(args.SystemNodeCount),
		},
		SubnetIds:    args.NodeSubnetIDs,
		Labels:       pulumi.StringMap{SystemNodeLabel: pulumi.String("system")},
		EnableIMDSv2: &enableIMDSv2,
		Tags:         tags,
	}, parent, pulumi.DependsOn(append(beforeNodes, nodeAttachments...)))
	if err != nil {
		return nil, fmt.Errorf("creating system node group: %w", err)
	}
	if _, err := addon("coredns", mng); err != nil {
		return nil, err
	}

	c.EKS = cl
	c.SystemNodeGroup = mng
	c.Endpoint = cl.EksCluster.Endpoint()
	c.SecurityGroupID = sgID
	c.Kubeconfig = pulumi.ToSecret(pulumi.All(cl.EksCluster.Endpoint(), cl.EksCluster.CertificateAuthority().Data()).ApplyT(
		func(v []any) (string, error) {
			ca, _ := v[1].(*string)
			if ca == nil {
				return "", fmt.Errorf("EKS cluster %s has no certificate authority data", args.Name)
			}
			return Kubeconfig(args.Name, args.Region, v[0].(string), *ca)
		})).(pulumi.StringOutput)

	if err := ctx.RegisterResourceOutputs(c, pulumi.Map{
		"endpoint":        c.Endpoint,
		"kubeconfig":      c.Kubeconfig,
		"securityGroupId": c.SecurityGroupID,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Kubeconfig renders a kubeconfig for an EKS cluster that authenticates through
// `aws eks get-token`. Unlike pulumi-eks v2's own, it passes --region, so it works without
// AWS_REGION in the environment (pulumi-eks#1038).
func Kubeconfig(clusterName, region, endpoint, caData string) (string, error) {
	// EKS hands out the CA base64-encoded; the kubeconfig type holds raw bytes.
	ca, err := base64.StdEncoding.DecodeString(caData)
	if err != nil {
		return "", fmt.Errorf("EKS cluster %s: certificate authority data is not base64: %w", clusterName, err)
	}
	cfg := clientcmdapi.Config{
		APIVersion:     "v1",
		Kind:           "Config",
		CurrentContext: clusterName,
		Clusters: []clientcmdapi.NamedCluster{{
			Name:    clusterName,
			Cluster: clientcmdapi.Cluster{Server: endpoint, CertificateAuthorityData: ca},
		}},
		AuthInfos: []clientcmdapi.NamedAuthInfo{{
			Name: clusterName,
			AuthInfo: clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
				APIVersion:      "client.authentication.k8s.io/v1beta1",
				Command:         "aws",
				Args:            []string{"eks", "get-token", "--cluster-name", clusterName, "--region", region, "--output", "json"},
				InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			}},
		}},
		Contexts: []clientcmdapi.NamedContext{{
			Name:    clusterName,
			Context: clientcmdapi.Context{Cluster: clusterName, AuthInfo: clusterName},
		}},
	}
	b, err := json.Marshal(cfg)
	return string(b), err
}
