package live_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/live"
)

// A doctor run reads the cluster some forty times (pods, nodes, events, NodeClaims, each
// pool's objects): through client-go's default limit (5 a second after 10) that alone would
// take six seconds; gpuci's clients make them as fast as the API server answers.
func TestGpuciReadsTheClusterUnthrottled(t *testing.T) {
	var served int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	defer srv.Close()
	kube, _, err := live.Connect(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	const reads = 40
	start := time.Now()
	for range reads {
		_, err := kube.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
	}
	took := time.Since(start)
	require.Equal(t, reads, served)
	assert.Less(t, took, 2*time.Second, "%d reads took %s: client-go's default rate limit (5/s after a burst of 10) would hold them some 6 s", reads, took)
}
