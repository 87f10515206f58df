package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/registry"
	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// runCUDAImage puts a runner-form pool on the CUDA runner image (images/cuda-runner: the
// runner with the CUDA toolkit and g++), by default the one the organization's copy publishes
// (cuda-runner-image.yml), in Pulumi.<stack>.yaml — once its nodes can pull it. They pull
// without credentials unless the stack's image cache serves its registry, so the image's
// registry is asked first, as a node would ask it, and a private or missing image changes
// nothing and says what to do. make cuda-image then runs the up.
func runCUDAImage(args []string) error {
	fs := flag.NewFlagSet("cuda-image", flag.ExitOnError)
	st := addStackFlags(fs, "stack whose pool runs the image")
	pool := fs.String("pool", "", "the runner-form pool (its name)")
	image := fs.String("image", "", "the image (default: "+cudaRunnerImage("<githubOrg>")+", the copy's)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pool == "" {
		return errors.New("--pool is required")
	}
	name, path, err := st.resolve()
	if err != nil {
		return err
	}
	cfg, err := config.ParseStackFileOffline(path)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(cfg.GPUPools, func(p config.GPUPool) bool { return p.Name == *pool })
	if i < 0 {
		return fmt.Errorf("%s has no pool named %q in %s:%s", path, *pool, config.Project, config.KeyGPUPools)
	}
	if cfg.GPUPools[i].JobForm == config.JobFormContainer {
		return fmt.Errorf("pool %s is container-form: its jobs run in the image their container: names (nvidia/cuda:…-devel has the toolkit), and its runner only relays them", *pool)
	}
	if *image == "" {
		*image = cudaRunnerImage(cfg.GitHub.Org)
	}

	how := "its registry serves it without credentials, as the nodes pull"
	if cfg.ImageCache.Caches(*image) {
		how = "the stack's image cache serves its registry, with that registry's registryCredentials entry (not checked from here)"
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		answer, detail, err := registry.AnonymousPull(ctx, http.DefaultClient, *image)
		if err != nil {
			return fmt.Errorf("asking the registry for %s: %w (nothing changed)", *image, err)
		}
		switch answer {
		case registry.Refused:
			return fmt.Errorf("%s is private (%s): the pool's nodes could not pull it, and its jobs would stay Queued. "+
				"Make the package public once (https://github.com/orgs/%s/packages › %s › Package settings › Change visibility; it holds no secret), "+
				"or list ghcr.io in imageCache with a registryCredentials entry that can read it (a classic PAT with read:packages); then run this again (nothing changed)",
				*image, detail, cfg.GitHub.Org, versions.CUDARunnerRepository)
		case registry.Missing:
			return fmt.Errorf("%s is not published yet (%s): run the copy's cuda-runner-image workflow (gh workflow run cuda-runner-image.yml), wait for it, then run this again (nothing changed)", *image, detail)
		}
	}

	before, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	after, err := editPool(before, *pool, func(p *yaml.Node) { setMappingValue(p, "runnerImage", "!!str", *image) })
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := writeIfValid(path, after); err != nil {
		return fmt.Errorf("%s with pool %s on %s: %w", path, *pool, *image, err)
	}
	if *asJSON {
		return printJSON(struct {
			Stack string `json:"stack"`
			Pool  string `json:"pool"`
			Image string `json:"image"`
		}{name, *pool, *image})
	}
	fmt.Printf("%s: pool %s runs %s (%s)\n", path, *pool, *image, how)
	return nil
}

// cudaRunnerImage is the CUDA runner image an organization's copy publishes
// (.github/workflows/cuda-runner-image.yml), by the tag that follows each runner release.
func cudaRunnerImage(org string) string {
	return "ghcr.io/" + org + "/" + versions.CUDARunnerRepository + ":" + versions.CUDARunnerFollowTag
}
