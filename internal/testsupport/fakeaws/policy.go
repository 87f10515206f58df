package fakeaws

import (
	"encoding/json"
	"fmt"
)

// PolicyDocument is an IAM policy document as RenderPolicy writes it.
type PolicyDocument struct {
	Version   string            `json:"Version"`
	ID        string            `json:"Id,omitempty"`
	Statement []PolicyStatement `json:"Statement"`
}

// PolicyStatement is one statement of a PolicyDocument. Principal is "*" or a map of
// principal type to identifiers.
type PolicyStatement struct {
	Sid         string                         `json:"Sid,omitempty"`
	Effect      string                         `json:"Effect"`
	Action      []string                       `json:"Action,omitempty"`
	NotAction   []string                       `json:"NotAction,omitempty"`
	Resource    []string                       `json:"Resource,omitempty"`
	NotResource []string                       `json:"NotResource,omitempty"`
	Principal   any                            `json:"Principal,omitempty"`
	Condition   map[string]map[string][]string `json:"Condition,omitempty"`
}

// RenderPolicy does what the AWS provider's getPolicyDocument does, in a normalised form:
// every Action/Resource/Condition value is a list, and Effect defaults to Allow.
func RenderPolicy(args map[string]any) (string, error) {
	doc := PolicyDocument{Version: "2012-10-17"}
	doc.ID, _ = args["policyId"].(string)
	strs := func(v any) []string {
		var out []string
		for _, x := range asList(v) {
			out = append(out, x.(string))
		}
		return out
	}
	for _, raw := range asList(args["statements"]) {
		s := raw.(map[string]any)
		st := PolicyStatement{Effect: "Allow", Action: strs(s["actions"]), NotAction: strs(s["notActions"]), Resource: strs(s["resources"]), NotResource: strs(s["notResources"])}
		st.Sid, _ = s["sid"].(string)
		if e, _ := s["effect"].(string); e != "" {
			st.Effect = e
		}
		for _, p := range asList(s["principals"]) {
			pm := p.(map[string]any)
			if pm["type"] == "*" {
				st.Principal = "*"
				continue
			}
			principals, _ := st.Principal.(map[string][]string)
			if principals == nil {
				principals = map[string][]string{}
			}
			typ := pm["type"].(string)
			principals[typ] = append(principals[typ], strs(pm["identifiers"])...)
			st.Principal = principals
		}
		for _, c := range asList(s["conditions"]) {
			cm := c.(map[string]any)
			test, variable := cm["test"].(string), cm["variable"].(string)
			if st.Condition == nil {
				st.Condition = map[string]map[string][]string{}
			}
			if st.Condition[test] == nil {
				st.Condition[test] = map[string][]string{}
			}
			if _, dup := st.Condition[test][variable]; dup {
				return "", fmt.Errorf("condition %s %s given twice", test, variable)
			}
			st.Condition[test][variable] = strs(cm["values"])
		}
		// IAM's grammar (IAM User Guide, "IAM JSON policy elements: Resource"/"NotResource"):
		// a statement names its resources one way or the other, never both; one that grants a
		// principal (a trust or resource policy) may name none, an identity policy's must.
		switch {
		case (st.Action == nil) == (st.NotAction == nil):
			return "", fmt.Errorf("statement %q must have exactly one of Action and NotAction", st.Sid)
		case st.Resource != nil && st.NotResource != nil:
			return "", fmt.Errorf("statement %q has both Resource and NotResource", st.Sid)
		case st.Principal == nil && st.Resource == nil && st.NotResource == nil:
			return "", fmt.Errorf("statement %q has neither Resource nor NotResource (MalformedPolicyDocument)", st.Sid)
		}
		doc.Statement = append(doc.Statement, st)
	}
	b, err := json.Marshal(doc)
	return string(b), err
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
