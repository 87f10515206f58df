// Package karpentercrd gives tests Karpenter's CRDs as a validator, and a pool's NodePool
// and EC2NodeClass as the program sends them to it.
package karpentercrd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/crdvalidation"
	"github.com/luxfi/lux-gpu-ci/k8s/nodepools"
)

// Validator validates against the NodePool and EC2NodeClass CRDs of the
// karpenter-provider-aws module go.mod pins.
func Validator(t testing.TB) *crdvalidation.Validator {
	t.Helper()
	v, err := crdvalidation.Karpenter()
	require.NoError(t, err)
	return v
}

// Objects builds a pool's NodePool and EC2NodeClass for the dev cluster as the program
// sends them.
func Objects(t testing.TB, pool config.GPUPool, publicIP bool, tags map[string]string) (nodePool, nodeClass map[string]any) {
	t.Helper()
	nodePool, err := nodepools.NodePoolObject(pool)
	require.NoError(t, err)
	nodeClass, err = nodepools.EC2NodeClassObject(pool, "lux-gpu-ci", "lux-gpu-ci-karpenter-node", publicIP, tags)
	require.NoError(t, err)
	return nodePool, nodeClass
}
