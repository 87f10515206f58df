package live

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// RetryEvidenceTTL is how long a remembered verdict is kept: longer than any run's attempts.
const RetryEvidenceTTL = 7 * 24 * time.Hour

// RetryEvidence is gpuci retry's memory in the cluster (the ConfigMap
// wellknown.RetryEvidenceConfigMap, which the program creates with the retry runner): the
// cluster's evidence for an interrupted job that is re-run on a later attempt, kept past the
// hour the cluster keeps its events. A key is a job's ID (unique across GitHub), a value the
// time it was recorded and the evidence.
type RetryEvidence struct {
	kube kubernetes.Interface
	data map[string]string
	rv   string
}

// ReadRetryEvidence reads the memory; nil, and no error, where the stack has none (no
// retryScaleSetName).
func ReadRetryEvidence(ctx context.Context, kube kubernetes.Interface) (*RetryEvidence, error) {
	cm, err := kube.CoreV1().ConfigMaps(wellknown.RunnersNamespace).Get(ctx, wellknown.RetryEvidenceConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", wellknown.RunnersNamespace, wellknown.RetryEvidenceConfigMap, err)
	}
	e := &RetryEvidence{kube: kube, data: cm.Data, rv: cm.ResourceVersion}
	if e.data == nil {
		e.data = map[string]string{}
	}
	return e, nil
}

func jobKey(jobID int64) string { return "job-" + strconv.FormatInt(jobID, 10) }

// Recall returns what was recorded for a job.
func (e *RetryEvidence) Recall(jobID int64) (string, bool) {
	v, ok := e.data[jobKey(jobID)]
	if !ok {
		return "", false
	}
	at, evidence, _ := strings.Cut(v, " ")
	return "recorded by gpuci retry at " + at + ": " + evidence, true
}

// Remember records evidence by job ID and drops what is older than RetryEvidenceTTL, in one
// update (a concurrent writer makes it fail, not lose the other's entries).
func (e *RetryEvidence) Remember(ctx context.Context, evidence map[int64]string, now time.Time) error {
	data := map[string]string{}
	for k, v := range e.data {
		at, _, _ := strings.Cut(v, " ")
		if t, err := time.Parse(time.RFC3339, at); err == nil && now.Sub(t) < RetryEvidenceTTL {
			data[k] = v
		}
	}
	for id, ev := range evidence {
		data[jobKey(id)] = now.UTC().Format(time.RFC3339) + " " + ev
	}
	cm, err := e.kube.CoreV1().ConfigMaps(wellknown.RunnersNamespace).Get(ctx, wellknown.RetryEvidenceConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("recording the evidence: %w", err)
	}
	// At the version read: a concurrent writer's update makes this one fail (Conflict)
	// rather than lose its entries.
	cm.ResourceVersion, cm.Data = e.rv, data
	updated, err := e.kube.CoreV1().ConfigMaps(wellknown.RunnersNamespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "gpuci-retry"})
	if err != nil {
		return fmt.Errorf("recording the evidence: %w", err)
	}
	e.data, e.rv = updated.Data, updated.ResourceVersion
	return nil
}
