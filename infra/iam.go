package infra

import (
	"fmt"
	"path"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// IAM policy documents are built as typed statements and rendered by the AWS provider's
// own aws:iam/getPolicyDocument, never as hand-written JSON.

// statement is one IAM policy statement. Resources may hold outputs (a queue or role ARN).
type statement struct {
	Sid     string
	Effect  string // "Allow" unless set
	Actions []string
	// NotActions: every action but these (a permissions boundary's "everything but IAM").
	NotActions []string
	Resources  pulumi.StringArray
	// NotResources: every resource but these (with a Deny: "nothing but these").
	NotResources pulumi.StringArray
	Principals   []principal
	// OutputPrincipals are principals whose identifiers are other resources' outputs (an
	// OIDC provider's ARN).
	OutputPrincipals []outputPrincipal
	Conditions       []condition
	// OutputConditions are conditions whose values are other resources' outputs (the ARNs of
	// the rules a queue takes messages from).
	OutputConditions []outputCondition
}

type principal struct {
	Type        string // "Service", "AWS", "*"
	Identifiers []string
}

type outputPrincipal struct {
	Type        string
	Identifiers pulumi.StringArrayInput
}

type condition struct {
	Test     string // "StringEquals", "StringLike", ...
	Variable string
	Values   []string
}

type outputCondition struct {
	Test, Variable string
	Values         pulumi.StringArrayInput
}

func (s statement) args() iam.GetPolicyDocumentStatementArgs {
	a := iam.GetPolicyDocumentStatementArgs{
		Effect: pulumi.String("Allow"),
	}
	if len(s.Actions) > 0 {
		a.Actions = pulumi.ToStringArray(s.Actions)
	}
	if len(s.NotActions) > 0 {
		a.NotActions = pulumi.ToStringArray(s.NotActions)
	}
	if s.Sid != "" {
		a.Sid = pulumi.String(s.Sid)
	}
	if s.Effect != "" {
		a.Effect = pulumi.String(s.Effect)
	}
	if len(s.Resources) > 0 {
		a.Resources = s.Resources
	}
	if len(s.NotResources) > 0 {
		a.NotResources = s.NotResources
	}
	var ps iam.GetPolicyDocumentStatementPrincipalArray
	for _, p := range s.Principals {
		ps = append(ps, iam.GetPolicyDocumentStatementPrincipalArgs{Type: pulumi.String(p.Type), Identifiers: pulumi.ToStringArray(p.Identifiers)})
	}
	for _, p := range s.OutputPrincipals {
		ps = append(ps, iam.GetPolicyDocumentStatementPrincipalArgs{Type: pulumi.String(p.Type), Identifiers: p.Identifiers})
	}
	if len(ps) > 0 {
		a.Principals = ps
	}
	var cs iam.GetPolicyDocumentStatementConditionArray
	for _, c := range s.Conditions {
		cs = append(cs, iam.GetPolicyDocumentStatementConditionArgs{Test: pulumi.String(c.Test), Variable: pulumi.String(c.Variable), Values: pulumi.ToStringArray(c.Values)})
	}
	for _, c := range s.OutputConditions {
		cs = append(cs, iam.GetPolicyDocumentStatementConditionArgs{Test: pulumi.String(c.Test), Variable: pulumi.String(c.Variable), Values: c.Values})
	}
	if len(cs) > 0 {
		a.Conditions = cs
	}
	return a
}

// policyDocument renders statements to policy JSON. id is the policy's optional "Id".
func policyDocument(ctx *pulumi.Context, parent pulumi.Resource, id string, statements ...statement) pulumi.StringOutput {
	var ss iam.GetPolicyDocumentStatementArray
	for _, s := range statements {
		ss = append(ss, s.args())
	}
	args := iam.GetPolicyDocumentOutputArgs{Statements: ss}
	if id != "" {
		args.PolicyId = pulumi.String(id)
	}
	return iam.GetPolicyDocumentOutput(ctx, args, pulumi.Parent(parent)).Json()
}

// serviceTrust is a trust policy letting an AWS service principal assume a role, under
// conditions (none: whenever the service asks).
func serviceTrust(service string, actions []string, conditions ...condition) []statement {
	return []statement{{
		Actions:    actions,
		Principals: []principal{{Type: "Service", Identifiers: []string{service}}},
		Conditions: conditions,
	}}
}

func managedPolicyARNs(partition string, names []string) []string {
	arns := make([]string, len(names))
	for i, n := range names {
		arns[i] = fmt.Sprintf("arn:%s:iam::aws:policy/%s", partition, n)
	}
	return arns
}

// roleSpec describes an IAM role and the managed policies attached to it.
type roleSpec struct {
	// Name is the role's physical name; empty means autonamed.
	Name        string
	Description string
	Trust       []statement
	// Managed are policy ARNs to attach, each with its own RolePolicyAttachment.
	Managed []string
	// Tags carry the stack's ClusterTag (ownedTags): the deploy role changes only roles
	// that do.
	Tags pulumi.StringMap
	// Boundary is the stack's permissions boundary (config.Config.PermissionsBoundaryArn), ""
	// for none: the deploy role changes only roles that carry it.
	Boundary string
}

// newRole creates a role and its policy attachments, all children of parent (not of the
// role: a dependency on a component reaches its children, not a custom resource's). It
// returns the attachments so users of the role can wait until its permissions are in place.
func newRole(ctx *pulumi.Context, parent pulumi.Resource, name string, spec roleSpec) (*iam.Role, []pulumi.Resource, error) {
	args := &iam.RoleArgs{
		AssumeRolePolicy: policyDocument(ctx, parent, "", spec.Trust...),
		Description:      pulumi.String(spec.Description),
		Tags:             spec.Tags,
	}
	if spec.Name != "" {
		args.Name = pulumi.String(spec.Name)
	}
	if spec.Boundary != "" {
		args.PermissionsBoundary = pulumi.String(spec.Boundary)
	}
	role, err := iam.NewRole(ctx, name+"-role", args, pulumi.Parent(parent))
	if err != nil {
		return nil, nil, fmt.Errorf("creating IAM role %s: %w", name, err)
	}
	var attachments []pulumi.Resource
	for _, arn := range spec.Managed {
		a, err := iam.NewRolePolicyAttachment(ctx, name+"-"+path.Base(arn), &iam.RolePolicyAttachmentArgs{
			Role:      role.Name,
			PolicyArn: pulumi.String(arn),
		}, pulumi.Parent(parent))
		if err != nil {
			return nil, nil, fmt.Errorf("attaching %s to %s: %w", arn, name, err)
		}
		attachments = append(attachments, a)
	}
	return role, attachments, nil
}
