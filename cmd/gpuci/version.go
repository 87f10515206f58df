package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/luxfi/lux-gpu-ci/versions"
)

// runVersion prints gpuci's own version (the module version it was built at, and the commit
// when the build recorded one) and the versions the stack pins, which is what an operator
// compares when two machines disagree.
func runVersion([]string) error {
	version, commit := "(devel)", ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(commit) > 12 {
			commit = commit[:12]
		}
		if commit != "" && dirty {
			commit += "+dirty"
		}
	}
	fmt.Printf("gpuci %s", version)
	if commit != "" {
		fmt.Printf(" (%s)", commit)
	}
	fmt.Printf(" %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("pins: ARC %s, Karpenter %s, NVIDIA device plugin %s, Kubernetes %s (default), GPU node AMI %s (%s with imageSnapshotID)\n",
		versions.ARCControllerChart.Version, versions.KarpenterChart.Version, versions.NvidiaDevicePluginChart.Version,
		versions.KubernetesDefault, versions.GPUNodeAMIAlias, versions.GPUNodeBottlerocketAlias)
	return nil
}
