// Package crdvalidation checks custom resources against their CustomResourceDefinitions in
// process, the way kube-apiserver does on create: prune unknown fields, apply defaults,
// validate the structural schema, list types and object meta, then run the CEL rules.
//
// Only tests use it, to prove that the NodePools and EC2NodeClasses this program declares
// are accepted by Karpenter's own CRDs — the ones embedded in the karpenter-provider-aws Go
// module at the version go.mod pins. The program never links it: the API server's
// validation and CEL are far bigger than the program that needs them checked.
package crdvalidation

import (
	"context"
	"encoding/json"
	"fmt"

	awsapis "github.com/aws/karpenter-provider-aws/pkg/apis"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// Validator validates objects of the kinds its CRDs define.
type Validator struct {
	kinds map[string]*version // by "group/version, Kind=kind"
}

type version struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
	namespaced bool
}

// Karpenter returns a validator for the AWS provider's NodePool and EC2NodeClass CRDs (the
// AWS NodePool CRD adds the karpenter.k8s.aws label rules to the core one).
func Karpenter() (*Validator, error) {
	return New(awsapis.NodePoolCRD, awsapis.EC2NodeClassCRD)
}

// New builds a validator from CRD manifests (YAML or JSON).
func New(crds ...[]byte) (*Validator, error) {
	v := &Validator{kinds: map[string]*version{}}
	for _, raw := range crds {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			return nil, fmt.Errorf("reading CRD: %w", err)
		}
		for _, ver := range crd.Spec.Versions {
			if !ver.Served || ver.Schema == nil {
				continue
			}
			internal := &apiextensions.CustomResourceValidation{}
			if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(ver.Schema, internal, nil); err != nil {
				return nil, fmt.Errorf("%s %s: converting schema: %w", crd.Name, ver.Name, err)
			}
			ss, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
			if err != nil {
				return nil, fmt.Errorf("%s %s: structural schema: %w", crd.Name, ver.Name, err)
			}
			if err := structuraldefaulting.PruneDefaults(ss); err != nil {
				return nil, fmt.Errorf("%s %s: defaults: %w", crd.Name, ver.Name, err)
			}
			sv, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
			if err != nil {
				return nil, fmt.Errorf("%s %s: schema validator: %w", crd.Name, ver.Name, err)
			}
			key := fmt.Sprintf("%s/%s, Kind=%s", crd.Spec.Group, ver.Name, crd.Spec.Names.Kind)
			v.kinds[key] = &version{
				structural: ss,
				schema:     sv,
				cel:        cel.NewValidator(ss, true, celconfig.PerCallLimit),
				namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			}
		}
	}
	return v, nil
}

// Validate checks one object (apiVersion, kind, metadata, spec as decoded JSON). It works on
// a copy: the caller's object is not pruned or defaulted. Unlike the API server, it runs
// CEL even after a schema error, so it reports everything at once.
func (v *Validator) Validate(obj map[string]any) field.ErrorList {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	ver, ok := v.kinds[fmt.Sprintf("%s, Kind=%s", apiVersion, kind)]
	if !ok {
		return field.ErrorList{field.NotSupported(field.NewPath("kind"), apiVersion+" "+kind, v.known())}
	}
	u := runtime.DeepCopyJSON(obj)

	var errs field.ErrorList
	meta, _ := u["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, msg))
	}
	if ns, _ := meta["namespace"].(string); ns != "" && !ver.namespaced {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "namespace"), ns, "not allowed on a cluster-scoped resource"))
	}

	structuralpruning.Prune(u, ver.structural, true)
	structuraldefaulting.Default(u, ver.structural)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u, ver.schema)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, ver.structural, u)...)
	celErrs, _ := ver.cel.Validate(context.Background(), nil, ver.structural, u, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// ToUnstructured converts a typed object through JSON, as kubectl does. (The apimachinery
// converter mishandles Karpenter's NillableDuration.)
func ToUnstructured(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var u map[string]any
	if err := json.Unmarshal(b, &u); err != nil {
		return nil, err
	}
	return u, nil
}

func (v *Validator) known() []string {
	var ks []string
	for k := range v.kinds {
		ks = append(ks, k)
	}
	return ks
}
