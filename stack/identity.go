package stack

import (
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/infra"
)

// IdentityProgram is the deploy identity project (identity/): the IAM identities GitHub
// Actions deploys and previews the stacks of stackDir with (config.Identity). Like Program,
// its configuration is validated before anything is registered.
func IdentityProgram(stackDir string) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		id, err := config.ParseIdentity(ctx.GetConfig, stackDir)
		if err != nil {
			return err
		}
		partition, err := aws.GetPartition(ctx, nil)
		if err != nil {
			return err
		}
		caller, err := aws.GetCallerIdentity(ctx, nil)
		if err != nil {
			return err
		}
		d, err := infra.NewDeployIdentity(ctx, "identity", &infra.DeployIdentityArgs{
			Identity: id, Partition: partition.Partition, Account: caller.AccountId,
		})
		if err != nil {
			return err
		}
		roles := pulumi.StringMap{}
		for n, arn := range d.DeployRoles {
			roles[n] = arn
		}
		// deploy.yml takes deployRoles[<stack>] (vars.AWS_DEPLOY_ROLE_ARN of the stack's
		// environment), preview.yml previewRole; each stack's deployRoleArn and previewRoleArn
		// give them their access entries.
		ctx.Export("deployRoles", roles)
		ctx.Export("previewRole", d.PreviewRole)
		ctx.Export("oidcProvider", d.OIDCProvider)
		return nil
	}
}
