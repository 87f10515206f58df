package main

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/luxfi/lux-gpu-ci/versions"
)

// releaseVersion is the release tag a published binary was built for (make dist sets it with
// -ldflags -X); empty in a build from source, which reports its module version instead.
var releaseVersion string

// runVersion prints gpuci's own version (the module version it was built at, and the commit
// when the build recorded one) and the versions the stack pins, which is what an operator
// compares when two machines disagree.
func runVersion(args []string) error {
	fs := flag.NewFlagSet("version", flag.ExitOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
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
		if releaseVersion != "" {
			version = releaseVersion
		}
		if len(commit) > 12 {
			commit = commit[:12]
		}
		if commit != "" && dirty {
			commit += "+dirty"
		}
	}
	pins := map[string]string{
		"arc": versions.ARCControllerChart.Version, "karpenter": versions.KarpenterChart.Version,
		"nvidiaDevicePlugin": versions.NvidiaDevicePluginChart.Version, "kubernetes": versions.KubernetesDefault,
		"gpuNodeAMI": versions.GPUNodeAMIAlias, "gpuNodeAMIWithImageSnapshot": versions.GPUNodeBottlerocketAlias,
	}
	if *asJSON {
		return printJSON(map[string]any{"version": version, "commit": commit, "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH, "pins": pins})
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
