package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/distribution/reference"
)

// ImageCache is the stack's ECR pull-through cache: each upstream registry listed in
// imageCache gets a cache rule, so nodes pull its images from ECR in the stack's own region
// (layers served from S3, through the VPC's free S3 gateway endpoint) instead of over the
// internet through the NAT gateway. ECR fetches an image from the upstream once, on the first
// pull of each tag, and re-checks a tag at most once every 24 hours.
type ImageCache struct {
	Upstreams []CachedUpstream
	// Repositories are the account's own ECR repositories nodes may pull from beside the
	// cache's (imageRepositories): names, or a prefix ending in "*", in the stack's region.
	// Every other private repository of the account is denied to the nodes' roles, so a
	// `container:` job cannot name one.
	Repositories []string
}

// CachedUpstream is one upstream registry behind a cache rule.
type CachedUpstream struct {
	Registry Upstream
	// RepositoryPrefix is the ECR repository prefix of the rule: unique per stack, so two
	// stacks in one account and region keep rules of their own.
	RepositoryPrefix string
	// Credential is the Secrets Manager secret's value ({"username", "accessToken"}); nil
	// for a registry that needs none.
	Credential *Secret
}

// Upstream is a registry ECR's pull-through cache supports.
type Upstream struct {
	// Host is how images name the registry (docker.io for "nvidia/cuda:12.8.1-…").
	Host string
	// URL is the upstreamRegistryUrl ECR's rule takes.
	URL string
	// Short names the rule's repository prefix.
	Short string
	// NeedsCredential: ECR refuses a rule for this registry without a Secrets Manager secret.
	NeedsCredential bool
}

// Upstreams are the registries ECR's pull-through cache supports that images here come from,
// as the ECR user guide's "Supported upstream registries" lists them (pull-through-cache.html;
// Docker Hub's URL is registry-1.docker.io). NVIDIA's nvcr.io is not one of them.
var Upstreams = []Upstream{
	{Host: "docker.io", URL: "registry-1.docker.io", Short: "docker-hub", NeedsCredential: true},
	{Host: "ghcr.io", URL: "ghcr.io", Short: "ghcr", NeedsCredential: true},
	{Host: "registry.gitlab.com", URL: "registry.gitlab.com", Short: "gitlab", NeedsCredential: true},
	{Host: "public.ecr.aws", URL: "public.ecr.aws", Short: "ecr-public"},
	{Host: "quay.io", URL: "quay.io", Short: "quay"},
	{Host: "registry.k8s.io", URL: "registry.k8s.io", Short: "k8s"},
}

// UpstreamFor looks a registry up by host.
func UpstreamFor(host string) (Upstream, bool) {
	i := slices.IndexFunc(Upstreams, func(u Upstream) bool { return u.Host == host })
	if i < 0 {
		return Upstream{}, false
	}
	return Upstreams[i], true
}

func upstreamHosts() string {
	var hosts []string
	for _, u := range Upstreams {
		hosts = append(hosts, u.Host)
	}
	return strings.Join(hosts, ", ")
}

// ImageRegistry splits an image reference into its registry's host and the rest, normalized
// as Docker does ("nvidia/cuda:12" is docker.io and nvidia/cuda:12, "ubuntu" is docker.io and
// library/ubuntu): the host names a cache rule, the rest the image under its prefix.
func ImageRegistry(image string) (host, rest string, ok bool) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", "", false
	}
	host = reference.Domain(named)
	return host, strings.TrimPrefix(named.String(), host+"/"), true
}

// Caches tells whether nodes pull image through the stack's cache: its registry has a rule,
// and it is named by tag (Digested).
func (c ImageCache) Caches(image string) bool {
	host, _, ok := ImageRegistry(image)
	return ok && !Digested(image) && slices.ContainsFunc(c.Upstreams, func(u CachedUpstream) bool { return u.Registry.Host == host })
}

// Digested tells whether image is pinned by digest (with or without a tag). ECR's
// pull-through cache fills a repository only when an image is pulled by tag: the first pull of
// a digest it has not cached fails as not found (aws/containers-roadmap#2837), and a
// reference with both tag and digest is pulled by its digest alone (containerd resolves it
// with distribution/reference.ParseDockerRef, which drops the tag). So a digest-pinned image
// is pulled from its own registry, never through the cache.
func Digested(image string) bool {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return false
	}
	_, ok := named.(reference.Digested)
	return ok
}

// maxRepositoryPrefix is ECR's limit on a pull-through cache rule's repository prefix.
const maxRepositoryPrefix = 30

// RepositoryPrefix is a rule's ECR repository prefix for a cluster: "<cluster>/<short>", with
// the cluster's name shortened (and a hash of it kept) where the whole would pass ECR's 30
// characters. ECR's prefixes are per account and region, so two stacks must not share one.
func RepositoryPrefix(cluster, short string) string {
	if p := cluster + "/" + short; len(p) <= maxRepositoryPrefix {
		return p
	}
	sum := sha256.Sum256([]byte(cluster))
	hash := hex.EncodeToString(sum[:])[:6]
	keep := maxRepositoryPrefix - len(short) - 1 - len(hash) - 1
	return strings.TrimRight(cluster[:keep], "-") + "-" + hash + "/" + short
}

// RegistryCredential is what ECR expects in a pull-through cache rule's secret.
type RegistryCredential struct {
	Username    string `json:"username"`
	AccessToken string `json:"accessToken"`
}

const registryCredentialsFix = `pulumi config set --secret registryCredentials < registry-credentials.json, a file holding {"docker.io": {"username": "<user>", "accessToken": "<token>"}, "ghcr.io": {"username": "<user>", "accessToken": "<PAT with read:packages>"}}`

// parseImageCache reads imageCache (the upstream hosts) and registryCredentials (a secret:
// a JSON object of host → {username, accessToken}). No message contains a credential.
func (p *parser) parseImageCache(cluster string) ImageCache {
	var hosts []string
	p.object(KeyImageCache, &hosts)
	var creds map[string]RegistryCredential
	if raw, ok := p.raw(KeyRegistryCredentials); ok && raw != "" {
		if p.isSecret != nil && !p.isSecret(qualify(KeyRegistryCredentials)) {
			p.failHow(KeyRegistryCredentials, "is stored in plain text in the stack file", registryCredentialsFix)
		} else if err := json.Unmarshal([]byte(raw), &creds); err != nil {
			// The error would quote the value: say only what is wrong with its shape.
			p.failHow(KeyRegistryCredentials, "is not a JSON object of registry host → {username, accessToken}", registryCredentialsFix)
		}
	}
	var c ImageCache
	for _, host := range hosts {
		u, ok := UpstreamFor(host)
		switch {
		case !ok:
			p.fail(KeyImageCache, fmt.Sprintf("%q is not a registry ECR's pull-through cache supports (%s)", host, upstreamHosts()), `["ghcr.io", "docker.io"]`)
			continue
		case slices.ContainsFunc(c.Upstreams, func(x CachedUpstream) bool { return x.Registry.Host == host }):
			p.fail(KeyImageCache, fmt.Sprintf("%q is listed twice", host), `["ghcr.io", "docker.io"]`)
			continue
		}
		up := CachedUpstream{Registry: u, RepositoryPrefix: RepositoryPrefix(cluster, u.Short)}
		cred, has := creds[host]
		switch {
		case has && (cred.Username == "" || cred.AccessToken == ""):
			p.failHow(KeyRegistryCredentials, fmt.Sprintf("%s: needs both username and accessToken", host), registryCredentialsFix)
		case has:
			b, _ := json.Marshal(cred)
			up.Credential = newSecret(string(b))
		case u.NeedsCredential:
			p.failHow(KeyRegistryCredentials, fmt.Sprintf("has no entry for %s, whose cache rule ECR only accepts with a credential (Docker Hub: a user and an access token; ghcr.io: a user and a PAT with read:packages)", host), registryCredentialsFix)
		}
		c.Upstreams = append(c.Upstreams, up)
	}
	for _, host := range slices.Sorted(maps.Keys(creds)) {
		if !slices.Contains(hosts, host) {
			p.failHow(KeyRegistryCredentials, fmt.Sprintf("has an entry for %s, which imageCache does not list", host), "add "+host+" to imageCache in Pulumi.<stack>.yaml, or drop its entry")
		}
	}
	p.object(KeyImageRepositories, &c.Repositories)
	for _, r := range c.Repositories {
		switch {
		case r == "*":
			p.fail(KeyImageRepositories, `"*" would let the nodes pull every repository of the account, which is what the list is there to prevent: name the repositories or their prefixes`, `["team-a/cuda-base", "team-b/*"]`)
		case !repositoryPatternRE.MatchString(r):
			p.fail(KeyImageRepositories, fmt.Sprintf("%q is not an ECR repository name, or a name prefix ending in *", r), `["team-a/cuda-base", "team-b/*"]`)
		}
	}
	return c
}

// repositoryPatternRE is ECR's repository name pattern (lower-case components separated by
// '/', each with single '.', '_' or '-' inside), optionally cut short by a final '*'.
var repositoryPatternRE = regexp.MustCompile(`^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/?\*)?$`)

// ecrHostRE is a private ECR registry's host: the account, then the region
// (<account>.dkr.ecr[-fips].<region>.amazonaws.com[.cn]).
var ecrHostRE = regexp.MustCompile(`^([0-9]{12})\.dkr\.ecr(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$`)

// DeniedOwnImages are the images the stack's nodes are set to pull (each pool's runnerImage
// and warm images) that sit in the account's own ECR where the nodes' roles may not pull
// (infra.ImagePullScope): in another region, or in a repository that neither Repositories
// nor a cache rule's prefix covers. A pattern is IAM's: a final '*' matches the rest of the
// name, '/' included.
func (c ImageCache) DeniedOwnImages(account, region string, pools []GPUPool) []string {
	allowed := slices.Clone(c.Repositories)
	for _, u := range c.Upstreams {
		allowed = append(allowed, u.RepositoryPrefix+"/*")
	}
	covered := func(repo string) bool {
		return slices.ContainsFunc(allowed, func(p string) bool {
			prefix, wild := strings.CutSuffix(p, "*")
			return repo == p || wild && strings.HasPrefix(repo, prefix)
		})
	}
	var denied []string
	for _, pool := range pools {
		images := []string{pool.RunnerImage}
		if pool.Warm != nil {
			images = append(images, pool.Warm.Images...)
		}
		for _, image := range images {
			named, err := reference.ParseNormalizedNamed(image)
			if err != nil {
				continue
			}
			m := ecrHostRE.FindStringSubmatch(reference.Domain(named))
			if m == nil || m[1] != account {
				continue
			}
			if m[2] != region || !covered(reference.Path(named)) {
				denied = append(denied, image)
			}
		}
	}
	slices.Sort(denied)
	return slices.Compact(denied)
}

// CacheAddresses maps an upstream registry's host (docker.io, ghcr.io, …) to the ECR
// pull-through cache repository serving its images ("<account>.dkr.ecr.<region>.amazonaws.com/<prefix>"),
// as the stack exports them (output imageCache).
type CacheAddresses map[string]string

// Pull is the reference a node pulls for image: through the cache where its registry has a
// rule and it is named by tag, else image itself (a digest-pinned image from its own registry:
// Digested). Names are normalized as Docker does ("nvidia/cuda:12" is
// docker.io/nvidia/cuda:12, "ubuntu" is docker.io/library/ubuntu), which is also the path
// ECR's Docker Hub rule expects.
func (c CacheAddresses) Pull(image string) string {
	host, rest, ok := ImageRegistry(image)
	if cache, cached := c[host]; ok && cached && !Digested(image) {
		return cache + "/" + rest
	}
	return image
}

// Qualified is Pull with the registry and the tag always spelled out, as containerd's ctr
// needs them (it adds neither docker.io/ nor :latest, as the kubelet does): "ubuntu" is
// docker.io/library/ubuntu:latest.
func (c CacheAddresses) Qualified(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return image
	}
	full := reference.TagNameOnly(named).String()
	if pulled := c.Pull(full); pulled != full {
		return pulled
	}
	return full
}
