// Package fakeghcr is a stand-in for GitHub's container registry as a client without
// credentials meets it (a node pulling with no imagePullSecrets): every manifest request
// without a token is challenged to the token endpoint (token authentication as the
// distribution project specifies it, v2.8.3 docs/spec/auth/token.md); the token endpoint
// gives an anonymous pull token for a public package and answers 401 for a private one (a
// public report:
// TencentCloud/CubeSandbox#86, a package its maintainers had left private); with the token,
// a tag that exists is 200 and one that does not 404.
package fakeghcr

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
)

// New serves public's packages (repository → its tags) to anyone; every other repository
// is private. Its certificate is httptest's (valid for 127.0.0.1): clients trust it with
// the server's Client, or a process with SSL_CERT_FILE naming its PEM.
func New(public map[string][]string) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			repo := strings.TrimSuffix(strings.TrimPrefix(r.URL.Query().Get("scope"), "repository:"), ":pull")
			if _, ok := public[repo]; !ok || r.URL.Query().Get("service") != "ghcr.io" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(`{"token":"anonymous-` + repo + `"}`))
			return
		}
		name, tag, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v2/"), "/manifests/")
		if !ok || (r.Method != http.MethodHead && r.Method != http.MethodGet) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if r.Header.Get("Authorization") != "Bearer anonymous-"+name {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+srv.URL+`/token",service="ghcr.io",scope="repository:`+name+`:pull"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if !slices.Contains(public[name], tag) {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	return srv
}
