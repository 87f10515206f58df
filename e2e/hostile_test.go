//go:build e2e

package e2e

// A job is untrusted code. Here three of them try to cross the runners' namespace's boundary,
// each with the identity its code would have, against the real API server: its
// ServiceAccount admission (which token a pod gets), its RBAC, and its Pod Security admission.
// Nothing here is asserted on the program's own objects: every refusal is the API server's.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// hostileJobs runs before any node exists (the pods stay Pending: their code is played by the
// test, with the identity the pod would have): a runner-form job (its steps run in the runner
// pod), a container-form job (in the job pod the hooks create from the pool's template, in the
// pool's own namespace), the container-form runner itself (a job can run code there through
// the runner's PATH unless the entry points hold: internal/jobhooks; here its account is what
// such code would hold) and a job on the retry runner (whatever workflow the retry runner's
// group admits runs with its account). Each tries to read the GitHub credential in
// arc-runners and its copy in arc-systems, another runner's JIT config, the pods (a container
// job's pod spec holds its job's secrets), exec into another pool's runner, write a ConfigMap
// the runners trust (a pool's job pod template), plant an evidence store for gpuci retry, and
// start a pod outside its namespace; all are refused. Then the container hooks' account,
// which may create pods in its pool's jobs' namespace, tries a privileged and a host-path pod
// there: Pod Security admission refuses them. Last, every pod in the two namespaces is under
// the deny-all NetworkPolicy and exactly one egress policy of its role (the API server
// selects; the VPC CNI enforces on EKS, nothing does here).
func hostileJobs(t *testing.T, ctx context.Context, restCfg *rest.Config, core kubernetes.Interface, kube dynamic.Interface) {
	pods := core.CoreV1().Pods(wellknown.RunnersNamespace)
	runnerForm := runnerPod(t, ctx, kube, "lux-gpu-t4", "lux-gpu-t4-hostile-runner-a")
	retryRunner := runnerPod(t, ctx, kube, retryScaleSet, retryScaleSet+"-hostile-runner-r")
	relay := runnerPod(t, ctx, kube, "lux-gpu-t4-container", "lux-gpu-t4-container-hostile-runner-c")
	created := map[string]*corev1.Pod{}
	for _, p := range []*corev1.Pod{runnerForm, retryRunner, relay} {
		c, err := pods.Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err, "Pod Security admission admits %s's runner as its template makes it", p.Name)
		created[p.Name] = c
	}
	jobPod := containerJobPod(t, ctx, core, kube, "lux-gpu-t4-container", relay.Name)
	jobsNS := jobPod.Namespace
	require.Equal(t, wellknown.ContainerJobsNamespace("gpu-spot-container"), jobsNS, "the runner names its pool's namespace to the hooks")
	job, err := core.CoreV1().Pods(jobsNS).Create(ctx, jobPod, metav1.CreateOptions{})
	require.NoError(t, err, "and the container-form job pod the hooks make from the pool's template, in the pool's namespace")
	// The runner-form runner's JIT config, as ARC's controller stores it: a Secret named for
	// its EphemeralRunner, beside it (resourcebuilder.go newEphemeralRunnerJitSecret at
	// gha-runner-scale-set-0.14.2; the runner reads it as ACTIONS_RUNNER_INPUT_JITCONFIG).
	jit, err := core.CoreV1().Secrets(wellknown.RunnersNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: runnerForm.Name, Namespace: wellknown.RunnersNamespace},
		Data:       map[string][]byte{"jitToken": []byte("a runner's registration")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	defer func() {
		for name := range created {
			_ = pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}
		_ = core.CoreV1().Pods(jobsNS).Delete(ctx, job.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		_ = core.CoreV1().Secrets(wellknown.RunnersNamespace).Delete(ctx, jit.Name, metav1.DeleteOptions{})
		for _, p := range hostilePods(jobsNS) { // there only if an attempt was let through
			for _, ns := range []string{wellknown.RunnersNamespace, jobsNS, metav1.NamespaceSystem} {
				_ = core.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			}
		}
	}()

	// A job's code holds no Kubernetes identity: the ServiceAccount admission plugin mounted
	// no token into the pods it runs in, so all it can send is an anonymous request.
	for _, p := range []*corev1.Pod{created[runnerForm.Name], job} {
		assert.Empty(t, tokenVolumes(p), "%s (where a job's code runs) mounts no service-account token", p.Name)
	}
	assert.NotEmpty(t, tokenVolumes(created[retryRunner.Name]), "the retry runner's token is its job's: gpuci retry reads events with it")
	assert.NotEmpty(t, tokenVolumes(created[relay.Name]), "the container-form runner's token is the hooks'")
	anonymous, err := kubernetes.NewForConfig(rest.AnonymousClientConfig(restCfg))
	require.NoError(t, err)
	tryEverything(t, ctx, "an anonymous request (a job's code, which holds no token)", anonymous, relay.Name)

	// Were a token to leak, or a job's code run in the container-form runner, its account could
	// do no more: the runner-form runner's (the chart's no-permission account), the job pod's
	// (its namespace's default), the container-form runner's (its pool's hooks account) and the
	// retry runner's, each bound to its pod as the kubelet would mount it. Each tries to exec
	// into another pool's runner and to read its JIT config.
	for _, p := range []*corev1.Pod{created[runnerForm.Name], job, created[relay.Name], created[retryRunner.Name]} {
		other := runnerForm.Name
		if p.Name == runnerForm.Name {
			other = relay.Name
		}
		client := asPod(t, ctx, restCfg, core, p)
		tryEverything(t, ctx, "the account of "+p.Namespace+"/"+p.Name+" ("+p.Spec.ServiceAccountName+")", client, other)
	}
	// The job pod's own account has nothing in its own namespace either.
	jobAccount := asPod(t, ctx, restCfg, core, job)
	_, err = jobAccount.CoreV1().Pods(jobsNS).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "a job pod's account lists no pod of its namespace: %v", err)
	_, err = jobAccount.CoreV1().Secrets(jobsNS).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "nor its Secrets (the other jobs' registry credentials): %v", err)

	// The container hooks' account must create pods (its job's) in its pool's namespace, so
	// RBAC lets it there: Pod Security admission is what keeps a privileged or host-path pod
	// off the GPU node.
	hooks := asPod(t, ctx, restCfg, core, created[relay.Name])
	for what, pod := range hostilePods(jobsNS) {
		_, err := hooks.CoreV1().Pods(jobsNS).Create(ctx, pod, metav1.CreateOptions{})
		if assert.Error(t, err, "the hooks' account creates %s", what) {
			assert.True(t, apierrors.IsForbidden(err), "refused: %v", err)
			assert.Contains(t, err.Error(), "violates PodSecurity", "by Pod Security admission, past RBAC: %v", err)
		}
	}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hostile-elsewhere"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "busybox"}}}}
	for _, ns := range []string{wellknown.RunnersNamespace, metav1.NamespaceSystem, wellknown.ARCNamespace} {
		_, err := hooks.CoreV1().Pods(ns).Create(ctx, plain, metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "the hooks' account creates no pod outside its pool's namespace (%s): %v", ns, err)
	}

	// Every pod in the two namespaces is denied in and out, then allowed out by its role's
	// policy alone: a job's pod to DNS and public addresses, a relay also to the API server.
	selected := map[string][]string{} // namespace/pod → the policies that select it
	for ns, want := range map[string]int{wellknown.RunnersNamespace: 4, jobsNS: 2} {
		policies, err := core.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, policies.Items, want, "%s: deny-all, job-egress (and in the runners', relay-egress, predates-runner-roles)", ns)
		for _, np := range policies.Items {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			require.NoError(t, err)
			list, err := core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
			require.NoError(t, err)
			for _, p := range list.Items {
				selected[ns+"/"+p.Name] = append(selected[ns+"/"+p.Name], np.Name)
			}
		}
	}
	in := func(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
	assert.ElementsMatch(t, []string{k8s.DenyAllPolicy, k8s.JobEgressPolicy}, selected[in(created[runnerForm.Name])], "a runner-form runner runs its job's code")
	assert.ElementsMatch(t, []string{k8s.DenyAllPolicy, k8s.JobEgressPolicy}, selected[in(job)], "so does a container-form job's pod, in its pool's namespace")
	assert.ElementsMatch(t, []string{k8s.DenyAllPolicy, k8s.RelayEgressPolicy}, selected[in(created[relay.Name])], "a container-form runner relays to the API server")
	assert.ElementsMatch(t, []string{k8s.DenyAllPolicy, k8s.RelayEgressPolicy}, selected[in(created[retryRunner.Name])], "so does the retry runner")
	// The policy for pods older than the roles (k8s.RunnersNetworkPolicies) selects none that
	// ARC, the hooks or the scale sets made: every pod there was made with a role.
	var all []corev1.Pod
	for _, ns := range []string{wellknown.RunnersNamespace, jobsNS} {
		list, err := core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		all = append(all, list.Items...)
	}
	require.GreaterOrEqual(t, len(all), 4, "the runners and the job pod above")
	for _, p := range all {
		assert.NotContains(t, selected[in(&p)], k8s.PredatesRolesPolicy, "%s was made with a role: %v", p.Name, p.Labels)
		assert.Len(t, selected[in(&p)], 2, "%s: deny-all and its role's egress", in(&p))
	}
}

// tryEverything has client try each thing a job must not do, and asserts that the API server
// refuses each (403, or 401 for a request it could not authenticate).
func tryEverything(t *testing.T, ctx context.Context, who string, client kubernetes.Interface, otherRunner string) {
	t.Helper()
	refused := func(what string, err error) {
		t.Helper()
		if assert.Error(t, err, "%s: %s", who, what) {
			assert.True(t, apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err), "%s: %s is refused by the API server: %v", who, what, err)
		}
	}
	_, err := client.CoreV1().Secrets(wellknown.RunnersNamespace).Get(ctx, wellknown.GitHubSecretName, metav1.GetOptions{})
	refused("read the GitHub credential", err)
	_, err = client.CoreV1().Secrets(wellknown.RunnersNamespace).List(ctx, metav1.ListOptions{})
	refused("list the runners' Secrets (their JIT configs)", err)
	_, err = client.CoreV1().Secrets(wellknown.RunnersNamespace).Get(ctx, otherRunner, metav1.GetOptions{})
	refused("read another runner's JIT config", err)
	_, err = client.CoreV1().Secrets(wellknown.ARCNamespace).List(ctx, metav1.ListOptions{})
	refused("list arc-systems' Secrets (the listeners' copies of the credential)", err)
	_, err = client.CoreV1().Pods(wellknown.RunnersNamespace).List(ctx, metav1.ListOptions{})
	refused("list the runners' pods (a container job's spec holds its secrets)", err)
	_, err = client.CoreV1().Pods(wellknown.RunnersNamespace).Get(ctx, otherRunner, metav1.GetOptions{})
	refused("read another runner's pod", err)
	// RBAC answers an exec before any kubelet is involved: an allowed one would fail later,
	// on the missing kubelet, with another error.
	err = client.CoreV1().RESTClient().Post().Namespace(wellknown.RunnersNamespace).Resource("pods").Name(otherRunner).
		SubResource("exec").Param("container", "runner").Param("command", "id").Param("stdout", "true").Do(ctx).Error()
	refused("exec into another runner", err)
	cm, err := client.CoreV1().ConfigMaps(wellknown.RunnersNamespace).Get(ctx, "lux-gpu-t4-container-job-pod", metav1.GetOptions{})
	refused("read a pool's job pod template", err)
	if cm == nil || cm.Name == "" {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "lux-gpu-t4-container-job-pod", Namespace: wellknown.RunnersNamespace}}
	}
	cm.Data = map[string]string{"job-pod.yaml": "spec: {hostNetwork: true}"}
	_, err = client.CoreV1().ConfigMaps(wellknown.RunnersNamespace).Update(ctx, cm, metav1.UpdateOptions{})
	refused("rewrite a pool's job pod template", err)
	_, err = client.CoreV1().ConfigMaps(wellknown.RunnersNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "gpuci-retry-evidence", Namespace: wellknown.RunnersNamespace},
		Data:       map[string]string{"job-424242": "2026-12-05T00:00:00Z cluster: spot-interrupted"},
	}, metav1.CreateOptions{})
	refused("plant retry evidence", err)
	for what, pod := range hostilePods(wellknown.RunnersNamespace) {
		_, err := client.CoreV1().Pods(wellknown.RunnersNamespace).Create(ctx, pod, metav1.CreateOptions{})
		refused("create "+what, err)
	}
	kubeSystem := hostilePods(metav1.NamespaceSystem)["a pod mounting the node's root"]
	_, err = client.CoreV1().Pods(metav1.NamespaceSystem).Create(ctx, kubeSystem, metav1.CreateOptions{})
	refused("create a pod in kube-system", err)
}

// hostilePods are what a job would start, in namespace, to take the node: a privileged pod,
// and one that mounts the node's root.
func hostilePods(namespace string) map[string]*corev1.Pod {
	pod := func(name string, mutate func(*corev1.PodSpec)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{wellknown.SystemNodeLabel: wellknown.SystemNodeValue},
				Containers:   []corev1.Container{{Name: "x", Image: "busybox"}},
			},
		}
		mutate(&p.Spec)
		return p
	}
	return map[string]*corev1.Pod{
		"a privileged pod": pod("hostile-privileged", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: new(true)}
		}),
		"a pod mounting the node's root": pod("hostile-hostpath", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
		}),
	}
}

// tokenVolumes are the pod's projected service-account token volumes, as the ServiceAccount
// admission plugin adds them.
func tokenVolumes(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				out = append(out, v.Name)
			}
		}
	}
	return out
}

// asPod is a client with the token the kubelet would mount into p: its ServiceAccount's,
// bound to the pod (TokenRequest), so every request goes through the real RBAC as that account.
func asPod(t tb, ctx context.Context, restCfg *rest.Config, core kubernetes.Interface, p *corev1.Pod) kubernetes.Interface {
	t.Helper()
	account := p.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	tok, err := core.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, account, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: new(int64(600)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
	}}, metav1.CreateOptions{})
	require.NoError(t, err, "a token for %s/%s, bound to %s", p.Namespace, account, p.Name)
	cfg := rest.AnonymousClientConfig(restCfg)
	cfg.BearerToken = tok.Status.Token
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return client
}

// everyPodUnderAPolicy: in strict mode (networkPolicyEnforcingMode) a pod that no
// NetworkPolicy selects is denied everything. Every pod running in the cluster now — the
// controllers, CoreDNS, the listeners, the runners, the cache servers — is selected by a
// policy of its namespace, by the API server's own label selection (the VPC CNI enforces them
// on EKS; nothing does here). Pods on the host network are exempt (amazon-vpc-cni-k8s README).
func everyPodUnderAPolicy(t *testing.T, ctx context.Context, core kubernetes.Interface) {
	pods, err := core.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	selected := map[string]bool{} // namespace/pod
	policies, err := core.NetworkingV1().NetworkPolicies(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, np := range policies.Items {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		require.NoError(t, err)
		list, err := core.CoreV1().Pods(np.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		require.NoError(t, err)
		for _, p := range list.Items {
			selected[p.Namespace+"/"+p.Name] = true
		}
	}
	checked := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.HostNetwork || p.DeletionTimestamp != nil {
			continue
		}
		checked[p.Namespace]++
		assert.True(t, selected[p.Namespace+"/"+p.Name], "%s/%s: no NetworkPolicy selects it, so strict mode denies it everything", p.Namespace, p.Name)
	}
	t.Logf("pods under a policy, by namespace: %v", checked)
	for _, ns := range []string{"kube-system", wellknown.ARCNamespace, wellknown.RunnersNamespace, wellknown.CompilerCacheNamespace} {
		assert.Positive(t, checked[ns], "pods run in %s", ns)
	}
}
