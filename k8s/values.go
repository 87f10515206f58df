package k8s

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/luxfi/lux-gpu-ci/internal/apiobject"
)

// Kubernetes objects and Helm values are built from upstream Go API types (corev1,
// Karpenter's v1 types) and converted here, never written as YAML strings.

// mustUnstructured is apiobject.ToMap for values built from constants in this package, where
// failure is a programming error.
func mustUnstructured(obj any) map[string]any {
	u, err := apiobject.ToMap(obj)
	if err != nil {
		panic(err)
	}
	return u
}

// jsonList converts a slice of typed objects (tolerations, say) to Helm values.
func jsonList[T any](items ...T) []any {
	b, err := json.Marshal(items)
	if err != nil {
		panic(err)
	}
	var out []any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return apiobject.DropNulls(out).([]any)
}

// newObject declares a Kubernetes object built from its upstream Go type (obj, of kind tm,
// named by meta): everything but its metadata goes to the API server as the type serializes
// it. Any kind, under the type token of the provider's typed resource of that kind
// (kubernetes:<group>/<version>:<kind>; core/v1 for the core group, whose bare apiVersion
// "v1" would make a token kubernetes:v1:<Kind> the provider does not know).
func newObject(ctx *pulumi.Context, logical string, tm k8smeta.TypeMeta, meta k8smeta.ObjectMeta, obj any, opts ...pulumi.ResourceOption) (*apiextensions.CustomResource, error) {
	u, err := apiobject.ToMap(obj)
	if err != nil {
		return nil, err
	}
	fields := kubernetes.UntypedArgs{}
	for k, v := range u {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			fields[k] = v
		}
	}
	m := &metav1.ObjectMetaArgs{Name: pulumi.String(meta.Name)}
	if meta.Namespace != "" {
		m.Namespace = pulumi.String(meta.Namespace)
	}
	if len(meta.Labels) > 0 {
		m.Labels = pulumi.ToStringMap(meta.Labels)
	}
	if len(meta.Annotations) > 0 {
		m.Annotations = pulumi.ToStringMap(meta.Annotations)
	}
	fields["apiVersion"], fields["kind"], fields["metadata"] = pulumi.String(tm.APIVersion), pulumi.String(tm.Kind), m
	groupVersion := tm.APIVersion
	if !strings.Contains(groupVersion, "/") {
		groupVersion = "core/" + groupVersion
	}
	var r apiextensions.CustomResource
	if err := ctx.RegisterResource(fmt.Sprintf("kubernetes:%s:%s", groupVersion, tm.Kind), logical, fields, &r, opts...); err != nil {
		return nil, err
	}
	return &r, nil
}

func ptr[T any](v T) *T { return &v }
