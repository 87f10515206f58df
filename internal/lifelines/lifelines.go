// Package lifelines is the stack's destroy-order contract, stated once. While its finalizers
// run on a destroy, Karpenter calls EC2 and IAM (to terminate GPU instances and delete
// instance profiles and launch templates) and ARC calls GitHub (to delete the scale sets):
// each part of the cluster needs some AWS resources — its lifelines — until it is gone, so it
// must depend on them, and the engine then deletes it first, whatever it is asked to destroy
// (the whole stack, a target, a replacement).
//
// The program wires each contract: infra collects its lifelines into a Set as it creates them,
// and k8s makes the contract's dependents depend on that Set. The tests check the deployed
// graph against the same contracts, under mocks and on a real stack's state
// (internal/testsupport/destroyorder; stack/destroy_order_test.go, make e2e).
package lifelines

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// Contract is one destroy-order rule: every custom resource under a component of one of
// DependentsUnder (of DependentTypes, when given) depends, transitively, on every lifeline: a
// resource of one of LifelineTypes (under a component of type LifelinesUnder, when given).
type Contract struct {
	// Dependents names the dependents, and Why says what they need the lifelines for.
	Dependents, Why string
	DependentsUnder []string
	DependentTypes  []string
	LifelineTypes   []string
	LifelinesUnder  string
}

var (
	// Cluster: everything in the cluster runs on the system nodes, reaches AWS and GitHub
	// through the routes, NAT and CoreDNS, and pulls its images through the image cache.
	Cluster = Contract{
		Dependents:      "Kubernetes-layer resources",
		Why:             "everything in the cluster runs on the system nodes, reaches AWS and GitHub through the routes, NAT and CoreDNS, and pulls its images through the image cache and the S3 endpoint",
		DependentsUnder: []string{wellknown.KubernetesLayerComponent},
		LifelineTypes: []string{
			"aws:ec2/routeTable:RouteTable", "aws:ec2/routeTableAssociation:RouteTableAssociation",
			"aws:ec2/natGateway:NatGateway", "aws:ec2/eip:Eip", "aws:ec2/internetGateway:InternetGateway",
			"aws:ec2/vpcEndpoint:VpcEndpoint",
			"aws:eks/addon:Addon", "eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup",
			"aws:ecr/pullThroughCacheRule:PullThroughCacheRule", "aws:secretsmanager/secretVersion:SecretVersion",
		},
	}
	// Karpenter: it drains and terminates the GPU instances with its own credentials.
	Karpenter = Contract{
		Dependents:      "Karpenter's releases and GPU pools",
		Why:             "Karpenter drains and terminates GPU instances with its own IAM, credentials, node access entry and interruption queue",
		DependentsUnder: []string{wellknown.KarpenterComponent, wellknown.GPUPoolComponent},
		LifelineTypes: []string{
			"aws:iam/role:Role", "aws:iam/policy:Policy", "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
			"aws:eks/podIdentityAssociation:PodIdentityAssociation", "aws:eks/accessEntry:AccessEntry",
			"aws:sqs/queue:Queue", "aws:sqs/queuePolicy:QueuePolicy",
		},
		LifelinesUnder: wellknown.KarpenterAWSComponent,
	}
	// ARCCRDs: deleting a CRD deletes its objects at once, with no controller to clean up.
	ARCCRDs = Contract{
		Dependents:      "ARC's releases",
		Why:             "deleting a CRD deletes its objects at once: the scale sets and runners must be gone, by the controller, before ARC's CRDs",
		DependentsUnder: []string{wellknown.RunnersComponent},
		DependentTypes:  []string{"kubernetes:helm.sh/v3:Release"},
		LifelineTypes:   []string{"kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"},
		LifelinesUnder:  wellknown.RunnersComponent,
	}

	// All are the stack's contracts.
	All = []Contract{Cluster, Karpenter, ARCCRDs}
)

// Set is one contract's lifelines in a stack, as the program creates them.
type Set struct {
	Contract  Contract
	Resources []pulumi.Resource
}

// Of starts the contract's Set with resources.
func Of(c Contract, resources ...pulumi.Resource) Set {
	return Set{Contract: c, Resources: resources}
}

// Add adds lifelines.
func (s *Set) Add(resources ...pulumi.Resource) { s.Resources = append(s.Resources, resources...) }

// Keep is the option a dependent takes: it depends on every lifeline, so it is created after
// them and deleted before any of them.
func (s Set) Keep() pulumi.ResourceOption { return pulumi.DependsOn(s.Resources) }
