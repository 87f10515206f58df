// Command karpenter runs Karpenter's own controllers — github.com/aws/karpenter-provider-aws
// and sigs.k8s.io/karpenter at the versions the program pins — as one process against the
// e2e's API server, with upstream's in-memory AWS APIs (pkg/fake, as upstream's suites use
// them) in place of EC2, SSM, SQS, IAM, EKS and pricing.
//
// It is wired as upstream's cmd/controller/main.go and pkg/operator.NewOperator wire the real
// binary (read at v1.14.1); only the AWS clients differ. Provisioning, scheduling simulation,
// limits, consolidation, interruption and termination are upstream's code, unchanged.
//
// The fake account is seeded from what the whole program created (LUX_KARPENTER_SEED: the
// discovery-tagged subnets and security group, the node role, the queue), and a loopback
// control endpoint (LUX_KARPENTER_CONTROL, host:port) lets the e2e read the fake instances,
// launch templates and instance profiles, and put a message on the interruption queue.
// Karpenter's own settings come from its usual environment (CLUSTER_NAME, CLUSTER_ENDPOINT,
// INTERRUPTION_QUEUE, DISABLE_LEADER_ELECTION, METRICS_PORT, HEALTH_PROBE_PORT, KUBECONFIG).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/patrickmn/go-cache"
	"github.com/samber/lo"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"sigs.k8s.io/karpenter/pkg/cloudprovider/metrics"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	corecontrollers "sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	coreoperator "sigs.k8s.io/karpenter/pkg/operator"

	awscache "github.com/aws/karpenter-provider-aws/pkg/cache"
	"github.com/aws/karpenter-provider-aws/pkg/cloudprovider"
	"github.com/aws/karpenter-provider-aws/pkg/cloudprovider/registrationhooks"
	"github.com/aws/karpenter-provider-aws/pkg/controllers"
	"github.com/aws/karpenter-provider-aws/pkg/controllers/interruption"
	"github.com/aws/karpenter-provider-aws/pkg/operator"
	"github.com/aws/karpenter-provider-aws/pkg/operator/options"
	"github.com/aws/karpenter-provider-aws/pkg/providers/amifamily"
	"github.com/aws/karpenter-provider-aws/pkg/providers/arczonalshift"
	"github.com/aws/karpenter-provider-aws/pkg/providers/capacityreservation"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instance"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instanceprofile"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instancestatus"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instancetype"
	"github.com/aws/karpenter-provider-aws/pkg/providers/launchtemplate"
	"github.com/aws/karpenter-provider-aws/pkg/providers/placementgroup"
	"github.com/aws/karpenter-provider-aws/pkg/providers/pricing"
	"github.com/aws/karpenter-provider-aws/pkg/providers/securitygroup"
	"github.com/aws/karpenter-provider-aws/pkg/providers/sqs"
	ssmp "github.com/aws/karpenter-provider-aws/pkg/providers/ssm"
	"github.com/aws/karpenter-provider-aws/pkg/providers/subnet"
	"github.com/aws/karpenter-provider-aws/pkg/providers/version"
)

func main() {
	seed, err := loadSeed(os.Getenv("LUX_KARPENTER_SEED"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "karpenter (e2e): %v\n", err)
		os.Exit(1)
	}
	ctx, op := coreoperator.NewOperator()
	cloud := newCloud(seed)
	queue := options.FromContext(ctx).InterruptionQueue
	// controllers.NewControllers builds its SQS client from the AWS config; the interruption
	// controller is added below over the fake queue instead, so NewControllers must not see it.
	withoutQueue := *options.FromContext(ctx)
	withoutQueue.InterruptionQueue = ""

	cfg := aws.Config{Region: seed.Region}
	p := newProviders(ctx, op, cfg, cloud)

	awsCloudProvider := cloudprovider.New(
		p.instanceTypes, p.instances, op.EventRecorder, op.GetClient(), p.amis, p.securityGroups,
		p.capacityReservations, p.placementGroups, op.InstanceTypeStore, p.caBundle,
	)
	overlayUndecoratedCloudProvider := metrics.Decorate(awsCloudProvider)
	cloudProvider := overlay.Decorate(overlayUndecoratedCloudProvider, op.GetClient(), op.InstanceTypeStore)
	clusterState := state.NewCluster(op.Clock, op.GetClient(), cloudProvider)

	awsControllers := controllers.NewControllers(
		options.ToContext(ctx, &withoutQueue), op.Manager, cfg, op.Clock, cloud.ec2, op.GetClient(), op.EventRecorder,
		p.unavailableOfferings, p.ssmCache, p.validationCache, p.recreationCache, cloudProvider,
		p.subnets, p.securityGroups, p.instanceProfiles, p.instances, p.pricing, p.amis,
		p.launchTemplates, p.version, p.instanceTypes, p.capacityReservations, p.placementGroups,
		p.amiResolver, p.zonalShift, p.instanceStatus, p.caBundle,
	)
	if queue != "" {
		if !lo.Contains(seed.Queues, queue) {
			fmt.Fprintf(os.Stderr, "karpenter (e2e): INTERRUPTION_QUEUE %q: no such queue in the account (it has %v)\n", queue, seed.Queues)
			os.Exit(1)
		}
		prov := lo.Must(sqs.NewDefaultProvider(cloud.sqs, cloud.queueURL(queue)))
		awsControllers = append(awsControllers, interruption.NewController(
			op.GetClient(), op.Clock, cloudProvider, op.EventRecorder, prov, nil, p.unavailableOfferings, p.capacityReservations))
	}

	listener, err := net.Listen("tcp", os.Getenv("LUX_KARPENTER_CONTROL"))
	if err != nil || !listener.Addr().(*net.TCPAddr).IP.IsLoopback() {
		fmt.Fprintf(os.Stderr, "karpenter (e2e): LUX_KARPENTER_CONTROL must be a free loopback address: %v\n", err)
		os.Exit(1)
	}
	go serveControl(ctx, listener, cloud)
	log.FromContext(ctx).Info("e2e: Karpenter over the fake AWS", "region", seed.Region, "control", listener.Addr().String())

	op.
		WithControllers(ctx, corecontrollers.NewControllers(
			ctx, op.Manager, op.Clock, op.GetClient(), op.EventRecorder, cloudProvider,
			overlayUndecoratedCloudProvider, clusterState, op.InstanceTypeStore,
			corecontrollers.WithRegistrationHook(registrationhooks.NewPlacementGroupRegistrationHook(p.instances)),
		)...).
		WithControllers(ctx, awsControllers...).
		Start(ctx)
}

// providers are what operator.NewOperator builds, in its order, over the fake APIs.
type providers struct {
	unavailableOfferings                       *awscache.UnavailableOfferings
	ssmCache, validationCache, recreationCache *cache.Cache
	subnets                                    subnet.Provider
	securityGroups                             securitygroup.Provider
	instanceProfiles                           instanceprofile.Provider
	pricing                                    pricing.Provider
	version                                    *version.DefaultProvider
	amis                                       amifamily.Provider
	amiResolver                                amifamily.Resolver
	placementGroups                            placementgroup.Provider
	launchTemplates                            launchtemplate.Provider
	capacityReservations                       capacityreservation.Provider
	instanceTypes                              *instancetype.DefaultProvider
	instances                                  instance.Provider
	instanceStatus                             *instancestatus.DefaultProvider
	zonalShift                                 arczonalshift.Provider
	caBundle                                   *string
}

// newProviders follows pkg/operator/operator.go NewOperator (v1.14.1) line for line, with
// the fakes for ec2.NewFromConfig, iam.NewFromConfig, ssm.NewFromConfig, pricing.NewAPI and
// eks.NewFromConfig. Zonal shift is off (its default), as in NewOperator.
func newProviders(ctx context.Context, op *coreoperator.Operator, cfg aws.Config, c *cloud) providers {
	o := options.FromContext(ctx)
	clusterEndpoint := lo.Must(operator.ResolveClusterEndpoint(ctx, c.eks))
	kubeDNSIP, err := operator.KubeDNSIP(ctx, op.KubernetesInterface)
	if err != nil {
		log.FromContext(ctx).V(1).Info(fmt.Sprintf("unable to detect the IP of the kube-dns service, %s", err))
	}
	zs := arczonalshift.NewNoopProvider()
	unavailableOfferings := awscache.NewUnavailableOfferings()
	ssmCache := cache.New(awscache.SSMCacheTTL, awscache.DefaultCleanupInterval)

	subnetIPCacheTTL := max(awscache.AvailableIPAddressTTL, o.SubnetRefreshInterval+(awscache.AvailableIPAddressTTL-awscache.DefaultTTL))
	subnets := subnet.NewDefaultProvider(c.ec2, cache.New(o.SubnetRefreshInterval, awscache.DefaultCleanupInterval), cache.New(subnetIPCacheTTL, awscache.DefaultCleanupInterval))
	securityGroups := securitygroup.NewDefaultProvider(c.ec2, cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval))
	instanceProfiles := instanceprofile.NewDefaultProvider(c.iam,
		cache.New(awscache.InstanceProfileTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.DefaultCleanupInterval, awscache.DefaultCleanupInterval),
		cache.New(awscache.ProtectedProfilesTTL, awscache.DefaultCleanupInterval),
		cfg.Region)
	prices := pricing.NewDefaultProvider(c.pricing, c.ec2, cfg.Region, o.IsolatedVPC)
	versions := version.NewDefaultProvider(op.KubernetesInterface, c.eks)
	lo.Must0(versions.UpdateVersion(ctx))
	ssmProvider := ssmp.NewDefaultProvider(c.ssm, ssmCache)
	amis := amifamily.NewDefaultProvider(op.Clock, versions, ssmProvider, c.ec2, cache.New(o.AMIRefreshInterval, awscache.DefaultCleanupInterval))
	placementGroups := placementgroup.NewProvider(c.ec2,
		cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.PlacementGroupAvailabilityTTL, awscache.DefaultCleanupInterval))
	amiResolver := amifamily.NewDefaultResolver(cfg.Region)
	caBundle := lo.Must(operator.GetCABundle(ctx, op.GetConfig()))
	launchTemplates := launchtemplate.NewDefaultProvider(ctx,
		cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval),
		c.ec2, c.eks, amiResolver, securityGroups, subnets, placementGroups, caBundle,
		op.Elected(), kubeDNSIP, clusterEndpoint)
	capacityReservations := capacityreservation.NewProvider(c.ec2, op.Clock,
		cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.CapacityReservationAvailabilityTTL, awscache.DefaultCleanupInterval))
	instanceTypes := instancetype.NewDefaultProvider(
		cache.New(awscache.InstanceTypesZonesAndOfferingsTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.InstanceTypesZonesAndOfferingsTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.DiscoveredCapacityCacheTTL, awscache.DefaultCleanupInterval),
		c.ec2, subnets, prices, capacityReservations, placementGroups, unavailableOfferings,
		instancetype.NewDefaultResolver(cfg.Region), zs, op.GetClient())
	lo.Must0(instanceTypes.UpdateInstanceTypes(ctx))
	lo.Must0(instanceTypes.UpdateInstanceTypeOfferings(ctx))
	instances := instance.NewDefaultProvider(ctx, cfg.Region, op.EventRecorder, c.ec2, unavailableOfferings,
		subnets, launchTemplates, capacityReservations, placementGroups, zs, cache.New(cache.NoExpiration, cache.NoExpiration))

	operator.SetupIndexers(ctx, op.Manager)
	return providers{
		unavailableOfferings: unavailableOfferings,
		ssmCache:             ssmCache,
		validationCache:      cache.New(awscache.ValidationTTL, awscache.DefaultCleanupInterval),
		recreationCache:      cache.New(awscache.RecreationTTL, awscache.DefaultCleanupInterval),
		subnets:              subnets,
		securityGroups:       securityGroups,
		instanceProfiles:     instanceProfiles,
		pricing:              prices,
		version:              versions,
		amis:                 amis,
		amiResolver:          amiResolver,
		placementGroups:      placementGroups,
		launchTemplates:      launchTemplates,
		capacityReservations: capacityReservations,
		instanceTypes:        instanceTypes,
		instances:            instances,
		instanceStatus:       instancestatus.NewDefaultProvider(c.ec2, op.Clock),
		zonalShift:           zs,
		caBundle:             caBundle,
	}
}

func loadSeed(path string) (seed, error) {
	var s seed
	raw, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("LUX_KARPENTER_SEED: %w", err)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("LUX_KARPENTER_SEED %s: %w", path, err)
	}
	if s.Region == "" || len(s.Subnets) == 0 || len(s.SecurityGroups) == 0 || len(s.Roles) == 0 {
		return s, fmt.Errorf("LUX_KARPENTER_SEED %s: needs a region, subnets, security groups and roles", path)
	}
	return s, nil
}
