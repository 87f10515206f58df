package k8s

import (
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	rbacv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/rbac/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	k8srbacv1 "k8s.io/api/rbac/v1"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// newAccountRole grants one of the runners' ServiceAccounts (account, in the runners'
// namespace) rules in namespace: a Role and a RoleBinding, both named for the account, the
// binding after the account and the Role exist. logical names the two resources.
func newAccountRole(ctx *pulumi.Context, logical, account, namespace string, rules []k8srbacv1.PolicyRule, sa pulumi.Resource, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	return newAccountRoleOf(ctx, logical, account, wellknown.RunnersNamespace, namespace, rules, sa, opts...)
}

// newAccountRoleOf is newAccountRole for an account of accountNS.
func newAccountRoleOf(ctx *pulumi.Context, logical, account, accountNS, namespace string, rules []k8srbacv1.PolicyRule, sa pulumi.Resource, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	meta := &metav1.ObjectMetaArgs{Name: pulumi.String(account), Namespace: pulumi.String(namespace)}
	role, err := rbacv1.NewRole(ctx, logical, &rbacv1.RoleArgs{Metadata: meta, Rules: policyRules(rules)}, opts...)
	if err != nil {
		return nil, err
	}
	binding, err := rbacv1.NewRoleBinding(ctx, logical, &rbacv1.RoleBindingArgs{
		Metadata: meta,
		RoleRef:  roleRef("Role", account),
		Subjects: accountSubject(account, accountNS),
	}, append(opts, pulumi.DependsOn([]pulumi.Resource{sa, role}))...)
	if err != nil {
		return nil, err
	}
	return []pulumi.Resource{role, binding}, nil
}

// newAccountClusterRole gives an account of accountNS cluster-scoped rules: a ClusterRole
// named name and its ClusterRoleBinding.
func newAccountClusterRole(ctx *pulumi.Context, logical, name, account, accountNS string, rules []k8srbacv1.PolicyRule, sa pulumi.Resource, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	meta := &metav1.ObjectMetaArgs{Name: pulumi.String(name)}
	role, err := rbacv1.NewClusterRole(ctx, logical, &rbacv1.ClusterRoleArgs{Metadata: meta, Rules: policyRules(rules)}, opts...)
	if err != nil {
		return nil, err
	}
	binding, err := rbacv1.NewClusterRoleBinding(ctx, logical, &rbacv1.ClusterRoleBindingArgs{
		Metadata: meta,
		RoleRef:  roleRef("ClusterRole", name),
		Subjects: accountSubject(account, accountNS),
	}, append(opts, pulumi.DependsOn([]pulumi.Resource{sa, role}))...)
	if err != nil {
		return nil, err
	}
	return []pulumi.Resource{role, binding}, nil
}

// roleRef names the Role or ClusterRole a binding grants.
func roleRef(kind, name string) rbacv1.RoleRefArgs {
	return rbacv1.RoleRefArgs{ApiGroup: pulumi.String("rbac.authorization.k8s.io"), Kind: pulumi.String(kind), Name: pulumi.String(name)}
}

// accountSubject is a binding's one subject: the ServiceAccount account of namespace.
func accountSubject(account, namespace string) rbacv1.SubjectArray {
	return rbacv1.SubjectArray{rbacv1.SubjectArgs{Kind: pulumi.String("ServiceAccount"), Name: pulumi.String(account), Namespace: pulumi.String(namespace)}}
}

func policyRules(rules []k8srbacv1.PolicyRule) rbacv1.PolicyRuleArray {
	var args rbacv1.PolicyRuleArray
	for _, r := range rules {
		rule := rbacv1.PolicyRuleArgs{
			ApiGroups: pulumi.ToStringArray(r.APIGroups),
			Resources: pulumi.ToStringArray(r.Resources),
			Verbs:     pulumi.ToStringArray(r.Verbs),
		}
		if len(r.ResourceNames) > 0 {
			rule.ResourceNames = pulumi.ToStringArray(r.ResourceNames)
		}
		args = append(args, rule)
	}
	return args
}
