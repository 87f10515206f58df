// Package apiobject converts typed Kubernetes API objects (corev1, Karpenter's v1 types) to
// the JSON form an API server and Helm take: the one conversion the Kubernetes layer and its
// pure builders share, so no object is ever written as a YAML string.
package apiobject

import (
	"encoding/json"
	"fmt"
)

// ToMap converts a typed API object to its JSON form with nulls removed (corev1 types
// serialize unset fields such as metadata.creationTimestamp as null, which Helm values and a
// server-side apply diff would otherwise carry around). It goes through JSON, as kubectl
// does, so the types' own MarshalJSON apply: apimachinery's converter mishandles Karpenter's
// NillableDuration.
func ToMap(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	var u map[string]any
	if err := json.Unmarshal(b, &u); err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	return DropNulls(u).(map[string]any), nil
}

// DropNulls is v (decoded JSON) without its null values, at any depth.
func DropNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if x == nil {
				continue
			}
			out[k] = DropNulls(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = DropNulls(x)
		}
		return out
	}
	return v
}
