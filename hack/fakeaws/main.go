// Command fakeaws is the e2e's stand-in for AWS, one binary under three names (symlinks):
//
//	pulumi-resource-aws  the AWS provider plugin the engine and pulumi-eks talk to; it answers
//	                     from internal/testsupport/fakeaws, the same fake the unit tests' mocks use,
//	                     and rolls the managed node group's nodes on the e2e's API server
//	                     (internal/testsupport/fakeeks) when an update replaces them
//	aws                  the AWS CLI as the kubeconfigs and pulumi-eks use it: `--version`,
//	                     and `eks get-token`, which hands out the local API server's admin
//	                     client certificate as an ExecCredential
//	kubectl              `kubectl version --client`, which pulumi-eks v2 probes for
//
// Each reads the Config that $LUX_FAKEAWS_CONFIG names and logs every call there. Anything
// it does not fake fails, naming what was asked.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/provider"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientauthv1beta1 "k8s.io/client-go/pkg/apis/clientauthentication/v1beta1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeeks"
)

func main() {
	cfg, err := fakeaws.LoadConfig()
	if err != nil {
		fail(err)
	}
	name := filepath.Base(os.Args[0])
	switch name {
	case "pulumi-resource-aws":
		err = provider.Main("aws", func(*provider.HostClient) (pulumirpc.ResourceProviderServer, error) {
			p := fakeaws.NewProvider(cfg.Cloud, cfg.Log)
			if cfg.Kubeconfig != "" {
				nodes, err := newNodeGroups(cfg)
				if err != nil {
					return nil, err
				}
				p.NodeGroups = nodes
			}
			return p, nil
		})
	case "aws":
		err = awsCLI(os.Stdout, cfg, os.Args[1:])
	case "kubectl":
		err = kubectl(os.Stdout, cfg, os.Args[1:])
	default:
		err = fmt.Errorf("run me as pulumi-resource-aws, aws or kubectl, not %s", name)
	}
	if err != nil {
		fail(err)
	}
}

// nodeGroups runs managed node groups' nodes on the e2e's API server (fakeeks).
type nodeGroups struct {
	core            kubernetes.Interface
	evictionTimeout time.Duration
}

func newNodeGroups(cfg fakeaws.Config) (*nodeGroups, error) {
	rest, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	core, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return nil, err
	}
	timeout := 15 * time.Minute // EKS's
	if cfg.EvictionTimeout != "" {
		if timeout, err = time.ParseDuration(cfg.EvictionTimeout); err != nil {
			return nil, fmt.Errorf("evictionTimeout: %w", err)
		}
	}
	return &nodeGroups{core: core, evictionTimeout: timeout}, nil
}

func (n *nodeGroups) Update(ctx context.Context, outputs resource.PropertyMap, zoneOf func(string) string) error {
	g, err := fakeeks.FromOutputs(outputs, zoneOf)
	if err != nil {
		return err
	}
	return fakeeks.Update(ctx, n.core, g, n.evictionTimeout)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "fakeaws: %v\n", err)
	os.Exit(1)
}

// awsEnv is the AWS_* environment a CLI call saw (which profile or role it runs as).
func awsEnv() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") && !strings.Contains(k, "SECRET") && !strings.Contains(k, "TOKEN") {
			env[k] = v
		}
	}
	return env
}

func awsCLI(w io.Writer, cfg fakeaws.Config, args []string) error {
	cfg.Record(fakeaws.Call{Method: "aws", Args: args, Env: awsEnv()})
	switch {
	case slices.Equal(args, []string{"--version"}):
		_, err := fmt.Fprintln(w, "aws-cli/2.17.0 Python/3.12.6 Linux/6.1 exe/x86_64.debian.12 (fakeaws)")
		return err
	case len(args) >= 2 && args[0] == "eks" && args[1] == "get-token":
		return getToken(w, cfg, args[2:])
	}
	return fmt.Errorf("aws %s is not faked", strings.Join(args, " "))
}

// getToken prints the ExecCredential `aws eks get-token --cluster-name NAME --output json`
// prints, with the admin client certificate where EKS would put a token.
func getToken(w io.Writer, cfg fakeaws.Config, args []string) error {
	if !slices.Contains(args, "--cluster-name") {
		return fmt.Errorf("aws eks get-token %s: --cluster-name is required", strings.Join(args, " "))
	}
	cert, err := os.ReadFile(cfg.ClientCert)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(cfg.ClientKey)
	if err != nil {
		return err
	}
	cred := clientauthv1beta1.ExecCredential{
		TypeMeta: metav1.TypeMeta{APIVersion: "client.authentication.k8s.io/v1beta1", Kind: "ExecCredential"},
		Status:   &clientauthv1beta1.ExecCredentialStatus{ClientCertificateData: string(cert), ClientKeyData: string(key)},
	}
	return json.NewEncoder(w).Encode(cred)
}

func kubectl(w io.Writer, cfg fakeaws.Config, args []string) error {
	cfg.Record(fakeaws.Call{Method: "kubectl", Args: args})
	if len(args) > 0 && args[0] == "version" && slices.Contains(args, "--client=true") {
		return json.NewEncoder(w).Encode(map[string]any{
			"clientVersion": map[string]string{"gitVersion": "v1.36.3", "major": "1", "minor": "36"},
		})
	}
	return fmt.Errorf("kubectl %s is not faked", strings.Join(args, " "))
}
