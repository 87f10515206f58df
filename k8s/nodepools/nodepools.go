// Package nodepools builds a GPU pool's Karpenter objects (its NodePool and EC2NodeClass, and
// a spot pool's cool-down NodePool) from Karpenter's own Go types: pure builders, which the
// k8s layer's PoolNodes component (k8s/gpupool.go) registers, the retrier patches
// (cmd/gpuci/internal/live) and nodepools_test.go checks against Karpenter's CRDs. Apart
// from the components, so what only needs the objects links no Pulumi SDK.
package nodepools

import (
	"fmt"
	"strconv"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/apiobject"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// gpuResource is what runner pods request and a pool's limit counts.
const gpuResource corev1.ResourceName = wellknown.GPUResource

// GPUTaint is the taint on every GPU node.
var GPUTaint = corev1.Taint{Key: wellknown.GPUTaintKey, Value: wellknown.GPUTaintValue, Effect: corev1.TaintEffectNoSchedule}

// NodePoolFor builds the Karpenter NodePool for a pool from Karpenter's own Go types.
func NodePoolFor(pool config.GPUPool) *karpv1.NodePool {
	// The pool's durations are read and checked once, in config; Never leaves ExpireAfter's
	// duration unset, which Karpenter writes as "Never".
	consolidateAfter, tgp := pool.ConsolidateAfter.Std(), pool.TerminationGracePeriod.Std()
	expireAfter := karpv1.NillableDuration{}
	if !pool.ExpireAfter.IsNever() {
		expireAfter.Duration = ptr(pool.ExpireAfter.Std())
	}
	labels := map[string]string{
		wellknown.GPUPresentLabel: "true",
		wellknown.WorkloadLabel:   wellknown.WorkloadValue,
		wellknown.PoolLabel:       pool.Name,
	}
	if pool.NodeOS() == config.NodeOSBottlerocket {
		labels[wellknown.NodeOSLabel] = config.NodeOSBottlerocket
	}
	return &karpv1.NodePool{
		TypeMeta:   k8smeta.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodePool"},
		ObjectMeta: k8smeta.ObjectMeta{Name: pool.Name},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{
				ObjectMeta: karpv1.ObjectMeta{Labels: labels},
				Spec: karpv1.NodeClaimTemplateSpec{
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
						{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: pool.CapacityTypeNames()},
						{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: pool.InstanceTypes},
						{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
						{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
					},
					NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: pool.Name},
					Taints:       []corev1.Taint{GPUTaint},
					// Runner pods carry karpenter.sh/do-not-disrupt; this bounds how long an
					// expired or drifted node waits for a running job.
					TerminationGracePeriod: &k8smeta.Duration{Duration: tgp},
					ExpireAfter:            expireAfter,
				},
			},
			Disruption: karpv1.Disruption{
				// Only empty nodes are removed: a GPU node runs one job at a time and is
				// terminated ConsolidateAfter after its last job ends.
				ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmpty,
				ConsolidateAfter:    karpv1.NillableDuration{Duration: &consolidateAfter},
				Budgets:             []karpv1.Budget{{Nodes: "100%"}},
			},
			Limits: karpv1.Limits{gpuResource: *resource.NewQuantity(int64(pool.GPULimit), resource.DecimalSI)},
		},
	}
}

// coolDownWeight puts a cool-down NodePool before its pool's (weight 0): Karpenter tries a
// pod's NodePools by weight, highest first (sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/provisioning/provisioner.go:293, nodepoolutils.OrderByWeight), and passes
// over one whose remaining limits fit no instance type (scheduling/scheduler.go:709-718), as
// a cool-down NodePool's do while its limit is 0.
const coolDownWeight int32 = 50

// CoolsDown reports whether pool has a cool-down NodePool: it may launch spot, it is not an
// on-demand twin, and the stack's retrier cools down (config.Retrier.SpotCoolDown).
func CoolsDown(pool config.GPUPool, r config.Retrier) bool {
	return r.Enabled() && r.SpotCoolDown > 0 && pool.RetryTwinOf == "" && pool.Allows(config.CapacitySpot)
}

// CoolDownNodePoolFor is pool's cool-down NodePool: the pool's own nodes (its labels, so its
// runner pods fit, its EC2NodeClass, taint and disruption) on on-demand capacity, tried
// before the pool's NodePool and launching nothing while its GPU limit is 0. The in-cluster
// retrier raises the limit to the pool's for a cool-down after it re-runs a job a spot
// interruption ended (wellknown.CoolDownUntilAnnotation), and lowers it again after; the
// program declares 0 and never sets it back (GPUPool's ignoreChanges), so an up during a
// cool-down leaves it running.
func CoolDownNodePoolFor(pool config.GPUPool) *karpv1.NodePool {
	np := NodePoolFor(pool)
	np.Name = wellknown.CoolDownNodePool(pool.Name)
	np.Annotations = map[string]string{wellknown.CoolDownGPULimitAnnotation: strconv.Itoa(pool.GPULimit)}
	for i, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == karpv1.CapacityTypeLabelKey {
			np.Spec.Template.Spec.Requirements[i].Values = []string{karpv1.CapacityTypeOnDemand}
		}
	}
	np.Spec.Weight = ptr(coolDownWeight)
	np.Spec.Limits = karpv1.Limits{gpuResource: *resource.NewQuantity(0, resource.DecimalSI)}
	return np
}

// EC2NodeClassFor builds the EC2NodeClass for a pool from Karpenter's AWS Go types.
func EC2NodeClassFor(pool config.GPUPool, clusterName, nodeRole string, publicIP bool, tags map[string]string) *awsv1.EC2NodeClass {
	discovery := map[string]string{wellknown.DiscoveryTag: clusterName}
	nc := &awsv1.EC2NodeClass{
		TypeMeta:   k8smeta.TypeMeta{APIVersion: "karpenter.k8s.aws/v1", Kind: "EC2NodeClass"},
		ObjectMeta: k8smeta.ObjectMeta{Name: pool.Name},
		Spec: awsv1.EC2NodeClassSpec{
			// Karpenter resolves the NVIDIA variant of this AL2023 release for GPU types.
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: versions.GPUNodeAMIAlias}},
			Role:                       nodeRole,
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discovery}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discovery}},
			// IMDSv2 only, hop limit 1: job containers cannot reach the node's credentials.
			MetadataOptions: &awsv1.MetadataOptions{
				HTTPEndpoint:            ptr("enabled"),
				HTTPProtocolIPv6:        ptr("disabled"),
				HTTPPutResponseHopLimit: ptr(int64(wellknown.IMDSHopLimit)),
				HTTPTokens:              ptr("required"),
			},
			BlockDeviceMappings: blockDevices(pool),
			Tags:                tags,
		},
	}
	if pool.NodeOS() == config.NodeOSBottlerocket {
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: versions.GPUNodeBottlerocketAlias}}
	}
	if pool.ImagesOnInstanceStore() {
		// The kubelet's, containerd's and the pods' logs' directories on the instance's NVMe:
		// Karpenter sets nodeadm's localStorage strategy RAID0 (karpenter-provider-aws v1.14.1
		// pkg/providers/amifamily/bootstrap/nodeadm.go), whose setup-local-disks builds an md
		// array even of one disk and bind-mounts them onto it (amazon-eks-ami), before the
		// kubelet starts. A cold node unpacks its images there, not onto gp3 at the instance's
		// EBS bandwidth (g4dn.xlarge: 118.75 MB/s sustained), and Karpenter counts the NVMe as
		// the node's ephemeral storage (125 GB on g4dn.xlarge).
		nc.Spec.InstanceStorePolicy = ptr(awsv1.InstanceStorePolicyRAID0)
	}
	if publicIP {
		nc.Spec.AssociatePublicIPAddress = ptr(true)
	}
	return nc
}

// blockDevices are the pool's volumes, sized and provisioned by the pool's rootVolume* keys:
// AL2023's root volume (its images and kubelet are on the instance store:
// ImagesOnInstanceStore), or Bottlerocket's data volume (/dev/xvdb, the kubelet's and
// containerd's; its 4 GiB OS volume is Karpenter's default), which a pool with an image
// snapshot restores from it.
func blockDevices(pool config.GPUPool) []*awsv1.BlockDeviceMapping {
	volume := resource.MustParse(fmt.Sprintf("%dGi", pool.RootVolumeGi))
	images := &awsv1.BlockDevice{
		VolumeSize: &volume,
		VolumeType: ptr("gp3"),
		// A cold node writes every image it pulls here, unless they go to the instance's NVMe
		// (ImagesOnInstanceStore, below; config.DefaultRootVolumeThroughput).
		Throughput:          ptr(int64(pool.RootVolumeThroughput)),
		IOPS:                ptr(int64(pool.RootVolumeIOPS)),
		Encrypted:           ptr(true),
		DeleteOnTermination: ptr(true),
	}
	if pool.NodeOS() != config.NodeOSBottlerocket {
		return []*awsv1.BlockDeviceMapping{{DeviceName: ptr("/dev/xvda"), RootVolume: true, EBS: images}}
	}
	images.SnapshotID = ptr(pool.ImageSnapshotID)
	osVolume := resource.MustParse("4Gi")
	return []*awsv1.BlockDeviceMapping{
		{DeviceName: ptr("/dev/xvda"), EBS: &awsv1.BlockDevice{
			VolumeSize: &osVolume, VolumeType: ptr("gp3"), Encrypted: ptr(true), DeleteOnTermination: ptr(true),
		}},
		{DeviceName: ptr("/dev/xvdb"), RootVolume: true, EBS: images},
	}
}

// NodePoolObject is the pool's NodePool as sent to the API server (JSON form, nulls
// dropped).
func NodePoolObject(pool config.GPUPool) (map[string]any, error) {
	return apiobject.ToMap(NodePoolFor(pool))
}

// CoolDownNodePoolObject is CoolDownNodePoolFor(pool) as sent to the API server.
func CoolDownNodePoolObject(pool config.GPUPool) (map[string]any, error) {
	return apiobject.ToMap(CoolDownNodePoolFor(pool))
}

// EC2NodeClassObject is the pool's EC2NodeClass as sent to the API server. (Karpenter's type
// serializes an unset capacityReservationSelectorTerms as null, which its own CRD rejects.)
func EC2NodeClassObject(pool config.GPUPool, clusterName, nodeRole string, publicIP bool, tags map[string]string) (map[string]any, error) {
	return apiobject.ToMap(EC2NodeClassFor(pool, clusterName, nodeRole, publicIP, tags))
}

func ptr[T any](v T) *T { return &v }
