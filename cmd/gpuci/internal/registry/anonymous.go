// Package registry asks an image's registry what a node without credentials would get: the
// nodes of a pool pull with none (no imagePullSecrets), unless the stack's image cache
// serves the image's registry.
package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/distribution/reference"
)

// Answer is what the registry said to an anonymous pull of an image's manifest.
type Answer int

const (
	// Pullable: the registry serves the manifest without credentials.
	Pullable Answer = iota
	// Refused: the registry wants credentials (401 or 403, at its token endpoint or at the
	// manifest): a private package.
	Refused
	// Missing: the repository has no such tag (404 at the manifest).
	Missing
)

// manifestTypes are the manifest media types a node's runtime accepts, as containerd asks
// for them (an OCI index or Docker manifest list first: the runner images are multi-arch).
var manifestTypes = []string{
	"application/vnd.oci.image.index.v1+json",
	"application/vnd.docker.distribution.manifest.list.v2+json",
	"application/vnd.oci.image.manifest.v1+json",
	"application/vnd.docker.distribution.manifest.v2+json",
}

// AnonymousPull asks image's registry for its manifest as a client without credentials
// does: a HEAD of /v2/<name>/manifests/<tag or digest>; on a 401, the token the challenge's
// realm gives anonymously for pull, then the HEAD again (token authentication as the
// distribution project specifies it, v2.8.3 docs/spec/auth/token.md; containerd v1.7.30's
// resolver does the same, remotes/docker/authorizer.go). GitHub's container registry
// answers a private package's anonymous token request 401 (a public report:
// TencentCloud/CubeSandbox#86, an image its maintainers had left private) and a member
// without access 403 at the manifest (Vigil-SOC/vigil#315).
func AnonymousPull(ctx context.Context, client *http.Client, image string) (Answer, string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return 0, "", fmt.Errorf("image %q: %w", image, err)
	}
	named = reference.TagNameOnly(named)
	ref := ""
	switch r := named.(type) {
	case reference.Digested:
		ref = r.Digest().String()
	case reference.Tagged:
		ref = r.Tag()
	}
	host := reference.Domain(named)
	if host == "docker.io" {
		host = "registry-1.docker.io" // Docker Hub's registry API
	}
	manifest := fmt.Sprintf("https://%s/v2/%s/manifests/%s", host, reference.Path(named), ref)

	head := func(token string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, manifest, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", strings.Join(manifestTypes, ", "))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		return resp, nil
	}
	resp, err := head("")
	if err != nil {
		return 0, "", err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		realm, params, ok := bearerChallenge(resp.Header.Get("WWW-Authenticate"))
		if !ok {
			return Refused, "HEAD " + manifest + ": " + resp.Status + ", and no bearer challenge", nil
		}
		token, status, err := anonymousToken(ctx, client, realm, params, reference.Path(named))
		if err != nil {
			return 0, "", err
		}
		if token == "" {
			return Refused, "GET " + realm + " (an anonymous pull token): " + status, nil
		}
		if resp, err = head(token); err != nil {
			return 0, "", err
		}
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return Pullable, "HEAD " + manifest + ": " + resp.Status, nil
	case resp.StatusCode == http.StatusNotFound:
		return Missing, "HEAD " + manifest + ": " + resp.Status, nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return Refused, "HEAD " + manifest + ": " + resp.Status, nil
	}
	return 0, "", fmt.Errorf("HEAD %s: %s", manifest, resp.Status)
}

// bearerChallenge reads a WWW-Authenticate: Bearer realm="…",service="…",scope="…" header.
func bearerChallenge(h string) (realm string, params map[string]string, ok bool) {
	rest, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return "", nil, false
	}
	params = map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		k, v, found := strings.Cut(strings.TrimSpace(kv), "=")
		if found {
			params[k] = strings.Trim(v, `"`)
		}
	}
	realm = params["realm"]
	delete(params, "realm")
	return realm, params, realm != ""
}

// anonymousToken asks realm for a pull token of repository without credentials: the token,
// or "" and the status it answered.
func anonymousToken(ctx context.Context, client *http.Client, realm string, params map[string]string, repository string) (string, string, error) {
	u, err := url.Parse(realm)
	if err != nil {
		return "", "", fmt.Errorf("token realm %q: %w", realm, err)
	}
	q := u.Query()
	if s := params["service"]; s != "" {
		q.Set("service", s)
	}
	q.Set("scope", "repository:"+repository+":pull")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", resp.Status, nil
	}
	var body struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", "", fmt.Errorf("GET %s: %w", realm, err)
	}
	if body.Token == "" {
		body.Token = body.AccessToken
	}
	if body.Token == "" {
		return "", resp.Status + " without a token", nil
	}
	return body.Token, resp.Status, nil
}
