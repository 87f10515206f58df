package stack_test

// The compiler cache under mocks: one private bucket per stack, a server per pool on the
// system nodes with a role of its own that reaches its prefix only, and writes it only where
// the pool is read-write; every pool's job pods carry ccache's settings and a label that lets
// them reach their own pool's server, and no other. make e2e runs ccache through a server
// started from the live Deployment's flags, against a local S3.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/iamjudge"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/stack"
)

// devReadOnly is dev with its container-form pool reading the runner-form pool's cache (the
// choice for a pool that runs public repositories' pull requests).
const devReadOnly = `[
	{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "gpuLimit": 1, "maxRunners": 1, "runnerScaleSetName": "lux-gpu-t4",
	 "runnerLabels": ["self-hosted", "linux", "amd64", "cuda", "gpu", "t4"], "onDemandRetry": true},
	{"name": "gpu-spot-container", "instanceTypes": ["g4dn.xlarge"], "gpuLimit": 1, "maxRunners": 1, "runnerScaleSetName": "lux-gpu-t4-container",
	 "runnerLabels": ["self-hosted", "linux", "amd64", "cuda", "gpu", "t4-container"], "jobForm": "container", "runnerGroup": "gpu-trusted", "trustedRepositoriesOnly": true,
	 "compilerCache": "read-only", "compilerCacheFrom": "gpu-spot"}
]`

const bucketArn = "arn:aws:s3:::lux-gpu-ci--ccache-20261203000000000000000001"

func TestTheCompilerCacheBucketIsPrivateAndExpires(t *testing.T) {
	m := runDev(t, "compilerCacheExpiryDays", "30")
	b := m.one(t, "aws:s3/bucketV2:BucketV2")
	assert.Equal(t, "lux-gpu-ci--ccache-", b.Inputs["bucketPrefix"], "a generated name (nobody can take it first), after the cluster's (the deploy role reaches it by that)")
	assert.Equal(t, "lux-gpu-ci", path(b.Inputs, "tags", "lux-gpu-ci/cluster"))
	assert.Equal(t, true, b.Inputs["forceDestroy"], "destroy empties it: a cache holds nothing that must survive")

	block := m.one(t, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").Inputs
	for _, k := range []string{"blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"} {
		assert.Equal(t, true, block[k], k)
	}
	assert.Equal(t, "BucketOwnerEnforced", path(m.one(t, "aws:s3/bucketOwnershipControls:BucketOwnershipControls").Inputs, "rule", "objectOwnership"), "ACLs off")
	sse := m.one(t, "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2").Inputs
	assert.Equal(t, "AES256", path(sse["rules"].([]any)[0], "applyServerSideEncryptionByDefault", "sseAlgorithm"))

	// Each cache's prefix expires; the stored gpuci (gpuci/…) lives as long as the stack.
	rules := m.one(t, "aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2").Inputs["rules"].([]any)
	require.Len(t, rules, 2, "dev's two read-write pools")
	for i, prefix := range []string{"gpu-spot/", "gpu-spot-container/"} {
		assert.Equal(t, "Enabled", path(rules[i], "status"))
		assert.Equal(t, 30.0, path(rules[i], "expiration", "days"), "compilerCacheExpiryDays")
		assert.Equal(t, map[string]any{"prefix": prefix}, path(rules[i], "filter"), "the pool's prefix only")
	}
	obj := m.one(t, "aws:s3/bucketObjectv2:BucketObjectv2").Inputs
	assert.Equal(t, "gpuci/linux-amd64/"+stack.GpuciStandInSHA256, obj["key"], "the build, under its pin")

	doc := policyOf(t, m.one(t, "aws:s3/bucketPolicy:BucketPolicy"), "policy")
	require.Len(t, doc.Statement, 1)
	tls := doc.Statement[0]
	assert.Equal(t, "Deny", tls.Effect)
	assert.Equal(t, []string{"s3:*"}, tls.Action)
	assert.ElementsMatch(t, []string{bucketArn, bucketArn + "/*"}, tls.Resource)
	assert.Equal(t, map[string]map[string][]string{"Bool": {"aws:SecureTransport": {"false"}}}, tls.Condition)

	none := runDev(t, "gpuPools", `[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "compilerCache": "none"}]`)
	assert.Empty(t, none.all("aws:s3/bucketV2:BucketV2"), "no pool with a cache: no bucket")
	assert.Empty(t, none.all("kubernetes:apps/v1:Deployment"))
	assert.NotContains(t, names(none.all("kubernetes:core/v1:Namespace")), "gpu-ci-compiler-cache")
}

// Each server's role: Pod Identity for its own ServiceAccount only; its prefix only;
// s3:PutObject only where the pool is read-write.
func TestEachPoolsCacheRoleReachesItsPrefixOnly(t *testing.T) {
	m := runDev(t, "gpuPools", devReadOnly)
	roleOf := func(pool string) (registered, policyDoc) {
		role := m.get(t, "aws:iam/role:Role", "compiler-cache-"+pool+"-role")
		inline := m.get(t, "aws:iam/rolePolicy:RolePolicy", "compiler-cache-"+pool)
		return role, policyOf(t, inline, "policy")
	}
	for _, pool := range []string{"gpu-spot", "gpu-spot-container"} {
		role, _ := roleOf(pool)
		assert.Equal(t, "lux-gpu-ci-ccache-"+pool, role.Inputs["name"])
		trust := policyOf(t, role, "assumeRolePolicy")
		require.Len(t, trust.Statement, 1)
		assert.Equal(t, map[string]any{"Service": []any{"pods.eks.amazonaws.com"}}, trust.Statement[0].Principal)
		assert.Equal(t, map[string][]string{
			"aws:RequestTag/eks-cluster-arn":            {"arn:aws:eks:us-west-2:" + testAccount + ":cluster/lux-gpu-ci"},
			"aws:RequestTag/kubernetes-namespace":       {"gpuci-cache"},
			"aws:RequestTag/kubernetes-service-account": {"ccache-" + pool},
		}, trust.Statement[0].Condition["StringEquals"], "this cluster's server of this pool, no other pod")
		assoc := m.get(t, "aws:eks/podIdentityAssociation:PodIdentityAssociation", "compiler-cache-"+pool)
		assert.Equal(t, "gpuci-cache", assoc.Inputs["namespace"])
		assert.Equal(t, "ccache-"+pool, assoc.Inputs["serviceAccount"])
	}

	// What each role may do in S3, judged by an IAM evaluator someone else wrote
	// (internal/testsupport/iamjudge), on the policies as rendered.
	obj := func(prefix, key string) string { return bucketArn + "/" + prefix + "/" + key }
	_, writer := roleOf("gpu-spot")
	_, reader := roleOf("gpu-spot-container")
	for _, st := range reader.Statement {
		assert.NotContains(t, st.Action, "s3:PutObject", "read-only: no write at all, anywhere (%s)", st.Sid)
	}
	type ask struct {
		role        string
		doc         policyDoc
		action, arn string
		context     map[string]any
		allowed     bool
	}
	asks := map[string]ask{
		"the writer reads its prefix":                  {"gpu-spot", writer, "s3:GetObject", obj("gpu-spot", "raw/ab/abc"), nil, true},
		"the writer fills its prefix":                  {"gpu-spot", writer, "s3:PutObject", obj("gpu-spot", "raw/ab/abc"), nil, true},
		"the writer lists its own prefix":              {"gpu-spot", writer, "s3:ListBucket", bucketArn, map[string]any{"s3:prefix": "gpu-spot/raw/ab/abc"}, true},
		"the writer reads a prefix that starts so":     {"gpu-spot", writer, "s3:GetObject", obj("gpu-spot-other", "raw/ab/abc"), nil, false},
		"the writer lists another prefix":              {"gpu-spot", writer, "s3:ListBucket", bucketArn, map[string]any{"s3:prefix": "other/"}, false},
		"the writer deletes":                           {"gpu-spot", writer, "s3:DeleteObject", obj("gpu-spot", "raw/ab/abc"), nil, false},
		"the writer rewrites the bucket's policy":      {"gpu-spot", writer, "s3:PutBucketPolicy", bucketArn, nil, false},
		"the reader reads what gpu-spot's builds fill": {"gpu-spot-container", reader, "s3:GetObject", obj("gpu-spot", "raw/ab/abc"), nil, true},
		"the reader writes there":                      {"gpu-spot-container", reader, "s3:PutObject", obj("gpu-spot", "raw/ab/abc"), nil, false},
		"the reader reads its own name's prefix":       {"gpu-spot-container", reader, "s3:GetObject", obj("gpu-spot-container", "raw/ab/abc"), nil, false},
		// The gpuci its gate runs: that one build, read only.
		"the writer reads the stack's gpuci":    {"gpu-spot", writer, "s3:GetObject", obj("gpuci", "linux-amd64/"+stack.GpuciStandInSHA256), nil, true},
		"the reader reads the stack's gpuci":    {"gpu-spot-container", reader, "s3:GetObject", obj("gpuci", "linux-amd64/"+stack.GpuciStandInSHA256), nil, true},
		"the writer reads another build":        {"gpu-spot", writer, "s3:GetObject", obj("gpuci", "linux-amd64/"+strings.Repeat("0", 64)), nil, false},
		"the writer replaces the stack's gpuci": {"gpu-spot", writer, "s3:PutObject", obj("gpuci", "linux-amd64/"+stack.GpuciStandInSHA256), nil, false},
	}
	var cases []iamjudge.Case
	for name, a := range asks {
		b, err := json.Marshal(a.doc)
		require.NoError(t, err)
		cases = append(cases, iamjudge.Case{Name: name, Principal: "arn:aws:iam::" + testAccount + ":role/lux-gpu-ci-ccache-" + a.role,
			Action: a.action, Resource: a.arn, Account: testAccount, Context: a.context, Identity: []json.RawMessage{b}})
	}
	verdicts := iamjudge.Judge(t, cases)
	for name, a := range asks {
		assert.Equal(t, a.allowed, verdicts[name] == iamjudge.Allowed, "%s: %s", name, verdicts[name])
	}
}

// The servers: bazel-remote, as its own non-root user, on the system nodes, with the flags
// ccache needs; read-write with --s3.update_timestamps, read-only refusing every write.
func TestCompilerCacheServers(t *testing.T) {
	m := runDev(t, "gpuPools", devReadOnly)
	servers := map[string]appsv1.Deployment{}
	for _, r := range m.all("kubernetes:apps/v1:Deployment") {
		var d appsv1.Deployment
		decodeInputs(t, r, &d)
		servers[d.Name] = d
		assert.Equal(t, "gpuci-cache", d.Namespace)
	}
	require.Len(t, servers, 2, "one per pool; the twin shares its pool's (each server: k8s/compilercache_test.go)")
	assert.Contains(t, servers, "ccache-gpu-spot")
	assert.Contains(t, servers, "ccache-gpu-spot-container")
	noWriter := m.get(t, "kubernetes:core/v1:ConfigMap", "gpu-ci-compiler-cache-ccache-gpu-spot-container-no-writer")
	assert.Equal(t, "nobody:!\n", path(noWriter.Inputs, "data", "htpasswd"), "an entry no password matches")

	bucket := m.get(t, "kubernetes:core/v1:ConfigMap", "gpu-ci-compiler-cache-bucket")
	assert.Equal(t, "lux-gpu-ci--ccache-20261203000000000000000001", path(bucket.Inputs, "data", "bucket"))
}

// Every pool's GPU pod (a runner-form runner, a container-form job pod) carries ccache's
// settings and the label of its server; a read-only pool's say read-only; a pool without a
// cache carries neither.
func TestJobPodsCarryTheirPoolsCacheSettings(t *testing.T) {
	m := runDev(t, "gpuPools", devReadOnly)
	runner := path(releaseNamed(t, m, "lux-gpu-t4").Inputs["values"], "template")
	twin := path(releaseNamed(t, m, "lux-gpu-t4-on-demand").Inputs["values"], "template")
	var job corev1.PodTemplateSpec
	require.NoError(t, yaml.UnmarshalStrict([]byte(path(m.get(t, "kubernetes:core/v1:ConfigMap", "gpu-ci-arc-lux-gpu-t4-container-job-pod").Inputs, "data", "job-pod.yaml").(string)), &job))

	envOf := func(tmpl any) map[string]string {
		out := map[string]string{}
		for _, e := range path(tmpl, "spec", "containers").([]any)[0].(map[string]any)["env"].([]any) {
			v, _ := e.(map[string]any)["value"].(string) // "" for a value from the downward API
			out[e.(map[string]any)["name"].(string)] = v
		}
		return out
	}
	url := "http://ccache-gpu-spot.gpuci-cache.svc.cluster.local:8080|layout=bazel|connect-timeout=1000|operation-timeout=10000"
	assert.Equal(t, url, envOf(runner)["CCACHE_REMOTE_STORAGE"])
	assert.Equal(t, url, envOf(twin)["CCACHE_REMOTE_STORAGE"], "the twin re-runs its pool's jobs: its cache too")
	assert.Equal(t, "gpu-spot", path(twin, "metadata", "labels", wellknown.CompilerCacheLabel))
	jobEnv := map[string]string{}
	for _, e := range job.Spec.Containers[0].Env {
		jobEnv[e.Name] = e.Value
	}
	assert.Equal(t, "http://ccache-gpu-spot-container.gpuci-cache.svc.cluster.local:8080|layout=bazel|connect-timeout=1000|operation-timeout=10000|read-only", jobEnv["CCACHE_REMOTE_STORAGE"])
	assert.Equal(t, "/__w", jobEnv["CCACHE_BASEDIR"], "the hooks' workspace")
	assert.Equal(t, "gpu-spot-container", job.Labels[wellknown.CompilerCacheLabel])

	none := runDev(t, "gpuPools", `[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "compilerCache": "none"}]`)
	tmpl := path(releaseNamed(t, none, "lux-gpu-spot").Inputs["values"], "template")
	for _, e := range path(tmpl, "spec", "containers").([]any)[0].(map[string]any)["env"].([]any) {
		assert.NotContains(t, e.(map[string]any)["name"], "CCACHE_", "no cache, no ccache settings")
	}
	assert.Nil(t, path(tmpl, "metadata", "labels", wellknown.CompilerCacheLabel))
}

// A pool's name may start with a digit; a Service's may not (DNS-1035): the servers' names
// are prefixed, valid whatever the pool is called.
func TestCompilerCacheNamesAreValidForEveryPoolName(t *testing.T) {
	m := runDev(t, "gpuPools", `[{"name": "4-t4", "instanceTypes": ["g4dn.xlarge"], "runnerScaleSetName": "lux-4-t4", "runnerLabels": ["self-hosted", "four"]}]`)
	services := m.all("kubernetes:core/v1:Service")
	require.Len(t, services, 1)
	for _, r := range append(services, m.all("kubernetes:apps/v1:Deployment")...) {
		name := path(r.Inputs, "metadata", "name").(string)
		assert.Empty(t, validation.IsDNS1035Label(name), "%s is a valid Service name", name)
	}
}
