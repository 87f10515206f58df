package infra

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	awseks "github.com/pulumi/pulumi-aws/sdk/v6/go/aws/eks"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi-eks/sdk/v2/go/eks"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// ClusterArgs describes the EKS cluster and its always-on system node group.
type ClusterArgs struct {
	// NetworkPolicyMode is the VPC CNI's enforcing mode (networkPolicyEnforcingMode).
	NetworkPolicyMode config.NetworkPolicyMode
	// PermissionsBoundary is the stack's (config.Config.PermissionsBoundaryArn): its system
	// node role carries it; "" for none.
	PermissionsBoundary              string
	Name, Version, Region, Partition string

	VpcID            pulumi.StringInput
	PublicSubnetIDs  pulumi.StringArrayInput
	PrivateSubnetIDs pulumi.StringArrayInput // empty in the lean profile
	NodeSubnetIDs    pulumi.StringArrayInput

	PublicAccessCIDRs []string
	AdminPrincipals   []string
	// DeployRoleArn (cluster-admin) and PreviewRoleArn (read-only) are the deploy identity's
	// roles for the stack (config.Config); "" for none.
	DeployRoleArn, PreviewRoleArn string

	SystemNodeInstanceType string
	SystemNodeCount        int

	// AddonVersions pins add-on versions; unlisted add-ons get EKS's default version for
	// the cluster's Kubernetes version.
	AddonVersions map[string]string
	Tags          map[string]string
	// Auth is how `pulumi up` authenticates to AWS; the kubeconfig does the same.
	Auth config.AWSAuth
}

// Cluster is the EKS control plane, its managed add-ons and the system node group.
type Cluster struct {
	pulumi.ResourceState

	// Endpoint is the API server URL.
	Endpoint pulumi.StringOutput `pulumi:"endpoint"`
	// Kubeconfig authenticates with `aws eks get-token` as the identity that runs `pulumi up`
	// (see Kubeconfig); it is a secret.
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
	// SystemNodeRoleName is the system nodes' role, which pulls their images.
	SystemNodeRoleName pulumi.StringOutput
	// Resources are everything the cluster is made of: control plane, add-ons (CoreDNS
	// among them), system node group and its role.
	Resources []pulumi.Resource
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
	b := &clusterBuilder{ctx: ctx, name: name, args: args, component: c, tags: tagMap(args.Tags, nil)}

	nodeRole, nodeAttachments, err := newRole(ctx, c, name+"-system-node", roleSpec{
		Description: "EKS system node group of " + args.Name,
		Trust:       serviceTrust("ec2.amazonaws.com", []string{"sts:AssumeRole"}),
		Managed:     managedPolicyARNs(args.Partition, systemNodePolicies),
		// The role alone carries the ClusterTag: the launch template's instance tags are
		// b.tags, and a tag added there would roll the system nodes.
		Tags:     ownedTags(args.Tags, args.Name),
		Boundary: args.PermissionsBoundary,
	})
	if err != nil {
		return nil, err
	}
	b.created.add(nodeRole)
	b.created.add(nodeAttachments...)
	cl, err := b.eksCluster()
	if err != nil {
		return nil, err
	}
	sgID, err := b.discoveryTag(cl)
	if err != nil {
		return nil, err
	}
	// Add-ons the nodes need to become Ready go first; CoreDNS only turns ACTIVE once a
	// node can run it, so it follows the node group.
	var beforeNodes []pulumi.Resource
	for _, addonName := range []string{"vpc-cni", "kube-proxy", "eks-pod-identity-agent"} {
		a, err := b.addon(cl, addonName)
		if err != nil {
			return nil, err
		}
		beforeNodes = append(beforeNodes, a)
		if addonName == "eks-pod-identity-agent" {
			c.PodIdentityAgent = a
		}
	}
	mng, err := b.systemNodeGroup(cl, nodeRole, append(beforeNodes, nodeAttachments...))
	if err != nil {
		return nil, err
	}
	if _, err := b.addon(cl, "coredns", mng); err != nil {
		return nil, err
	}

	c.EKS = cl
	c.SystemNodeGroup = mng
	c.SystemNodeRoleName = nodeRole.Name
	c.Endpoint = cl.EksCluster.Endpoint()
	c.SecurityGroupID = sgID
	c.Kubeconfig = b.kubeconfig(cl)
	c.Resources = b.created
	if err := ctx.RegisterResourceOutputs(c, pulumi.Map{
		"endpoint":        c.Endpoint,
		"kubeconfig":      c.Kubeconfig,
		"securityGroupId": c.SecurityGroupID,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// clusterBuilder creates the cluster's resources, each a child of the component.
type clusterBuilder struct {
	ctx       *pulumi.Context
	name      string
	args      *ClusterArgs
	component *Cluster
	tags      pulumi.StringMap
	created   created
}

// accessEntries give each admin principal, and the deploy role, cluster-admin, and the
// preview role read-only access: AmazonEKSViewPolicy, which reads no Secrets (the preview job
// runs a pull request's code; a preview without refresh reads no Helm release Secret:
// pulumi-kubernetes v4.32.0 helm_release.go reads the release only in Read). EKS makes
// whoever runs `pulumi up` admin by itself. The keys name the entries' resources: stable.
func (b *clusterBuilder) accessEntries() map[string]eks.AccessEntryArgs {
	entry := func(arn, name, policy string) eks.AccessEntryArgs {
		return eks.AccessEntryArgs{
			PrincipalArn: pulumi.String(arn),
			AccessPolicies: map[string]eks.AccessPolicyAssociationInput{
				name: eks.AccessPolicyAssociationArgs{
					PolicyArn:   pulumi.Sprintf("arn:%s:eks::aws:cluster-access-policy/%s", b.args.Partition, policy),
					AccessScope: awseks.AccessPolicyAssociationAccessScopeArgs{Type: pulumi.String("cluster")},
				},
			},
		}
	}
	entries := map[string]eks.AccessEntryArgs{}
	for i, arn := range b.args.AdminPrincipals {
		entries[fmt.Sprintf("admin-%d", i)] = entry(arn, "cluster-admin", "AmazonEKSClusterAdminPolicy")
	}
	if arn := b.args.DeployRoleArn; arn != "" {
		entries["deploy"] = entry(arn, "cluster-admin", "AmazonEKSClusterAdminPolicy")
	}
	if arn := b.args.PreviewRoleArn; arn != "" {
		entries["preview"] = entry(arn, "view", "AmazonEKSViewPolicy")
	}
	return entries
}

// eksCluster creates the control plane with pulumi-eks.
func (b *clusterBuilder) eksCluster() (*eks.Cluster, error) {
	authMode := eks.AuthenticationModeApi
	cl, err := eks.NewCluster(b.ctx, b.name, &eks.ClusterArgs{
		// An explicit name keeps it (and every tag and Karpenter setting derived from it)
		// known at preview; pulumi-eks would otherwise add a random suffix.
		Name:             pulumi.String(b.args.Name),
		Version:          pulumi.String(b.args.Version),
		VpcId:            b.args.VpcID,
		PublicSubnetIds:  b.args.PublicSubnetIDs,
		PrivateSubnetIds: b.args.PrivateSubnetIDs,
		// pulumi-eks v2's default node group uses Launch Configurations, which new AWS
		// accounts cannot create; the system nodes are a managed node group below.
		SkipDefaultNodeGroup: pulumi.BoolRef(true),
		// Access entries only: no aws-auth ConfigMap to drift.
		AuthenticationMode: &authMode,
		AccessEntries:      b.accessEntries(),
		// Otherwise v2 applies its own dated VPC CNI manifest with kubectl; the vpc-cni
		// managed add-on owns the CNI instead.
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
		PublicAccessCidrs:     pulumi.ToStringArray(b.args.PublicAccessCIDRs),
		// Karpenter uses EKS Pod Identity, not IRSA.
		CreateOidcProvider: pulumi.Bool(false),
		Tags:               b.tags,
	}, pulumi.Parent(b.component))
	if err != nil {
		return nil, fmt.Errorf("creating EKS cluster: %w", err)
	}
	b.created.add(cl)
	return cl, nil
}

// discoveryTag tags the EKS-managed cluster security group, which managed nodes use, so
// Karpenter's EC2NodeClass selects the same group for GPU nodes. It returns the group's ID.
func (b *clusterBuilder) discoveryTag(cl *eks.Cluster) (pulumi.StringOutput, error) {
	sgID := cl.EksCluster.VpcConfig().ClusterSecurityGroupId().Elem()
	tag, err := ec2.NewTag(b.ctx, b.name+"-sg-discovery", &ec2.TagArgs{
		ResourceId: sgID,
		Key:        pulumi.String(wellknown.DiscoveryTag),
		Value:      pulumi.String(b.args.Name),
	}, pulumi.Parent(b.component))
	if err != nil {
		return pulumi.StringOutput{}, fmt.Errorf("tagging cluster security group: %w", err)
	}
	b.created.add(tag)
	return sgID, nil
}

// addonConfiguration is an add-on's configuration values (each add-on's JSON schema, from
// `aws eks describe-addon-configuration`), nil for none. vpc-cni enforces NetworkPolicies with
// enableNetworkPolicy (VPC CNI ≥ 1.14; amazon-vpc-cni-k8s charts/aws-vpc-cni values.yaml
// enableNetworkPolicy, which feeds the node agent's --enable-network-policy and the
// amazon-vpc-cni ConfigMap), in the mode its aws-node container's env names
// (NETWORK_POLICY_ENFORCING_MODE, VPC CNI ≥ 1.17.1: the chart's env, which the add-on's
// configuration takes as its `env` object; the agent reads the mode from ipamd,
// aws-network-policy-agent main.go). In strict mode a pod no policy selects is denied
// everything: the Kubernetes layer gives every namespace it runs pods in its policies
// (k8s/boundary.go).
func addonConfiguration(addon string, mode config.NetworkPolicyMode) map[string]any {
	if addon != "vpc-cni" {
		return nil
	}
	return map[string]any{"enableNetworkPolicy": "true", "env": map[string]string{"NETWORK_POLICY_ENFORCING_MODE": string(mode)}}
}

// addon installs an EKS managed add-on at its pinned version, or at the default version EKS
// publishes for the cluster's Kubernetes version, with its configuration values.
func (b *clusterBuilder) addon(cl *eks.Cluster, addonName string, deps ...pulumi.Resource) (*awseks.Addon, error) {
	version := pulumi.StringPtr(b.args.AddonVersions[addonName]).ToStringPtrOutput()
	if b.args.AddonVersions[addonName] == "" {
		version = awseks.GetAddonVersionOutput(b.ctx, awseks.GetAddonVersionOutputArgs{
			AddonName:         pulumi.String(addonName),
			KubernetesVersion: pulumi.String(b.args.Version),
			MostRecent:        pulumi.Bool(false),
		}, pulumi.Parent(b.component)).Version().ToStringPtrOutput()
	}
	var configuration pulumi.StringPtrInput
	if values := addonConfiguration(addonName, b.args.NetworkPolicyMode); values != nil {
		j, err := json.Marshal(values)
		if err != nil {
			return nil, err
		}
		configuration = pulumi.String(string(j))
	}
	a, err := awseks.NewAddon(b.ctx, b.name+"-"+addonName, &awseks.AddonArgs{
		ClusterName:         cl.EksCluster.Name(),
		AddonName:           pulumi.String(addonName),
		AddonVersion:        version,
		ConfigurationValues: configuration,
		// EKS installs self-managed vpc-cni, kube-proxy and CoreDNS with the cluster; the
		// managed add-on takes them over.
		ResolveConflictsOnCreate: pulumi.String("OVERWRITE"),
		ResolveConflictsOnUpdate: pulumi.String("OVERWRITE"),
		Tags:                     b.tags,
	}, pulumi.Parent(b.component), pulumi.DependsOn(deps))
	if err != nil {
		return nil, fmt.Errorf("creating %s add-on: %w", addonName, err)
	}
	b.created.add(a)
	return a, nil
}

// systemLaunchTemplate is the system nodes' launch template: IMDSv2 with hop limit 1
// (wellknown.IMDSHopLimit: the node role stays the node's; a job in a runner on a system node
// cannot take it), and the stack's tags on their instances and volumes, which a managed node
// group's default template does not tag, so cost allocation would miss them.
func (b *clusterBuilder) systemLaunchTemplate() (*ec2.LaunchTemplate, error) {
	tags := tagMap(b.args.Tags, map[string]string{"Name": b.args.Name + "-system"})
	lt, err := ec2.NewLaunchTemplate(b.ctx, b.name+"-system", &ec2.LaunchTemplateArgs{
		Description: pulumi.String("System nodes of " + b.args.Name),
		MetadataOptions: &ec2.LaunchTemplateMetadataOptionsArgs{
			HttpEndpoint:            pulumi.String("enabled"),
			HttpTokens:              pulumi.String("required"),
			HttpPutResponseHopLimit: pulumi.Int(wellknown.IMDSHopLimit),
		},
		TagSpecifications: ec2.LaunchTemplateTagSpecificationArray{
			&ec2.LaunchTemplateTagSpecificationArgs{ResourceType: pulumi.String("instance"), Tags: tags},
			&ec2.LaunchTemplateTagSpecificationArgs{ResourceType: pulumi.String("volume"), Tags: tags},
		},
		Tags: b.tags,
	}, pulumi.Parent(b.component))
	if err != nil {
		return nil, fmt.Errorf("creating the system nodes' launch template: %w", err)
	}
	b.created.add(lt)
	return lt, nil
}

// systemNodeGroup creates the always-on managed node group that runs Karpenter, CoreDNS
// and ARC, after deps (the add-ons nodes need, the node role's policies).
func (b *clusterBuilder) systemNodeGroup(cl *eks.Cluster, role *iam.Role, deps []pulumi.Resource) (*eks.ManagedNodeGroup, error) {
	lt, err := b.systemLaunchTemplate()
	if err != nil {
		return nil, err
	}
	mng, err := eks.NewManagedNodeGroup(b.ctx, b.name+"-system", &eks.ManagedNodeGroupArgs{
		Cluster:  cl,
		NodeRole: role,
		// pulumi-eks v2 defaults to AL2, which has no AMIs for Kubernetes 1.33+. No
		// kubelet/bootstrap extra args: v2 renders AL2 user data for those.
		AmiType: pulumi.String(versions.SystemAMIType),
		// The control plane's version, as it reports it: a kubernetesVersion bump updates the
		// cluster, then this group (its nodes roll to the new minor). Unset, the group would
		// stay at its first version (pulumi-eks passes it through, nodegroup.js at v2.8.1), and
		// EKS refuses the next control-plane bump while a node group lags behind it.
		Version:       cl.EksCluster.Version().ToStringPtrOutput(),
		InstanceTypes: pulumi.StringArray{pulumi.String(b.args.SystemNodeInstanceType)},
		CapacityType:  pulumi.String("ON_DEMAND"),
		ScalingConfig: &awseks.NodeGroupScalingConfigArgs{
			DesiredSize: pulumi.Int(b.args.SystemNodeCount),
			MinSize:     pulumi.Int(b.args.SystemNodeCount),
			MaxSize:     pulumi.Int(b.args.SystemNodeCount),
		},
		SubnetIds: b.args.NodeSubnetIDs,
		Labels:    pulumi.StringMap{wellknown.SystemNodeLabel: pulumi.String(wellknown.SystemNodeValue)},
		// Our own template instead of pulumi-eks's enableIMDSv2 one (they exclude each
		// other): the same metadata options, plus tags on instances and volumes.
		LaunchTemplate: &awseks.NodeGroupLaunchTemplateArgs{
			Id:      lt.ID(),
			Version: lt.LatestVersion.ApplyT(func(v int) string { return strconv.Itoa(v) }).(pulumi.StringOutput),
		},
		Tags: b.tags,
	}, pulumi.Parent(b.component), pulumi.DependsOn(deps))
	if err != nil {
		return nil, fmt.Errorf("creating system node group: %w", err)
	}
	b.created.add(mng)
	return mng, nil
}

// kubeconfig is the cluster's kubeconfig (see Kubeconfig), as a secret.
func (b *clusterBuilder) kubeconfig(cl *eks.Cluster) pulumi.StringOutput {
	return pulumi.ToSecret(pulumi.All(cl.EksCluster.Endpoint(), cl.EksCluster.CertificateAuthority().Data()).ApplyT(
		func(v []any) (string, error) {
			ca, _ := v[1].(*string)
			if ca == nil {
				return "", fmt.Errorf("EKS cluster %s has no certificate authority data", b.args.Name)
			}
			return Kubeconfig(b.args.Name, b.args.Region, v[0].(string), *ca, b.args.Auth)
		})).(pulumi.StringOutput)
}

// Kubeconfig renders a kubeconfig for an EKS cluster that authenticates through
// `aws eks get-token` as the identity that created the cluster: with the stack's aws:profile
// and aws:assumeRole, which the AWS provider used (pulumi-eks v2's own kubeconfig passes the
// profile but not the role). Unlike pulumi-eks v2's, it also passes --region, so it works
// without AWS_REGION in the environment (pulumi-eks#1038).
func Kubeconfig(clusterName, region, endpoint, caData string, auth config.AWSAuth) (string, error) {
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
				Args:            getTokenArgs(clusterName, region, auth),
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

// getTokenArgs are the `aws` arguments that mint the cluster's token as auth's identity.
func getTokenArgs(clusterName, region string, auth config.AWSAuth) []string {
	args := []string{"eks", "get-token", "--cluster-name", clusterName, "--region", region}
	if auth.Profile != "" {
		args = append(args, "--profile", auth.Profile)
	}
	if auth.AssumeRoleArn != "" {
		args = append(args, "--role-arn", auth.AssumeRoleArn)
	}
	return append(args, "--output", "json")
}
