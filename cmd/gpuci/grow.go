package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"

	"gopkg.in/yaml.v3"
)

// runGrow sets how many GPUs a pool may run at once (gpuLimit, and maxRunners with it: a
// runner takes one GPU) in Pulumi.<stack>.yaml, keeping the file's comments and order, and
// refuses a result the config refuses. make grow then asks AWS for the quota and runs the up.
func runGrow(args []string) error {
	fs := flag.NewFlagSet("grow", flag.ExitOnError)
	st := addStackFlags(fs, "stack whose pool grows")
	pool := fs.String("pool", "", "the pool to grow (its name)")
	gpus := fs.Int("gpus", 0, "the GPUs it may run at once: its gpuLimit and maxRunners")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pool == "" || *gpus < 1 {
		return errors.New("--pool and --gpus (at least 1) are required")
	}
	name, path, err := st.resolve()
	if err != nil {
		return err
	}
	before, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	after, err := setPoolGPUs(before, *pool, *gpus)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := writeIfValid(path, after); err != nil {
		return fmt.Errorf("%s with pool %s at %d GPUs: %w", path, *pool, *gpus, err)
	}
	if *asJSON {
		return printJSON(struct {
			Stack string `json:"stack"`
			Pool  string `json:"pool"`
			GPUs  int    `json:"gpus"`
		}{name, *pool, *gpus})
	}
	fmt.Printf("%s: pool %s runs up to %d GPUs (gpuLimit, maxRunners)\n", path, *pool, *gpus)
	return nil
}

// setPoolGPUs is the stack file with pool's gpuLimit and maxRunners set to gpus, every other
// byte's meaning (comments, order, secrets) kept: it edits the YAML's node tree.
func setPoolGPUs(file []byte, pool string, gpus int) ([]byte, error) {
	return editPool(file, pool, func(p *yaml.Node) {
		for _, key := range []string{"gpuLimit", "maxRunners"} {
			setMappingValue(p, key, "!!int", strconv.Itoa(gpus))
		}
	})
}
