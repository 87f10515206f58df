package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
)

const sharedWriterAndReader = `[
	{"name": "gpu-a", "instanceTypes": ["g4dn.xlarge"], "compilerCacheShared": true, "onDemandRetry": true},
	{"name": "gpu-b", "instanceTypes": ["g4dn.xlarge"], "jobForm": "container", "runnerGroup": "gpu-trusted", "trustedRepositoriesOnly": true,
	 "compilerCache": "read-only", "compilerCacheFrom": "gpu-a"}]`

// Each service knows who writes it, whether repositories share its entries, and where the
// pods that call it run; a reader takes the writer's keys (its entries are the writer's).
func TestACompilerCacheServiceKnowsItsWritersAndCallers(t *testing.T) {
	c, err := parsePools(t, sharedWriterAndReader)
	require.NoError(t, err)
	svcs := c.CompilerCaches()
	require.Len(t, svcs, 2)
	assert.Equal(t, config.CompilerCacheService{Name: "gpu-a", Prefix: "gpu-a", Access: config.CacheReadWrite,
		WriteRefs: []string{"refs/heads/main"}, Shared: true, PodNamespaces: []string{"arc-runners"}}, svcs[0], "main writes by default; the twin's pods are in the runners' namespace too")
	assert.Equal(t, config.CompilerCacheService{Name: "gpu-b", Prefix: "gpu-a", Access: config.CacheReadOnly,
		Shared: true, PodNamespaces: []string{"arc-runners", "arc-jobs-gpu-b"}}, svcs[1], "no writer; the writer's keys; its job pods' namespace")
}

func TestCompilerCacheWritersAreBranchesOrTags(t *testing.T) {
	for _, refs := range []string{`["refs/pull/*"]`, `["main"]`, `["refs/heads/["]`, `["refs/pull/7/merge"]`} {
		_, err := parseRetrier(t, true, "compilerCacheWriteRefs", refs)
		require.Error(t, err, refs)
		assert.Contains(t, err.Error(), "compilerCacheWriteRefs", refs)
	}
	c, err := parseRetrier(t, true, "compilerCacheWriteRefs", `["refs/heads/main", "refs/heads/release/*", "refs/tags/v*"]`)
	require.NoError(t, err)
	assert.Equal(t, []string{"refs/heads/main", "refs/heads/release/*", "refs/tags/v*"}, c.CompilerCacheWriteRefs)
}

func TestAReaderCannotShareWhatItDoesNotWrite(t *testing.T) {
	_, err := parsePools(t, `[{"name": "gpu-a", "instanceTypes": ["g4dn.xlarge"]},
		{"name": "gpu-b", "instanceTypes": ["g4dn.xlarge"], "compilerCache": "read-only", "compilerCacheFrom": "gpu-a", "compilerCacheShared": true}]`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "compilerCacheShared")
}
