package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The committed table is what Karpenter's, at the pinned version, generates: a Karpenter bump
// without `go generate ./pricing` fails here.
func TestCommittedTableIsKarpentersAtThePin(t *testing.T) {
	want, err := generate()
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join("..", "..", "pricing", "zz_generated_ondemand.go"))
	require.NoError(t, err)
	assert.True(t, string(want) == string(got), "stale: run go generate ./pricing")
	assert.Regexp(t, `"g4dn.xlarge": +0.526,`, string(got))
	assert.Regexp(t, `"t3.medium": +0.0416,`, string(got))
}
