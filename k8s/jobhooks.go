package k8s

import (
	"fmt"
	"path"
	"sort"
	"strings"

	k8scorev1 "k8s.io/api/core/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/instancetypes"

	"github.com/luxfi/lux-gpu-ci/internal/jobhooks"
	"github.com/luxfi/lux-gpu-ci/pricing"
)

// Every pool's runner runs the job hooks (internal/jobhooks) at the start and the end of every
// job: the runner reads ACTIONS_RUNNER_HOOK_JOB_STARTED and _COMPLETED and runs the scripts
// they name, failing the job when the started one fails. A container-form job pod runs the GPU
// sampler as its job container's postStart hook. The scripts come from one ConfigMap in the
// runners' namespace, and the sampler from one of the same name in each container-form pool's
// jobs' namespace (a pod mounts only its own namespace's ConfigMaps).
const (
	JobHooksConfigMap = "gpuci-job-hooks"
	jobHooksVolume    = "gpuci-job-hooks"
	jobStartedEnv     = "ACTIONS_RUNNER_HOOK_JOB_STARTED"
	jobCompletedEnv   = "ACTIONS_RUNNER_HOOK_JOB_COMPLETED"
)

// JobHookEnv is what a pool's runner gives its hooks: where they are, the job's form, and what
// the summary says of the pool (its capacity types, the price of every catalogued GPU type at
// its capacity type, GitHub's price for the same minutes). A pool that allows both spot and
// on-demand is priced at spot, and carries the on-demand prices too for a job whose node the
// summary knows to be on-demand (GPUCI_LAUNCHED_CAPACITY, or the container form's Node). Every
// catalogued type, not only the pool's: an edit of the pool's instanceTypes then leaves its
// runners' template alone, so it does not roll the scale set's runners (make e2e's pool edit
// changes only the NodePools).
func JobHookEnv(pool config.GPUPool, p pricing.Prices) []k8scorev1.EnvVar {
	table, capacity := p.OnDemand, strings.Join(pool.CapacityTypeNames(), ", ")
	spot := pool.Allows(config.CapacitySpot)
	mixed := spot && pool.Allows(config.CapacityOnDemand)
	if spot {
		table = p.Spot
	}
	if mixed {
		capacity = "spot, on-demand when spot is short (priced at spot)"
	}
	env := []k8scorev1.EnvVar{
		// .js entry points, which the runner runs with its own node: no job's PATH chooses
		// what runs them (internal/jobhooks/trusted-env.js).
		{Name: jobStartedEnv, Value: path.Join(jobhooks.Dir, jobhooks.JobStartedEntryKey)},
		{Name: jobCompletedEnv, Value: path.Join(jobhooks.Dir, jobhooks.JobCompletedEntryKey)},
		{Name: "GPUCI_POOL", Value: pool.Name},
		{Name: "GPUCI_JOB_FORM", Value: string(pool.JobForm)},
		{Name: "GPUCI_CAPACITY", Value: capacity},
		{Name: "GPUCI_PRICES", Value: priceList(table)},
	}
	if mixed {
		env = append(env, k8scorev1.EnvVar{Name: "GPUCI_PRICES_ON_DEMAND", Value: priceList(p.OnDemand)})
	}
	return append(env,
		// Each catalogued type's GPUs: a job holding one GPU of a multi-GPU node pays its share.
		k8scorev1.EnvVar{Name: "GPUCI_GPUS", Value: gpuList()},
		k8scorev1.EnvVar{Name: "GPUCI_GITHUB_PER_MINUTE", Value: fmt.Sprintf("%g", p.HostedT4PerMinute)},
		k8scorev1.EnvVar{Name: "GPUCI_PRICES_SOURCE", Value: "lux-gpu-ci's pricing/ table"},
	)
}

// gpuList is "<instance type>=<GPUs> …" for every catalogued type (instancetypes).
func gpuList() string {
	var out []string
	for _, it := range instancetypes.Names() {
		if g, ok := instancetypes.Lookup(it); ok {
			out = append(out, fmt.Sprintf("%s=%d", it, g.GPUs))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// priceList is "<instance type>=<USD per hour> …" for every catalogued type table prices.
func priceList(table map[string]float64) string {
	var prices []string
	for _, it := range instancetypes.Names() {
		if price, ok := table[it]; ok {
			prices = append(prices, fmt.Sprintf("%s=%g", it, price))
		}
	}
	sort.Strings(prices)
	return strings.Join(prices, " ")
}

// zoneEnv is the node's zone for gpu-sampler.sh, which the API server copies onto a pod when it
// is bound (the PodTopologyLabels admission plugin: beta and on by default since Kubernetes
// 1.35, pkg/features/kube_features.go at v1.36.3); the pod reads no Node itself (#36). Set on
// the container that holds the GPU: a container-form runner's own zone is a system node's.
var zoneEnv = k8scorev1.EnvVar{Name: "GPUCI_ZONE", ValueFrom: &k8scorev1.EnvVarSource{FieldRef: &k8scorev1.ObjectFieldSelector{
	FieldPath: "metadata.labels['" + k8scorev1.LabelTopologyZone + "']",
}}}

// withJobHooks mounts the hooks into a runner pod and gives them their env.
func withJobHooks(t k8scorev1.PodTemplateSpec, pool config.GPUPool) k8scorev1.PodTemplateSpec {
	t = withHooksVolume(t)
	c := &t.Spec.Containers[0]
	c.Env = append(c.Env, JobHookEnv(pool, pricing.Default())...)
	if pool.JobForm == config.JobFormRunner {
		c.Env = append(c.Env, zoneEnv, launchedCapacityEnv)
	}
	return t
}

// withGPUSampler makes a container-form job pod's job container check and sample its GPU as
// it starts (gpu-sampler.sh as its postStart hook, writing to the container's log). The hooks
// keep a template container's lifecycle, env and volumeMounts (runner-container-hooks v0.8.1
// packages/k8s/src/k8s/utils.ts mergeContainerWithOptions) and the pod's volumes
// (mergePodSpecWithOptions).
func withGPUSampler(t k8scorev1.PodTemplateSpec) k8scorev1.PodTemplateSpec {
	t = withHooksVolume(t)
	c := &t.Spec.Containers[0]
	c.Env = append(c.Env, zoneEnv, k8scorev1.EnvVar{Name: "GPUCI_NODE", ValueFrom: &k8scorev1.EnvVarSource{
		FieldRef: &k8scorev1.ObjectFieldSelector{FieldPath: "spec.nodeName"},
	}})
	c.Lifecycle = &k8scorev1.Lifecycle{PostStart: &k8scorev1.LifecycleHandler{Exec: &k8scorev1.ExecAction{
		Command: []string{"sh", path.Join(jobhooks.Dir, jobhooks.GPUSamplerKey)},
	}}}
	return t
}

// withHooksVolume mounts the hooks' ConfigMap into a pod's first container.
func withHooksVolume(t k8scorev1.PodTemplateSpec) k8scorev1.PodTemplateSpec {
	c := &t.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, k8scorev1.VolumeMount{Name: jobHooksVolume, MountPath: jobhooks.Dir, ReadOnly: true})
	t.Spec.Volumes = append(t.Spec.Volumes, k8scorev1.Volume{Name: jobHooksVolume, VolumeSource: k8scorev1.VolumeSource{
		ConfigMap: &k8scorev1.ConfigMapVolumeSource{LocalObjectReference: k8scorev1.LocalObjectReference{Name: JobHooksConfigMap}, DefaultMode: ptr(int32(0o555))},
	}})
	return t
}
