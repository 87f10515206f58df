package registry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/registry"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeghcr"
)

// A public package's tag is pullable, a tag it lacks is missing, a private package refused
// at the anonymous token: what a node would meet.
func TestAnAnonymousPullIsAskedAsANodeAsksIt(t *testing.T) {
	srv := fakeghcr.New(map[string][]string{"luxfi/lux-cuda-runner": {"cuda12.8"}})
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")
	ask := func(image string) (registry.Answer, string) {
		answer, detail, err := registry.AnonymousPull(context.Background(), srv.Client(), host+"/"+image)
		require.NoError(t, err)
		return answer, detail
	}

	answer, detail := ask("luxfi/lux-cuda-runner:cuda12.8")
	assert.Equal(t, registry.Pullable, answer, detail)

	answer, detail = ask("luxfi/lux-cuda-runner:cuda12.9")
	assert.Equal(t, registry.Missing, answer, detail)
	assert.Contains(t, detail, "/v2/luxfi/lux-cuda-runner/manifests/cuda12.9: 404")

	answer, detail = ask("newcomer-org/lux-cuda-runner:cuda12.8")
	assert.Equal(t, registry.Refused, answer, "a private package")
	assert.Contains(t, detail, "(an anonymous pull token): 401 Unauthorized")

	_, _, err := registry.AnonymousPull(context.Background(), srv.Client(), "Not An Image")
	assert.Error(t, err)
}
