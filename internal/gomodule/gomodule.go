// Package gomodule finds a Go module in the module cache through the go command, at the
// version go.mod requires or at one named: where the repository reads upstream files (charts,
// generated tables, SDK sources) at exactly the pinned version.
package gomodule

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// Module is a module as the go command reports it.
type Module struct {
	Path, Version, Dir string
}

// Find returns a module, downloading it through the module proxy if needed. mod is "path"
// (the version go.mod requires) or "path@version".
func Find(mod string) (Module, error) {
	args := []string{"list", "-m", "-json", mod}
	if strings.Contains(mod, "@") {
		args = []string{"mod", "download", "-json", mod}
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		return Module{}, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	var info struct {
		Module
		Error string
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return Module{}, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	if info.Error != "" || info.Dir == "" {
		return Module{}, fmt.Errorf("module %s is not available: %s", mod, info.Error)
	}
	return info.Module, nil
}
