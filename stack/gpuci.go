package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/luxfi/lux-gpu-ci/infra"
)

// gpuciPackage is the operator CLI's package, whose Linux build the stack's pods run.
const gpuciPackage = "./cmd/gpuci"

// BuildGpuci builds gpuci for the system nodes (linux/amd64) from the source the program runs
// from, the way the stack's own pods run it (the retrier, the compiler caches' gates): so a
// stack needs no published release, and runs the code of the commit that deploys it. The
// build is reproducible (-trimpath, no VCS stamp: the same source and Go give the same bytes,
// and the same object), and runs once per process.
func BuildGpuci() (infra.GpuciBinary, error) {
	gpuciOnce.Do(func() { gpuciBuilt, gpuciErr = buildGpuci() })
	return gpuciBuilt, gpuciErr
}

var (
	gpuciOnce  sync.Once
	gpuciBuilt infra.GpuciBinary
	gpuciErr   error
)

func buildGpuci() (infra.GpuciBinary, error) {
	root, err := moduleRoot()
	if err != nil {
		return infra.GpuciBinary{}, err
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	out := filepath.Join(dir, "lux-gpu-ci", "gpuci-linux-amd64")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return infra.GpuciBinary{}, err
	}
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, gpuciPackage)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return infra.GpuciBinary{}, fmt.Errorf("building gpuci for the stack's pods (go build %s in %s): %v\n%s", gpuciPackage, root, err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		return infra.GpuciBinary{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return infra.GpuciBinary{}, err
	}
	return infra.GpuciBinary{Path: out, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// moduleRoot is the directory of this module's go.mod, from the working directory up: the
// project's directory under `pulumi up`, a package's directory under `go test`.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/luxfi/lux-gpu-ci\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("building gpuci for the stack's pods: no go.mod of github.com/luxfi/lux-gpu-ci above the working directory: run the program from its repository, or pin a release (retrierGpuciVersion, retrierGpuciSha256)")
		}
		dir = parent
	}
}

// GpuciStandIn stands in for BuildGpuci where nothing is deployed (the unit tests, make
// render): a file name, and a pin no build has.
func GpuciStandIn() (infra.GpuciBinary, error) {
	return infra.GpuciBinary{Path: "gpuci-stand-in", SHA256: GpuciStandInSHA256}, nil
}

// GpuciStandInSHA256 is GpuciStandIn's pin.
const GpuciStandInSHA256 = "6ad9f2a4f6e3d2ba1b0e5d4f0a1c8a3b0e2b5f1ce4c1b6c0f5d2a9e8b7c6d5e4"
