package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/luxfi/lux-gpu-ci/config"
)

// runImages prints the images a pool's nodes run a job from, fully qualified and named as the
// pool's pods name them (through the stack's image cache where it caches their registry): the
// list an image snapshot must hold (docs/operations.md, "Images from a snapshot"), comma
// separated as snapshot.sh takes it.
func runImages(args []string) error {
	fs := flag.NewFlagSet("images", flag.ExitOnError)
	st := addStackFlags(fs, "stack whose pool to list")
	pool := fs.String("pool", "", "the pool (gpuPools name)")
	jobImages := fs.String("job-image", "", "comma-separated images the pool's jobs run in (container: jobs)")
	cacheJSON := fs.String("cache", "", `the stack's imageCache output as JSON (default: pulumi stack output imageCache --json; "{}" for none)`)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stack, cfg, err := st.load()
	if err != nil {
		return err
	}
	var p *config.GPUPool
	var names []string
	pools := cfg.Pools()
	for i := range pools {
		names = append(names, pools[i].Name)
		if pools[i].Name == *pool {
			p = &pools[i]
		}
	}
	if p == nil {
		return fmt.Errorf("--pool %q is not one of stack %s's pools %v", *pool, stack, names)
	}
	raw := []byte(*cacheJSON)
	if *cacheJSON == "" {
		if raw, err = stackOutput(stack, "imageCache"); err != nil {
			return fmt.Errorf("%w: pass --cache '{}' for a stack without the cache, or its output", err)
		}
	}
	var cache config.CacheAddresses
	if err := json.Unmarshal(raw, &cache); err != nil {
		return fmt.Errorf("the image cache addresses are not a JSON object of registry → address: %w", err)
	}
	images := []string{cache.Qualified(p.RunnerImage)}
	for _, img := range strings.Split(*jobImages, ",") {
		if img = strings.TrimSpace(img); img != "" {
			images = append(images, cache.Qualified(img))
		}
	}
	if *asJSON {
		return printJSON(images)
	}
	fmt.Println(strings.Join(images, ","))
	return nil
}
