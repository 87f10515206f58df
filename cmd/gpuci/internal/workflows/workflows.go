// Package workflows writes the GitHub Actions workflows a repository needs to run jobs on a
// stack — the GPU smoke test, and the retry workflow where the stack has a retry runner —
// named for that stack's scale sets, labels and image cache, so nothing in them is edited by
// hand. examples/workflows holds what it writes for dev (workflows_test.go keeps them equal).
package workflows

import (
	"bytes"
	"embed"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// The templates are the workflows themselves, with the stack's names left out: a reader
// sees the file a repository gets (the tests parse every output and actionlint checks dev's).
//
//go:embed cuda.yml.tmpl retry-interrupted.yml.tmpl
var templates embed.FS

var tmpl = template.Must(template.New("").Option("missingkey=error").ParseFS(templates, "*.tmpl"))

// Release is the gpuci release the retry workflow downloads: its tag, its linux/amd64
// binary's SHA-256 and where releases are published. Version and SHA256 are empty when the
// writer is not a released linux/amd64 gpuci (the workflow then says what to fill in).
type Release struct {
	Version, SHA256, URL string
}

// DefaultReleasesURL is where release.yml publishes gpuci.
const DefaultReleasesURL = versions.GpuciReleases

// File is one workflow file: its name under .github/workflows and its content.
type File struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

// job is one smoke job: one per configured pool (a retry twin is reached through its pool).
type job struct {
	ID, Pool, Form         string
	ScaleSet, TwinScaleSet string
	Labels, TwinLabels     string
	RunsOn                 string
	// TwinRunsOn is the expression that sends a re-run to the twin, where the stack's retrier
	// re-runs jobs and RunsOn stays one name.
	TwinRunsOn         string
	Image              string
	ImageCacheVariable bool
}

// SmokeJobImage is the image a container-form smoke job runs in (gpuci cost prices its pull).
const SmokeJobImage = "nvidia/cuda:12.8.1-devel-ubuntu24.04"

// ImageCacheVariable is the repository (or organization) variable a container job's image
// name is prefixed with when it holds the stack's docker.io cache address (stack output
// imageCache["docker.io"]); its value is per account and region, so not in a stack file.
const ImageCacheVariable = "LUX_GPU_CI_DOCKER_HUB_CACHE"

// For returns the workflows stack's repositories need: cuda.yml, and retry-interrupted.yml
// when the stack has a retry runner and no retrier of its own (config.Retrier).
func For(stack string, cfg *config.Config, rel Release) ([]File, error) {
	twins := map[string]config.GPUPool{}
	for _, p := range cfg.Pools() {
		if p.RetryTwinOf != "" {
			twins[p.RetryTwinOf] = p
		}
	}
	var jobs []job
	var scaleSets []string
	for _, p := range cfg.Pools() {
		scaleSets = append(scaleSets, p.RunnerScaleSetName)
		if p.RetryTwinOf != "" {
			continue
		}
		j := job{ID: p.Name, Pool: p.Name, Form: string(p.JobForm), ScaleSet: p.RunnerScaleSetName,
			Labels: strings.Join(p.RunnerLabels, ", "), RunsOn: p.RunnerScaleSetName}
		if twin, ok := twins[p.Name]; ok {
			j.TwinScaleSet, j.TwinLabels = twin.RunnerScaleSetName, strings.Join(twin.RunnerLabels, ", ")
			// GitHub gives a job no way to ask for other capacity on a re-run than its
			// attempt number: the twin is reached by this expression. With the stack's retrier
			// the job keeps one name, and the expression is offered in a comment.
			j.TwinRunsOn = fmt.Sprintf("${{ fromJSON(github.run_attempt) > 1 && '%s' || '%s' }}", j.TwinScaleSet, j.ScaleSet)
			if !cfg.Retrier.Enabled() {
				j.RunsOn = j.TwinRunsOn
			}
		}
		if p.JobForm == config.JobFormContainer {
			j.Image = SmokeJobImage
			if cfg.ImageCache.Caches(SmokeJobImage) {
				j.ImageCacheVariable = true
				j.Image = fmt.Sprintf("${{ vars.%[1]s && format('{0}/%[2]s', vars.%[1]s) || '%[2]s' }}", ImageCacheVariable, SmokeJobImage)
			}
		}
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("stack %s has no GPU pool (gpuPools)", stack)
	}
	files := []File{}
	add := func(name string, data any) error {
		var b bytes.Buffer
		if err := tmpl.ExecuteTemplate(&b, name+".tmpl", data); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
		files = append(files, File{Name: name, Content: b.String()})
		return nil
	}
	if err := add("cuda.yml", map[string]any{"Stack": stack, "Jobs": jobs, "Retrier": cfg.Retrier.Enabled()}); err != nil {
		return nil, err
	}
	// The stack's retrier re-runs every repository's interrupted jobs: no workflow for it.
	if rr := cfg.RetryRunner; rr.ScaleSetName != "" && !cfg.Retrier.Enabled() {
		slices.Sort(scaleSets)
		if rel.URL == "" {
			rel.URL = DefaultReleasesURL
		}
		if err := add("retry-interrupted.yml", map[string]any{"Stack": stack, "RetryScaleSet": rr.ScaleSetName,
			"RetryRunnerGroup": rr.RunnerGroup, "ScaleSets": strings.Join(scaleSets, ","),
			"PodNamespaces": strings.Join(config.RunnerPodNamespaces(cfg.Pools()), ","), "Release": rel}); err != nil {
			return nil, err
		}
	}
	return files, nil
}
