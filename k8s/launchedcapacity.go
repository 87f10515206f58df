package k8s

import (
	"fmt"

	admissionv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/admissionregistration/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	k8scorev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// A runner-form job's summary says whether its node is spot or on-demand, which in a pool that
// allows both only the Node tells (Karpenter's karpenter.sh/capacity-type label). The runner
// pod runs the job's code, so it has no token to read its Node with (#36), and the API server
// copies only the zone and region from a Node onto a pod it binds (the PodTopologyLabels
// admission plugin's fixed list: plugin/pkg/admission/podtopologylabels/admission.go:44 at
// v1.36.3). So the API server is asked to copy the capacity type too: a MutatingAdmissionPolicy
// on the scheduler's Binding of a pod in the runners' namespace annotates the Binding with its
// target Node's label, and the API server copies a Binding's annotations onto the pod as it
// binds it (pkg/registry/core/pod/storage/storage.go setPodNodeAndMetadata at v1.36.3). The pod
// gets the annotation with its node name, before its kubelet sees it, so an env var from the
// downward API holds it when the runner starts (launchedCapacityEnv).
//
// The policy's parameter is the Node: its binding selects every Node that has the label, and
// the policy's match condition keeps only the one the pod is bound to, before any mutation. It
// fails open: a pod always binds, without the annotation if anything fails (a Node the API
// server's cache does not hold yet), and its summary then says the pool's types.
const (
	LaunchedCapacityPolicy = "gpuci-launched-capacity"
	// LaunchedCapacityMinKubernetesMinor is the first Kubernetes minor whose API server serves
	// admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, on by default (GA in 1.36:
	// pkg/features/kube_features.go at v1.36.3; beta and off by default in 1.34 and 1.35). On
	// an older control plane the policy is not declared; a 1.35 → 1.36 upgrade declares it in
	// the same up, after the control plane (the provider waits for the cluster's kubeconfig).
	LaunchedCapacityMinKubernetesMinor = 36
)

// launchedCapacityMatch keeps, of the Nodes the binding selects, the Binding's target;
// launchedCapacityMutation annotates the Binding with that Node's capacity type.
var (
	launchedCapacityMatch    = "params.metadata.name == object.target.name"
	launchedCapacityMutation = fmt.Sprintf("Object{metadata: Object.metadata{annotations: {%q: params.metadata.labels[%q]}}}",
		wellknown.LaunchedCapacityAnnotation, karpv1.CapacityTypeLabelKey)
)

// launchedCapacityEnv gives a runner-form runner its node's capacity type, or "" where the
// policy did not annotate its pod (a control plane before 1.36).
var launchedCapacityEnv = k8scorev1.EnvVar{Name: "GPUCI_LAUNCHED_CAPACITY", ValueFrom: &k8scorev1.EnvVarSource{FieldRef: &k8scorev1.ObjectFieldSelector{
	FieldPath: "metadata.annotations['" + wellknown.LaunchedCapacityAnnotation + "']",
}}}

// newLaunchedCapacityPolicy declares the policy and its binding to the namespaces where GPU
// pods run: the runners' (a runner-form runner) and the container-form pools' jobs' (a job
// pod, whose sampler reports its node's capacity to the runner's summary).
func newLaunchedCapacityPolicy(ctx *pulumi.Context, name string, podNamespaces []string, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	meta := &metav1.ObjectMetaArgs{Name: pulumi.String(LaunchedCapacityPolicy)}
	policy, err := admissionv1.NewMutatingAdmissionPolicy(ctx, name+"-launched-capacity", &admissionv1.MutatingAdmissionPolicyArgs{
		Metadata: meta,
		Spec: &admissionv1.MutatingAdmissionPolicySpecArgs{
			ParamKind: &admissionv1.ParamKindArgs{ApiVersion: pulumi.String("v1"), Kind: pulumi.String("Node")},
			MatchConstraints: &admissionv1.MatchResourcesArgs{ResourceRules: admissionv1.NamedRuleWithOperationsArray{
				admissionv1.NamedRuleWithOperationsArgs{
					ApiGroups: pulumi.StringArray{pulumi.String("")}, ApiVersions: pulumi.StringArray{pulumi.String("v1")},
					Operations: pulumi.StringArray{pulumi.String("CREATE")}, Resources: pulumi.StringArray{pulumi.String("pods/binding")},
				},
			}},
			MatchConditions: admissionv1.MatchConditionArray{admissionv1.MatchConditionArgs{
				Name: pulumi.String("bound-to-this-node"), Expression: pulumi.String(launchedCapacityMatch),
			}},
			FailurePolicy:      pulumi.String("Ignore"),
			ReinvocationPolicy: pulumi.String("Never"),
			Mutations: admissionv1.MutationArray{admissionv1.MutationArgs{
				PatchType:          pulumi.String("ApplyConfiguration"),
				ApplyConfiguration: &admissionv1.ApplyConfigurationArgs{Expression: pulumi.String(launchedCapacityMutation)},
			}},
		},
	}, opts...)
	if err != nil {
		return nil, err
	}
	binding, err := admissionv1.NewMutatingAdmissionPolicyBinding(ctx, name+"-launched-capacity", &admissionv1.MutatingAdmissionPolicyBindingArgs{
		Metadata: meta,
		Spec: &admissionv1.MutatingAdmissionPolicyBindingSpecArgs{
			PolicyName: pulumi.String(LaunchedCapacityPolicy),
			ParamRef: &admissionv1.ParamRefArgs{
				Selector: &metav1.LabelSelectorArgs{MatchExpressions: metav1.LabelSelectorRequirementArray{
					metav1.LabelSelectorRequirementArgs{Key: pulumi.String(karpv1.CapacityTypeLabelKey), Operator: pulumi.String("Exists")},
				}},
				// No GPU node yet (no Node has the label) is not an error: nothing to copy.
				ParameterNotFoundAction: pulumi.String("Allow"),
			},
			MatchResources: &admissionv1.MatchResourcesArgs{NamespaceSelector: &metav1.LabelSelectorArgs{
				MatchExpressions: metav1.LabelSelectorRequirementArray{metav1.LabelSelectorRequirementArgs{
					Key: pulumi.String(k8scorev1.LabelMetadataName), Operator: pulumi.String("In"), Values: pulumi.ToStringArray(podNamespaces),
				}},
			}},
		},
	}, append(opts, pulumi.DependsOn([]pulumi.Resource{policy}))...)
	if err != nil {
		return nil, err
	}
	return []pulumi.Resource{policy, binding}, nil
}
