package wellknown

import "k8s.io/apimachinery/pkg/runtime/schema"

// The custom resources the tools read and the tests check.
var (
	NodePools                 = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	NodeClaims                = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	EC2NodeClasses            = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
	AutoscalingRunnerSets     = schema.GroupVersionResource{Group: "actions.github.com", Version: "v1alpha1", Resource: "autoscalingrunnersets"}
	CustomResourceDefinitions = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// ARCGroup is the API group of ARC's custom resources (its four CRDs).
const ARCGroup = "actions.github.com"
