// Package instancetypes is the catalogue of NVIDIA GPU instance types a pool may use, with
// the sizes lux-gpu-ci needs to fit a runner pod on them. A type missing here is rejected
// by config validation rather than guessed at.
package instancetypes

import (
	"fmt"
	"sort"
	"strings"
)

// GPU describes one EC2 GPU instance type.
type GPU struct {
	Name      string
	VCPUs     int
	MemoryGiB int
	GPUs      int
	// GPUModel is Karpenter's karpenter.k8s.aws/instance-gpu-name label value.
	GPUModel string
}

var catalogue = func() map[string]GPU {
	m := map[string]GPU{}
	add := func(family, model string, sizes map[string][3]int) {
		for size, s := range sizes {
			name := family + "." + size
			m[name] = GPU{Name: name, VCPUs: s[0], MemoryGiB: s[1], GPUs: s[2], GPUModel: model}
		}
	}
	// vCPUs, memory GiB, GPUs (EC2 instance type documentation).
	common := map[string][3]int{
		"xlarge": {4, 16, 1}, "2xlarge": {8, 32, 1}, "4xlarge": {16, 64, 1}, "8xlarge": {32, 128, 1},
		"12xlarge": {48, 192, 4}, "16xlarge": {64, 256, 1},
	}
	add("g4dn", "t4", common)
	big := map[string][3]int{"24xlarge": {96, 384, 4}, "48xlarge": {192, 768, 8}}
	for _, fam := range []struct{ name, model string }{{"g5", "a10g"}, {"g6", "l4"}} {
		add(fam.name, fam.model, common)
		add(fam.name, fam.model, big)
	}
	return m
}()

// IsGPUModel reports whether word is the GPU model of a catalogued type (t4, a10g, l4):
// a runner label that names one promises it.
func IsGPUModel(word string) bool {
	for _, g := range catalogue {
		if g.GPUModel == word {
			return true
		}
	}
	return false
}

// Lookup returns the catalogue entry for an instance type.
func Lookup(name string) (GPU, bool) {
	g, ok := catalogue[name]
	return g, ok
}

// Names lists the catalogue, sorted.
func Names() []string {
	names := make([]string, 0, len(catalogue))
	for n := range catalogue {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Smallest returns the per-GPU share of the smallest of the given types: a runner that
// requests one GPU and fits this share fits every type in the list.
func Smallest(names []string) (vcpusPerGPU, memGiBPerGPU float64, err error) {
	if len(names) == 0 {
		return 0, 0, fmt.Errorf("no instance types")
	}
	vcpusPerGPU, memGiBPerGPU = -1, -1
	for _, n := range names {
		g, ok := Lookup(n)
		if !ok {
			return 0, 0, fmt.Errorf("%q is not a known GPU instance type (known: %s)", n, strings.Join(Names(), ", "))
		}
		c, m := float64(g.VCPUs)/float64(g.GPUs), float64(g.MemoryGiB)/float64(g.GPUs)
		if vcpusPerGPU < 0 || c < vcpusPerGPU {
			vcpusPerGPU = c
		}
		if memGiBPerGPU < 0 || m < memGiBPerGPU {
			memGiBPerGPU = m
		}
	}
	return vcpusPerGPU, memGiBPerGPU, nil
}
