package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/workflows"
)

// runWorkflows writes the workflows a repository needs for the stack (workflows.For): to
// standard output, or into --out (a repository's .github/workflows).
func runWorkflows(args []string) error {
	fs := flag.NewFlagSet("workflows", flag.ExitOnError)
	st := addStackFlags(fs, "stack whose scale sets the workflows name")
	out := fs.String("out", "", "write the files into this directory (e.g. .github/workflows) instead of printing them")
	releases := fs.String("releases", workflows.DefaultReleasesURL, "where the retry workflow downloads gpuci from (a fork's own releases)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	name, cfg, err := st.load()
	if err != nil {
		return err
	}
	files, err := workflows.For(name, cfg, thisRelease(*releases))
	if err != nil {
		return err
	}
	switch {
	case *asJSON:
		return printJSON(files)
	case *out != "":
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		for _, f := range files {
			path := filepath.Join(*out, f.Name)
			if err := os.WriteFile(path, []byte(f.Content), 0o644); err != nil {
				return err
			}
			fmt.Println(path)
		}
		return nil
	}
	for i, f := range files {
		if i > 0 {
			fmt.Println()
		}
		fmt.Printf("# ==> %s <==\n%s", f.Name, f.Content)
	}
	return nil
}

// thisRelease is the release the retry workflow pins: this binary's, when it is the released
// linux/amd64 gpuci the workflow downloads (its own SHA-256 is then the download's); none
// from a source build or another platform, and the workflow says what to fill in.
func thisRelease(url string) workflows.Release {
	rel := workflows.Release{URL: url}
	if releaseVersion == "" || runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return rel
	}
	exe, err := os.Executable()
	if err != nil {
		return rel
	}
	f, err := os.Open(exe)
	if err != nil {
		return rel
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return rel
	}
	rel.Version, rel.SHA256 = releaseVersion, hex.EncodeToString(h.Sum(nil))
	return rel
}
