package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/luxfi/lux-gpu-ci/pricing"
	"os"
	"time"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/cost"
)

func runCost(args []string) error {
	fs := flag.NewFlagSet("cost", flag.ExitOnError)
	st := addStackFlags(fs, "stack whose Pulumi.<stack>.yaml to price")
	prices := fs.String("prices", "", "JSON price table overriding the built-in one (see pricing.Prices)")
	asJSON := fs.Bool("json", false, "print JSON")
	live := fs.Bool("live", false, "fetch current on-demand and spot prices from AWS (needs credentials)")
	u := cost.Usage{}
	fs.Float64Var(&u.BuildsPerDay, "builds-per-day", 30, "GPU builds per day")
	fs.Float64Var(&u.MinutesPerBuild, "minutes", 10, "minutes per build")
	fs.Float64Var(&u.BootMinutes, "boot-minutes", -1, "minutes from a queued job to its first step on a cold node (default: each pool's cold-start estimate)")
	fs.Float64Var(&u.JobImageGB, "image-gb", -1, fmt.Sprintf("GB (as pulled) of a container-form job's image (default: the smoke workflow's %s, %.0f GB)", cost.SmokeJobImage, cost.SmokeJobImageGB))
	fs.Float64Var(&u.ColdStarts, "cold-starts", 1, "share of builds that start a new node (0–1)")
	fs.Float64Var(&u.InterruptionRate, "interruption-rate", cost.DefaultInterruptionRate, "share of builds a spot interruption re-runs on a pool's on-demand twin (0–1)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	_, cfg, err := st.load()
	if err != nil {
		return err
	}
	p := pricing.Default()
	if *prices != "" {
		if p, err = pricing.Load(*prices); err != nil {
			return err
		}
	}
	if *live {
		progress := newProgress()
		progress.step("fetching on-demand prices (AWS Pricing API) and spot prices (EC2) for %s", cfg.Region)
		defer progress.step("prices fetched")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		src, err := cost.NewAWSPrices(ctx)
		if err != nil {
			return err
		}
		onDemand := []string{cfg.SystemNodes.InstanceType}
		var spot []string
		for _, pool := range cfg.Pools() {
			onDemand = append(onDemand, pool.InstanceTypes...)
			spot = append(spot, pool.InstanceTypes...)
		}
		if p, err = cost.LivePrices(ctx, p, src, cfg.Region, onDemand, spot); err != nil {
			return err
		}
	}
	r, err := cost.Estimate(cfg, p, u)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(r)
	}
	return r.WriteTable(os.Stdout)
}
