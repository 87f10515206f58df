package k8s

import (
	"encoding/json"
	"fmt"
)

// Kubernetes objects and Helm values are built from upstream Go API types (corev1,
// Karpenter's v1 types) and converted here, never written as YAML strings.

// unstructured converts a typed API object to its JSON form with nulls removed (corev1
// types serialize unset fields such as metadata.creationTimestamp as null, which Helm
// values and a server-side apply diff would otherwise carry around). It goes through JSON,
// as kubectl does, so the types' own MarshalJSON apply: apimachinery's converter mishandles
// Karpenter's NillableDuration.
func unstructured(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	var u map[string]any
	if err := json.Unmarshal(b, &u); err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	return dropNulls(u).(map[string]any), nil
}

// mustUnstructured is unstructured for values built from constants in this package, where
// failure is a programming error.
func mustUnstructured(obj any) map[string]any {
	u, err := unstructured(obj)
	if err != nil {
		panic(err)
	}
	return u
}

func dropNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if x == nil {
				continue
			}
			out[k] = dropNulls(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = dropNulls(x)
		}
		return out
	}
	return v
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
	return dropNulls(out).([]any)
}
