package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/luxfi/lux-gpu-ci/config"
)

// stackFlags are --stack and --project, which every command that reads a stack file takes.
// --stack defaults to the Pulumi stack selected in the project directory, never to a silent
// "dev": `doctor --fix` or `verify` against another environment's cluster would be costly.
type stackFlags struct {
	name, dir *string
}

func addStackFlags(fs *flag.FlagSet, usage string) stackFlags {
	return stackFlags{
		name: fs.String("stack", "", usage+" (default: the selected Pulumi stack)"),
		dir:  fs.String("project", ".", "directory holding Pulumi.yaml and the stack files"),
	}
}

// resolve returns the stack's name and its stack file.
func (s stackFlags) resolve() (name, file string, err error) {
	name = *s.name
	if name == "" {
		cmd := exec.Command("pulumi", "stack", "--show-name")
		cmd.Dir = *s.dir
		out, runErr := cmd.Output()
		name = strings.TrimSpace(string(out))
		if runErr != nil || name == "" {
			return "", "", fmt.Errorf("no --stack given and no Pulumi stack selected in %s: pass --stack <name>, or run pulumi stack select <name>", *s.dir)
		}
		fmt.Fprintf(os.Stderr, "gpuci: stack %s (the selected Pulumi stack)\n", name)
	}
	return name, config.StackFile(*s.dir, name), nil
}

// load resolves the stack and reads its configuration, offline.
func (s stackFlags) load() (string, *config.Config, error) {
	name, file, err := s.resolve()
	if err != nil {
		return "", nil, err
	}
	cfg, err := config.ParseStackFileOffline(file)
	return name, cfg, err
}

// stackOutput reads one of a stack's outputs as JSON (a secret one in the clear: the caller
// keeps it out of logs), through the Pulumi CLI.
func stackOutput(stack, name string) ([]byte, error) {
	out, err := exec.Command("pulumi", "stack", "output", name, "--json", "--show-secrets", "--stack", stack).Output()
	if err != nil {
		return nil, fmt.Errorf("`pulumi stack output %s --stack %s` failed: %w", name, stack, err)
	}
	return out, nil
}
