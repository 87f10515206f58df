package fakeaws

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
)

// AWS's own rules for the image path's requests, which the fake keeps so that a request AWS
// would refuse fails here too. Each cites the API reference it comes from. Values unknown in
// a preview are not checked.

// ecrRepositoryPrefixRE and its length (2–30) are CreatePullThroughCacheRule's
// ecrRepositoryPrefix and CreateRepositoryCreationTemplate's prefix (ECR API reference).
var ecrRepositoryPrefixRE = regexp.MustCompile(`^((?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*/?|ROOT)$`)

// ptcUpstreams are the upstreamRegistryUrl values ECR accepts (user guide, "Supported upstream
// registries"), and whether a rule for it needs a credentialArn.
var ptcUpstreams = map[string]bool{
	"registry-1.docker.io": true, "ghcr.io": true, "registry.gitlab.com": true,
	"public.ecr.aws": false, "quay.io": false, "registry.k8s.io": false,
}

// secretNameRE is Secrets Manager's CreateSecret Name: 1–512 of ASCII letters, digits and /_+=.@-.
var secretNameRE = regexp.MustCompile(`^[A-Za-z0-9/_+=.@-]{1,512}$`)

func checkRequest(c *Cloud, typ string, in resource.PropertyMap) error {
	known := func(key string) (string, bool) {
		v, ok := in[resource.PropertyKey(key)]
		if !ok || !v.IsString() {
			return "", false
		}
		return v.StringValue(), true
	}
	switch typ {
	case "aws:ecr/pullThroughCacheRule:PullThroughCacheRule":
		prefix, _ := known("ecrRepositoryPrefix")
		if len(prefix) < 2 || len(prefix) > 30 || !ecrRepositoryPrefixRE.MatchString(prefix) {
			return fmt.Errorf("creating ECR pull through cache rule: InvalidParameterException: ecrRepositoryPrefix %q must be 2–30 characters matching %s", prefix, ecrRepositoryPrefixRE)
		}
		url, _ := known("upstreamRegistryUrl")
		needs, ok := ptcUpstreams[url]
		if !ok {
			return fmt.Errorf("creating ECR pull through cache rule: UnsupportedUpstreamRegistryException: %q is not a supported upstream registry", url)
		}
		cred, credKnown := known("credentialArn")
		_, credSet := in["credentialArn"]
		if needs && !credSet {
			return fmt.Errorf("creating ECR pull through cache rule: InvalidParameterException: a credentialArn is required for upstream registry %s", url)
		}
		// ECR reads only secrets whose name starts with ecr-pullthroughcache/ (user guide,
		// pull-through-cache-creating-secret.html).
		if credKnown && !strings.Contains(cred, ":secret:ecr-pullthroughcache/") {
			return fmt.Errorf("creating ECR pull through cache rule: InvalidParameterException: the secret %s must have a name starting with ecr-pullthroughcache/", cred)
		}
	case "aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate":
		prefix, _ := known("prefix")
		if len(prefix) < 1 || len(prefix) > 256 || !ecrRepositoryPrefixRE.MatchString(prefix) {
			return fmt.Errorf("creating ECR repository creation template: InvalidParameterException: prefix %q is not valid", prefix)
		}
		if v, ok := in["appliedFors"]; ok && v.IsArray() {
			for _, f := range v.ArrayValue() {
				if f.IsString() && !slices.Contains([]string{"PULL_THROUGH_CACHE", "REPLICATION", "CREATE_ON_PUSH"}, f.StringValue()) {
					return fmt.Errorf("creating ECR repository creation template: InvalidParameterException: appliedFor %q", f.StringValue())
				}
			}
		}
		if lp, ok := known("lifecyclePolicy"); ok {
			var doc struct {
				Rules []struct {
					RulePriority int `json:"rulePriority"`
					Selection    struct {
						TagStatus, CountType string
						CountNumber          int
					} `json:"selection"`
					Action struct{ Type string } `json:"action"`
				} `json:"rules"`
			}
			if err := json.Unmarshal([]byte(lp), &doc); err != nil || len(doc.Rules) == 0 {
				return fmt.Errorf("creating ECR repository creation template: InvalidParameterException: lifecyclePolicy is not a lifecycle policy document")
			}
			for _, r := range doc.Rules {
				if r.RulePriority < 1 || r.Action.Type != "expire" || r.Selection.CountNumber < 1 {
					return fmt.Errorf("creating ECR repository creation template: InvalidParameterException: lifecycle rule %+v", r)
				}
			}
		}
	case "aws:secretsmanager/secret:Secret":
		name, ok := known("name")
		if !ok {
			name, _ = known("namePrefix")
		}
		if !secretNameRE.MatchString(name) {
			return fmt.Errorf("creating Secrets Manager secret: InvalidParameterException: name %q", name)
		}
		if v, ok := in["recoveryWindowInDays"]; ok && v.IsNumber() {
			if d := v.NumberValue(); d != 0 && (d < 7 || d > 30) {
				return fmt.Errorf("creating Secrets Manager secret: InvalidParameterException: RecoveryWindowInDays %v is not 0 or 7–30", d)
			}
		}
	case "aws:ec2/vpcEndpoint:VpcEndpoint":
		// A gateway endpoint serves its own region's S3 or DynamoDB, through route tables.
		service, _ := known("serviceName")
		endpointType, _ := known("vpcEndpointType")
		if endpointType == "Gateway" {
			want := []string{"com.amazonaws." + c.region() + ".s3", "com.amazonaws." + c.region() + ".dynamodb"}
			if !slices.Contains(want, service) {
				return fmt.Errorf("creating EC2 VPC Endpoint: InvalidServiceName: The Vpc Endpoint Service '%s' does not exist", service)
			}
			if _, ok := in["subnetIds"]; ok {
				return fmt.Errorf("creating EC2 VPC Endpoint: InvalidParameter: a Gateway endpoint takes route tables, not subnets")
			}
		}
	}
	return nil
}
