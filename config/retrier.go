package config

import (
	"fmt"
	"regexp"
	"time"
)

// Retrier is the in-cluster retrier (k8s.Retrier): a small Deployment of the stack's own that
// re-runs, once, the jobs a spot interruption ended, in every repository of the organization,
// with nothing in any repository. It runs the stack's gpuci (its own build, or a release:
// Config.Gpuci) with a GitHub token of its own; the zero value is none.
type Retrier struct {
	// GitHubToken may re-run jobs: a fine-grained token of the organization with Actions
	// read and write on its repositories. Not ARC's credential: the
	// runners' namespace, where ARC's lives, must not hold one that re-runs jobs.
	GitHubToken *Secret
	// SpotCoolDown is how long, after it re-runs a job a spot interruption ended, the job's
	// pool launches on-demand nodes (nodepools.CoolDownNodePoolFor): Karpenter itself avoids an
	// interrupted offering for three minutes only, and a spot shortage outlasts that. Zero
	// for never.
	SpotCoolDown time.Duration
}

// maxSpotCoolDown bounds a cool-down to a working day: on-demand costs about three times
// spot, and a shortage that lasts longer is a pool that wants on-demand in its capacityTypes.
const maxSpotCoolDown = 8 * time.Hour

// Enabled reports whether the stack runs the in-cluster retrier.
func (r Retrier) Enabled() bool { return r.GitHubToken != nil }

var (
	releaseTagRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)
	sha256RE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Gpuci is a gpuci release for the stack's own pods to run (the in-cluster retrier, each
// compiler cache's gate) instead of the stack's own build of its source (stack.BuildGpuci).
// Its keys keep the retrier's names (retrierGpuciVersion, retrierGpuciSha256), the first pod
// to run it. The zero value is none: the stack builds its own.
type Gpuci struct{ Version, SHA256 string }

// Pinned reports whether the stack names a gpuci release.
func (g Gpuci) Pinned() bool { return g.Version != "" }

// parseGpuci: both keys or neither; a release tag and its binary's SHA-256.
func (p *parser) parseGpuci() Gpuci {
	g := Gpuci{Version: p.str(KeyRetrierGpuciVersion), SHA256: p.str(KeyRetrierGpuciSHA256)}
	if g.Version == "" && g.SHA256 == "" {
		return g
	}
	if !releaseTagRE.MatchString(g.Version) {
		p.fail(KeyRetrierGpuciVersion, fmt.Sprintf("%q is not a gpuci release tag: the stack's pods run a released gpuci", g.Version), "v0.4.0")
	}
	if !sha256RE.MatchString(g.SHA256) {
		p.failHow(KeyRetrierGpuciSHA256, fmt.Sprintf("%q is not a SHA-256 (64 lower-case hex digits)", g.SHA256),
			"set it to the release's gpuci_linux_amd64 SHA-256, which its release notes print")
	}
	return g
}

func (p *parser) parseRetrier() Retrier {
	var r Retrier
	token, hasToken := p.secret(KeyRetrierGitHubToken)
	if !hasToken {
		return r
	}
	r.GitHubToken = token
	cool := p.str(KeyRetrierSpotCoolDown)
	d, err := time.ParseDuration(cool)
	switch {
	case err != nil:
		p.fail(KeyRetrierSpotCoolDown, fmt.Sprintf("%q is not a duration", cool), "30m")
	case d < 0 || d > maxSpotCoolDown:
		p.fail(KeyRetrierSpotCoolDown, fmt.Sprintf("%s is outside 0s..8h: re-runs go on-demand this long after an interruption; 0s never", cool), "30m")
	}
	r.SpotCoolDown = d
	return r
}
