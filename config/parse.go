package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// parser reads raw values, recording a precise error for each one it cannot use.
type parser struct {
	get      Getter
	isSecret func(key string) bool
	errs     []error
}

// fail records an error for key (an unqualified project key, or "aws:region") with the
// value that fixes it, or for a credential the command that prints it: a credential goes in
// on standard input, never on the command line, where every process sees it and the shell's
// history keeps it. A fix that is not a value is failHow's.
func (p *parser) fail(key, problem, fix string) {
	short := key
	how := fmt.Sprintf("pulumi config set %s %s", short, shellQuote(fix))
	switch {
	case credentials[short]:
		how = fmt.Sprintf("%s | pulumi config set --secret %s", fix, short)
	case structured[short]:
		how = fmt.Sprintf("set %s in Pulumi.<stack>.yaml, e.g. %s", qualify(short), fix)
	}
	p.failHow(key, problem, how)
}

// failHow records an error for key with a complete fix instruction.
func (p *parser) failHow(key, problem, how string) {
	if !strings.Contains(key, ":") {
		key = qualify(key)
	}
	p.errs = append(p.errs, fmt.Errorf("%s: %s (fix: %s)", key, problem, how))
}

func (p *parser) raw(key string) (string, bool) {
	v, ok := p.get(qualify(key))
	return v, ok
}

func (p *parser) region() string {
	r, ok := p.get(KeyRegion)
	switch {
	case !ok || r == "":
		p.fail(KeyRegion, "is not set; the stack needs to know which region to build in", "us-west-2")
	case !regionRE.MatchString(r):
		p.fail(KeyRegion, fmt.Sprintf("%q is not an AWS region name", r), "us-west-2")
	}
	return r
}

// clusterName is the configured name, or "lux-gpu-ci-<stack>".
func (p *parser) clusterName(stack string) string {
	if name := p.str(KeyClusterName); name != "" {
		return name
	}
	return Project + "-" + stack
}

// awsAuth reads the AWS provider's profile and assumed role.
func (p *parser) awsAuth() AWSAuth {
	var a AWSAuth
	a.Profile, _ = p.get(KeyAWSProfile)
	if raw, ok := p.get(KeyAssumeRole); ok && raw != "" {
		var role struct {
			RoleArn string `json:"roleArn"`
		}
		if err := json.Unmarshal([]byte(raw), &role); err != nil {
			p.failHow(KeyAssumeRole, fmt.Sprintf("cannot be read: %v", err), `set aws:assumeRole in Pulumi.<stack>.yaml, e.g. {"roleArn": "arn:aws:iam::123456789012:role/deployer"}`)
		}
		a.AssumeRoleArn = role.RoleArn
	}
	return a
}

func (p *parser) str(key string) string {
	if v, ok := p.raw(key); ok {
		return v
	}
	return Defaults[key].(string)
}

func (p *parser) integer(key string) int {
	v, ok := p.raw(key)
	if !ok {
		return Defaults[key].(int)
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		p.fail(key, fmt.Sprintf("%q is not a whole number", v), fmt.Sprint(Defaults[key]))
	}
	return n
}

func (p *parser) boolean(key string) bool {
	v, ok := p.raw(key)
	if !ok {
		return Defaults[key].(bool)
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(key, fmt.Sprintf("%q is not true or false", v), "true")
	}
	return b
}

// object decodes a structured (JSON) value into out, rejecting unknown fields so a
// misspelt field is an error rather than a silently ignored setting.
func (p *parser) object(key string, out any) {
	v, ok := p.raw(key)
	if !ok {
		def, _ := json.Marshal(Defaults[key])
		v = string(def)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		examples := map[string]string{KeyBudget: budgetExample, KeyHelmCharts: helmChartsExample}
		example, ok := examples[key]
		if !ok {
			b, _ := json.Marshal(Defaults[key])
			example = string(b)
		}
		p.fail(key, fmt.Sprintf("cannot be read: %v", err), example)
	}
}

func shellQuote(s string) string {
	if strings.ContainsAny(s, " \"'{}[]$`\\|&;<>()*?!#") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}
