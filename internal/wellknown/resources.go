package wellknown

import "k8s.io/apimachinery/pkg/runtime/schema"

// The custom resources the tools read and the tests check.
var (
	NodePools                 = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	NodeClaims                = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	EC2NodeClasses            = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
	AutoscalingRunnerSets     = schema.GroupVersionResource{Group: "actions.github.com", Version: "v1alpha1", Resource: "autoscalingrunnersets"}
	EphemeralRunners          = schema.GroupVersionResource{Group: "actions.github.com", Version: "v1alpha1", Resource: "ephemeralrunners"}
	CustomResourceDefinitions = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// ARCGroup is the API group of ARC's custom resources (its four CRDs).
const ARCGroup = "actions.github.com"

// ARCRunnerGroupAnnotation, on an AutoscalingRunnerSet, is the runner group GitHub has its
// scale set in: ARC writes it once GitHub has created or moved the scale set there, and
// leaves it as it was when GitHub has no group of the spec's name
// (actions-runner-controller gha-runner-scale-set-0.14.2 controllers/actions.github.com:
// constants.go:50, autoscalingrunnerset_controller.go:200-205, 563, 594-611).
const ARCRunnerGroupAnnotation = "actions.github.com/runner-group-name"
