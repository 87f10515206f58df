package live

import (
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// QPS and Burst lift client-go's own rate limit, 5 requests a second after a burst of 10
// (k8s.io/client-go v0.35.3 rest/config.go, DefaultQPS and DefaultBurst), which held a doctor
// or verify run's few dozen reads, one after another, for seconds they did not need (and the
// retrier's passes with them). The API server's priority and fairness still guards it.
const (
	QPS   = 50
	Burst = 100
)

// Connect makes the clients every gpuci command reads and changes the cluster with, from cfg
// (a kubeconfig's or the pod's own account).
func Connect(cfg *rest.Config) (kubernetes.Interface, dynamic.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = QPS, Burst
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return kube, dyn, nil
}
