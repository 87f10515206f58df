// Command identity is the deploy identity's Pulumi program (Pulumi.yaml beside it): the
// GitHub OIDC provider, a deploy role per stack and the preview role that deploy.yml and
// preview.yml assume. It serves the stack files one directory up; `make identity` runs it.
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/stack"
)

func main() {
	pulumi.Run(stack.IdentityProgram(".."))
}
