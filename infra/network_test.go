package infra_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/infra"
)

func TestSubnetLayoutStaysInsideTheVPC(t *testing.T) {
	for _, vpc := range []string{"10.0.0.0/16", "172.20.0.0/18", "192.168.16.0/20"} {
		private, public, err := infra.SubnetCIDRs(vpc, 3)
		require.NoError(t, err)
		all := append(append([]string{}, private...), public...)
		assert.Len(t, slices.Compact(slices.Sorted(slices.Values(all))), 6, "subnets of %s are distinct", vpc)
		for _, s := range all {
			assert.True(t, within(t, s, vpc), "%s lies in %s", s, vpc)
		}
		for i, a := range all {
			for _, b := range all[i+1:] {
				assert.False(t, overlaps(t, a, b), "%s overlaps %s", a, b)
			}
		}
	}
}

func within(t *testing.T, inner, outer string) bool {
	t.Helper()
	i, o := netip.MustParsePrefix(inner), netip.MustParsePrefix(outer)
	return o.Contains(i.Addr()) && i.Bits() >= o.Bits()
}

func overlaps(t *testing.T, a, b string) bool {
	t.Helper()
	return netip.MustParsePrefix(a).Overlaps(netip.MustParsePrefix(b))
}
