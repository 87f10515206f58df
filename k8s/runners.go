package k8s

import (
	"fmt"
	"maps"
	"slices"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	policyv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/policy/v1"
	rbacv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/rbac/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	networkingv1 "k8s.io/api/networking/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/jobhooks"
	"github.com/luxfi/lux-gpu-ci/internal/lifelines"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// RunnersArgs describes ARC and its scale sets.
type RunnersArgs struct {
	Pools  []config.GPUPool
	GitHub config.GitHub
	// NodePools by pool name: a scale set goes before its NodePool on destroy, so no runner
	// is left waiting for a node that will never come.
	NodePools                      map[string][]pulumi.Resource
	SkipAwait                      bool
	ControllerChart, ScaleSetChart versions.Chart
	// ARCVersion is the charts' version; a change of its major.minor reinstalls ARC.
	ARCVersion string
	// DrainSeconds bounds a scale set's uninstall: ARC's cleanup waits for running jobs.
	DrainSeconds int
	// CRDProvider declares ARC's CRDs: it adopts ones an earlier Helm install left.
	CRDProvider pulumi.ProviderResource
	// ImageCache serves the runner images from ECR where their registry has a rule.
	ImageCache ImageCache
	// RetryRunner is the retry runner (RetryScaleSetValues); its zero value is none.
	RetryRunner config.RetryRunner
	// CompilerCache is what the pools' builds reach the compiler cache through: their scale
	// sets start after it and go before it.
	CompilerCache []pulumi.Resource
	// LaunchedCapacity declares LaunchedCapacityPolicy (a control plane of Kubernetes 1.36 or
	// later): every scale set starts after it, so its runners are bound with the annotation.
	LaunchedCapacity bool
}

// Runners is the ARC controller, the GitHub credentials Secret and one runner scale set per
// pool.
type Runners struct {
	pulumi.ResourceState

	// RunsOn maps each scale set name to its two `runs-on:` forms.
	RunsOn pulumi.StringMapMapOutput `pulumi:"runsOn"`
	// PodNamespaces are the namespaces where the runner and job pods run (the runners', each
	// container-form pool's jobs') and what they hold: what grants a reader there (the
	// compiler caches' gates) depends on.
	PodNamespaces []pulumi.Resource
}

// NewRunners installs ARC, the credentials Secret and the scale sets.
func NewRunners(ctx *pulumi.Context, name string, args *RunnersArgs, opts ...pulumi.ResourceOption) (*Runners, error) {
	r := &Runners{}
	if err := ctx.RegisterComponentResource(wellknown.RunnersComponent, name, r, opts...); err != nil {
		return nil, err
	}
	parent := pulumi.Parent(r)
	// The controller's namespace holds a copy of the GitHub credential for each listener
	// (resourcebuilder.go newScaleSetListenerConfig): no privileged pod runs there either.
	systemNS, err := corev1.NewNamespace(ctx, name+"-systems", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.ARCNamespace), Labels: pulumi.ToStringMap(PodSecurityLabels())},
	}, parent)
	if err != nil {
		return nil, err
	}
	// Its policies come before the controller and the listeners (strict mode: boundary.go).
	systemsBoundary, err := newNetworkPolicies(ctx, name+"-systems", ARCSystemsNetworkPolicies(), parent, pulumi.DependsOn([]pulumi.Resource{systemNS}))
	if err != nil {
		return nil, err
	}
	// The CRDs outlive the controller (it removes its finalizers from their objects) and
	// follow its chart version (newARCCRDs); Helm's one-time install of crds/ is skipped.
	// Deleting a CRD deletes every object of its kind — every scale set, every runner — so the
	// program never deletes one: a replace (a new provider, `up --replace`) or a rename that
	// lost its alias (stack/urns_test.go pins the URNs) retains the live CRD and the new
	// resource adopts it (the CRD provider upserts); on destroy they stay, empty, and go with
	// the EKS cluster. Delete-before-replace keeps the old and the new resource from both
	// claiming the CRD at once.
	crds, err := newARCCRDs(ctx, name+"-crd", args.ControllerChart, parent, pulumi.Provider(args.CRDProvider),
		pulumi.DeleteBeforeReplace(true), pulumi.RetainOnDelete(true))
	if err != nil {
		return nil, err
	}
	// An ARC upgrade across a minor version is ARC's own procedure, in one up: remove every
	// scale set, upgrade the controller, install the scale sets again. The controller deletes
	// any AutoscalingRunnerSet of another major.minor than its own build, and GitHub's scale
	// set with it (autoscalingrunnerset_controller.go, the IsVersionAllowed branch, at
	// gha-runner-scale-set-0.14.2), so upgrading either side in place loses the scale sets
	// while the releases stay "deployed". Here the ARC minor is the controller's replacement
	// trigger, replaced delete-first; each scale set is replaced with it (ReplaceWith), so
	// the engine runs: delete the scale sets (each uninstall waits until the old controller
	// has cleaned up, which waits for the runners' jobs) → delete the controller → install
	// the new one → install the scale sets. A patch bump stays an in-place upgrade. The
	// release's description names the minor, so a preview shows the change.
	// ARC's releases keep its CRDs (lifelines.ARCCRDs): the controller directly, the scale
	// sets through it.
	crdLifelines := lifelines.Of(lifelines.ARCCRDs, crds...)
	arcMinor := config.MajorMinor(args.ARCVersion)
	controller, err := newRelease(ctx, name+"-controller", release{
		Name: wellknown.ARCControllerRelease, Namespace: wellknown.ARCNamespace, Chart: args.ControllerChart,
		Values: ControllerValues(), SkipCrds: true, SkipAwait: args.SkipAwait,
		Description: "ARC " + arcMinor + ": a change of minor version reinstalls the controller and every scale set",
	}, parent, pulumi.DependsOn(append([]pulumi.Resource{systemNS}, systemsBoundary...)), crdLifelines.Keep(),
		pulumi.ReplacementTrigger(pulumi.String(arcMinor)), pulumi.DeleteBeforeReplace(true))
	if err != nil {
		return nil, err
	}
	// The scale sets' objects carry ARC's cleanup-protection finalizers, which only the
	// controller removes: the runners' namespace must be gone before the controller goes.
	runnersNS, err := corev1.NewNamespace(ctx, name+"-runners", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.RunnersNamespace), Labels: pulumi.ToStringMap(PodSecurityLabels())},
	}, parent, pulumi.DependsOn([]pulumi.Resource{controller}))
	if err != nil {
		return nil, err
	}
	// Every scale set depends on the boundary: no runner starts before it, and on destroy it
	// stands until the last runner's job has drained.
	boundary, err := newNetworkPolicies(ctx, name, RunnersNetworkPolicies(), parent, pulumi.DependsOn([]pulumi.Resource{runnersNS}))
	if err != nil {
		return nil, err
	}

	creds := pulumi.StringMap{}
	switch gh := args.GitHub; {
	case gh.Token != nil:
		creds["github_token"] = secretInput(*gh.Token)
	case gh.App != nil:
		creds["github_app_id"] = pulumi.String(gh.App.AppID)
		creds["github_app_installation_id"] = pulumi.String(gh.App.InstallationID)
		creds["github_app_private_key"] = secretInput(gh.App.PrivateKey)
	default:
		return nil, fmt.Errorf("runners: no GitHub credentials")
	}
	secret, err := corev1.NewSecret(ctx, name+"-github", &corev1.SecretArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.GitHubSecretName), Namespace: pulumi.String(wellknown.RunnersNamespace)},
		Type:     pulumi.String("Opaque"),
		// A secret end to end: Pulumi encrypts it in state and never prints it.
		StringData: pulumi.ToSecret(creds).(pulumi.StringMapOutput),
	}, parent, pulumi.DependsOn([]pulumi.Resource{runnersNS}))
	if err != nil {
		return nil, err
	}

	hooks, err := newContainerHooks(ctx, name, args.Pools, parent, pulumi.DependsOn([]pulumi.Resource{runnersNS}))
	if err != nil {
		return nil, err
	}
	r.PodNamespaces = []pulumi.Resource{runnersNS}
	for _, pool := range args.Pools {
		r.PodNamespaces = append(r.PodNamespaces, hooks[pool.Name]...)
	}
	budgets, err := newRunningJobsBudgets(ctx, name, args.Pools, parent, pulumi.DependsOn([]pulumi.Resource{runnersNS}))
	if err != nil {
		return nil, err
	}
	jobHooks, err := newJobHooks(ctx, name, parent, pulumi.DependsOn([]pulumi.Resource{runnersNS}))
	if err != nil {
		return nil, err
	}
	var launched []pulumi.Resource
	if args.LaunchedCapacity {
		if launched, err = newLaunchedCapacityPolicy(ctx, name, config.RunnerPodNamespaces(args.Pools), parent, pulumi.DependsOn([]pulumi.Resource{runnersNS})); err != nil {
			return nil, err
		}
	}

	runsOn := pulumi.StringMapMap{}
	for _, pool := range args.Pools {
		vals, err := ScaleSetValues(pool, args.GitHub, args.ImageCache)
		if err != nil {
			return nil, err
		}
		deps := append(append(append([]pulumi.Resource{controller, secret, runnersNS}, budgets...), boundary...), args.CompilerCache...)
		deps = append(deps, args.NodePools[pool.Name]...)
		// A container-form scale set's runners need their account and job pod template
		// until the last of them is gone.
		deps = append(deps, hooks[pool.Name]...)
		// Its runners mount the job hooks (and a container-form job pod the GPU sampler), and
		// are bound with their node's capacity type.
		deps = append(append(deps, jobHooks), launched...)
		// A scale set's release always waits (its chart has no workload to wait for on
		// install): its uninstall must block until ARC has cleaned the scale set up — its
		// runners' jobs finished, GitHub's scale set deleted — before the controller, the
		// credentials or the namespace go, on destroy and on an ARC upgrade alike.
		if _, err := newRelease(ctx, name+"-"+pool.RunnerScaleSetName, release{
			Name: pool.RunnerScaleSetName, Namespace: wellknown.RunnersNamespace, Chart: args.ScaleSetChart,
			Values: vals, TimeoutSeconds: args.DrainSeconds,
		}, parent, pulumi.DependsOn(deps), pulumi.ReplaceWith([]pulumi.Resource{controller})); err != nil {
			return nil, err
		}
		runsOn[pool.RunnerScaleSetName] = pulumi.ToStringMap(RunsOn(pool))
	}
	if retry := args.RetryRunner; retry.ScaleSetName != "" {
		// Its Roles go where the pools' pods run: after the jobs' namespaces exist.
		var jobsNamespaces []pulumi.Resource
		for _, deps := range hooks {
			jobsNamespaces = append(jobsNamespaces, deps...)
		}
		account, err := newRetryReader(ctx, name, args.Pools, parent, pulumi.DependsOn(append([]pulumi.Resource{runnersNS}, jobsNamespaces...)))
		if err != nil {
			return nil, err
		}
		// Like a pool's: its uninstall waits for ARC's cleanup, before the controller, the
		// credentials, the account or the namespace go.
		vals, err := RetryScaleSetValues(retry, args.GitHub, args.ImageCache)
		if err != nil {
			return nil, err
		}
		if _, err := newRelease(ctx, name+"-"+retry.ScaleSetName, release{
			Name: retry.ScaleSetName, Namespace: wellknown.RunnersNamespace, Chart: args.ScaleSetChart,
			Values: vals, TimeoutSeconds: args.DrainSeconds,
		}, parent, pulumi.DependsOn(append(append(append([]pulumi.Resource{controller, secret, runnersNS}, budgets...), boundary...), account...)),
			pulumi.ReplaceWith([]pulumi.Resource{controller})); err != nil {
			return nil, err
		}
		runsOn[retry.ScaleSetName] = pulumi.ToStringMap(map[string]string{"scaleSet": retry.ScaleSetName})
	}

	r.RunsOn = runsOn.ToStringMapMapOutput()
	if err := ctx.RegisterResourceOutputs(r, pulumi.Map{"runsOn": r.RunsOn}); err != nil {
		return nil, err
	}
	return r, nil
}

// newRunningJobsBudgets creates RunningJobsBudgets; the busy runners' budget after the
// running jobs' one, so that an upgrade narrows the older budget before the new one selects
// the container-form runners (one pod, one budget, throughout).
func newRunningJobsBudgets(ctx *pulumi.Context, name string, pools []config.GPUPool, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	var created []pulumi.Resource
	specs := RunningJobsBudgets(pools)
	for _, budget := range []string{RunningJobsBudget, BusyRunnersBudget} {
		spec, ok := specs[budget]
		if !ok {
			continue
		}
		pdb, err := newBudget(ctx, name+"-"+budget, wellknown.RunnersNamespace, budget, spec, slices.Concat(opts, []pulumi.ResourceOption{pulumi.DependsOn(slices.Clone(created))})...)
		if err != nil {
			return nil, err
		}
		created = append(created, pdb)
	}
	return created, nil
}

// newBudget declares the PodDisruptionBudget name of namespace with spec.
func newBudget(ctx *pulumi.Context, logical, namespace, name string, spec k8spolicyv1.PodDisruptionBudgetSpec, opts ...pulumi.ResourceOption) (pulumi.Resource, error) {
	var exprs metav1.LabelSelectorRequirementArray
	for _, e := range spec.Selector.MatchExpressions {
		exprs = append(exprs, metav1.LabelSelectorRequirementArgs{Key: pulumi.String(e.Key), Operator: pulumi.String(string(e.Operator))})
	}
	return policyv1.NewPodDisruptionBudget(ctx, logical, &policyv1.PodDisruptionBudgetArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(name), Namespace: pulumi.String(namespace)},
		Spec: &policyv1.PodDisruptionBudgetSpecArgs{
			MinAvailable:               pulumi.Int(spec.MinAvailable.IntValue()),
			Selector:                   &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(spec.Selector.MatchLabels), MatchExpressions: exprs},
			UnhealthyPodEvictionPolicy: pulumi.String(string(*spec.UnhealthyPodEvictionPolicy)),
		},
	}, opts...)
}

// newContainerHooks creates what container-form pools' runners and jobs use. For each pool
// whose jobs they are (config.GPUPool.JobsOf: a twin shares its pool's): the jobs' namespace
// with its boundary (Pod Security, NetworkPolicies), its budget and the GPU sampler's
// ConfigMap, and the runners' account, in the runners' namespace, with its rights in the jobs'
// namespace only. For each container-form pool: its job pod template, which its runners mount.
// It returns, by pool name, the resources a pool's scale set depends on (none for runner-form
// pools; nothing at all when no pool uses the container form).
func newContainerHooks(ctx *pulumi.Context, name string, pools []config.GPUPool, parent, inRunners pulumi.ResourceOption) (map[string][]pulumi.Resource, error) {
	opts := []pulumi.ResourceOption{parent, inRunners}
	byPool := map[string][]pulumi.Resource{}
	var legacy []pulumi.Resource
	domains := map[string][]pulumi.Resource{}
	for _, pool := range pools {
		if pool.JobForm != config.JobFormContainer {
			continue
		}
		if legacy == nil {
			var err error
			if legacy, err = newLegacyContainerHooksRBAC(ctx, name, opts...); err != nil {
				return nil, err
			}
		}
		jobs := pool.JobsOf()
		if domains[jobs] == nil {
			created, err := newContainerJobs(ctx, name, jobs, pools, parent, opts...)
			if err != nil {
				return nil, fmt.Errorf("pool %s: its jobs' namespace: %w", jobs, err)
			}
			domains[jobs] = created
		}
		tmpl, err := JobPodTemplateYAML(pool)
		if err != nil {
			return nil, err
		}
		cm, err := corev1.NewConfigMap(ctx, name+"-"+HookTemplateConfigMapName(pool), &corev1.ConfigMapArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(HookTemplateConfigMapName(pool)), Namespace: pulumi.String(wellknown.RunnersNamespace)},
			Data:     pulumi.StringMap{hookTemplateKey: pulumi.String(tmpl)},
		}, opts...)
		if err != nil {
			return nil, err
		}
		byPool[pool.Name] = slices.Concat([]pulumi.Resource{cm}, domains[jobs], legacy)
	}
	return byPool, nil
}

// newContainerJobs creates the jobs' namespace of the container-form pool jobs and its
// runners' account (see newContainerHooks). The namespace's policies and budget come before
// anything the account could start there. The namespace itself needs nothing of the runners'
// (parent alone): a destroy then deletes the two namespaces at once, not one after the other
// (each deletion takes at least five seconds: kube-controller-manager's namespace controller
// syncs a deleted namespace five seconds after it hears of it, kubernetes v1.36.3
// pkg/controller/namespace/namespace_controller.go:50,135).
func newContainerJobs(ctx *pulumi.Context, name, jobs string, pools []config.GPUPool, parent pulumi.ResourceOption, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	nsName, account := wellknown.ContainerJobsNamespace(jobs), wellknown.ContainerHooksAccount(jobs)
	ns, err := corev1.NewNamespace(ctx, name+"-"+nsName, &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(nsName), Labels: pulumi.ToStringMap(ContainerJobsNamespaceLabels())},
	}, parent)
	if err != nil {
		return nil, err
	}
	inNS := append(slices.Clone(opts), pulumi.DependsOn([]pulumi.Resource{ns}))
	boundary, err := newNetworkPolicies(ctx, name+"-"+nsName, ContainerJobsNetworkPolicies(nsName), inNS...)
	if err != nil {
		return nil, err
	}
	pdb, err := newBudget(ctx, name+"-"+nsName+"-"+RunningJobsBudget, nsName, RunningJobsBudget, RunningJobsBudgets(pools)[RunningJobsBudget], inNS...)
	if err != nil {
		return nil, err
	}
	// The job pods mount the GPU sampler from their own namespace (JobPodTemplate).
	sampler, err := corev1.NewConfigMap(ctx, name+"-"+nsName+"-job-hooks", &corev1.ConfigMapArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(JobHooksConfigMap), Namespace: pulumi.String(nsName)},
		Data:     pulumi.StringMap{jobhooks.GPUSamplerKey: pulumi.String(jobhooks.GPUSampler)},
	}, inNS...)
	if err != nil {
		return nil, err
	}
	sa, err := corev1.NewServiceAccount(ctx, name+"-"+account, &corev1.ServiceAccountArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(account), Namespace: pulumi.String(wellknown.RunnersNamespace)},
	}, opts...)
	if err != nil {
		return nil, err
	}
	rbacAfter := append(slices.Clone(opts), pulumi.DependsOn(slices.Concat([]pulumi.Resource{ns, pdb, sampler}, boundary)))
	rbac, err := newAccountRole(ctx, name+"-"+account, account, nsName, ContainerHooksRules(), sa, rbacAfter...)
	if err != nil {
		return nil, err
	}
	nodes, err := rbacv1.NewClusterRoleBinding(ctx, name+"-"+account+"-nodes", &rbacv1.ClusterRoleBindingArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(account + "-nodes")},
		RoleRef:  roleRef("ClusterRole", ContainerHooksNodeReader),
		Subjects: accountSubject(account, wellknown.RunnersNamespace),
	}, append(slices.Clone(opts), pulumi.DependsOn([]pulumi.Resource{sa}))...)
	if err != nil {
		return nil, err
	}
	return slices.Concat([]pulumi.Resource{ns, pdb, sampler, sa, nodes}, boundary, rbac), nil
}

// newLegacyContainerHooksRBAC keeps LegacyContainerHooksAccount, its Role in the runners'
// namespace and the node reader's ClusterRole (which the pools' accounts are bound to), under
// the names they always had.
func newLegacyContainerHooksRBAC(ctx *pulumi.Context, name string, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	account := LegacyContainerHooksAccount
	sa, err := corev1.NewServiceAccount(ctx, name+"-container-hooks", &corev1.ServiceAccountArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(account), Namespace: pulumi.String(wellknown.RunnersNamespace)},
	}, opts...)
	if err != nil {
		return nil, err
	}
	rbac, err := newAccountRole(ctx, name+"-container-hooks", account, wellknown.RunnersNamespace, ContainerHooksRules(), sa, opts...)
	if err != nil {
		return nil, err
	}
	nodes, err := newAccountClusterRole(ctx, name+"-container-hooks-nodes", ContainerHooksNodeReader, account, wellknown.RunnersNamespace, ContainerHooksNodeRules(), sa, opts...)
	if err != nil {
		return nil, err
	}
	return append(append([]pulumi.Resource{sa}, rbac...), nodes...), nil
}

// newNetworkPolicies declares policies, each named prefix-<its name>.
func newNetworkPolicies(ctx *pulumi.Context, prefix string, policies []networkingv1.NetworkPolicy, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	var out []pulumi.Resource
	for _, np := range policies {
		r, err := newObject(ctx, prefix+"-"+np.Name, np.TypeMeta, np.ObjectMeta, np, opts...)
		if err != nil {
			return nil, fmt.Errorf("network policy %s: %w", np.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// secretInput hands a credential from the configuration to a resource as a Pulumi secret,
// so it is encrypted in the state and masked in every diff.
func secretInput(s config.Secret) pulumi.StringOutput {
	return pulumi.ToSecret(pulumi.String(s.Reveal())).(pulumi.StringOutput)
}

// newJobHooks creates the job hooks' ConfigMap (internal/jobhooks). Every scale set depends on
// it: runners of both forms mount the hooks, a container-form job pod the GPU sampler.
func newJobHooks(ctx *pulumi.Context, name string, opts ...pulumi.ResourceOption) (pulumi.Resource, error) {
	return corev1.NewConfigMap(ctx, name+"-job-hooks", &corev1.ConfigMapArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(JobHooksConfigMap), Namespace: pulumi.String(wellknown.RunnersNamespace)},
		Data:     pulumi.ToStringMap(jobhooks.Files()),
	}, opts...)
}

// newRetryReader creates the retry runner's account and, in each namespace it reads, a Role
// and RoleBinding (RetryReaderRules).
func newRetryReader(ctx *pulumi.Context, name string, pools []config.GPUPool, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	sa, err := corev1.NewServiceAccount(ctx, name+"-retry", &corev1.ServiceAccountArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.RetryServiceAccount), Namespace: pulumi.String(wellknown.RunnersNamespace)},
	}, opts...)
	if err != nil {
		return nil, err
	}
	out := []pulumi.Resource{sa}
	reads := RetryReaderRules(pools)
	for _, ns := range slices.Sorted(maps.Keys(reads)) {
		rbac, err := newAccountRole(ctx, name+"-retry-"+ns, wellknown.RetryServiceAccount, ns, reads[ns], sa, opts...)
		if err != nil {
			return nil, err
		}
		out = append(out, rbac...)
	}
	return out, nil
}
