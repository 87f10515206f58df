// Package fakegithubapp is a stand-in for the parts of GitHub that register a GitHub App from a
// manifest and install it, web and REST, with GitHub's rules for them (GitHub docs,
// "Registering a GitHub App from a manifest"; REST "Create a GitHub App from a manifest" and
// "Get an organization installation for the authenticated app"; "Generating a JSON Web Token
// (JWT) for a GitHub App"):
//   - the manifest arrives as the form parameter `manifest`, a JSON string whose `url` is
//     required, POSTed to /organizations/<org>/settings/apps/new; the `state` in that URL comes
//     back on the redirect to the manifest's redirect_url, with a code;
//   - a code converts once, within an hour, into the App's ID, slug, owner and private key;
//   - GET /orgs/<org>/installation answers only a JWT signed RS256 by the App's key whose iss
//     is the App's ID, issued in the past and expiring at most ten minutes from now (401
//     otherwise), and 404 until the App is installed on the organization;
//   - logins are case-insensitive: the App's owner is the organization's canonical login (the
//     stand-in's organizations are lower-case), however the URL spelled it.
//
// Pressing GitHub's own buttons is a test's: Create is the POST itself (the stand-in has no page
// in between), Install is Install.
package fakegithubapp

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// App is an App the stand-in registered.
type App struct {
	ID        int64
	Slug      string
	Org       string
	Manifest  map[string]any
	key       *rsa.PrivateKey
	installed int64 // its installation's ID on Org, 0 before Install
}

// GitHub is the stand-in. URL is its web server; its REST API is at URL+"/api/v3".
type GitHub struct {
	URL string

	mu     sync.Mutex
	srv    *httptest.Server
	apps   map[string]*App // by slug
	codes  map[string]code
	nextID int64
	// Now is the stand-in's clock (time.Now unless a test moves it).
	Now func() time.Time
}

type code struct {
	slug    string
	expires time.Time
}

// New starts the stand-in; Close stops it.
func New() *GitHub {
	g := &GitHub{apps: map[string]*App{}, codes: map[string]code{}, nextID: 1000, Now: time.Now}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /organizations/{org}/settings/apps/new", g.create)
	mux.HandleFunc("POST /api/v3/app-manifests/{code}/conversions", g.convert)
	mux.HandleFunc("GET /api/v3/orgs/{org}/installation", g.installation)
	g.srv = httptest.NewServer(mux)
	g.URL = g.srv.URL
	return g
}

func (g *GitHub) Close() { g.srv.Close() }

// Apps are the Apps registered so far.
func (g *GitHub) Apps() []App {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []App
	for _, a := range g.apps {
		out = append(out, *a)
	}
	return out
}

// Install is a person pressing Install on the App's page, for its organization.
func (g *GitHub) Install(slug string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	a, ok := g.apps[slug]
	if !ok {
		return fmt.Errorf("no App %s", slug)
	}
	a.installed = a.ID*10 + 1
	return nil
}

var manifestForm = regexp.MustCompile(`<form[^>]* method="post" action="([^"]+)">\s*<input type="hidden" name="manifest" value="([^"]+)">`)

// PressCreate is a person's browser on page, a page that submits a manifest: it submits the
// form (GitHub's Create GitHub App pressed), follows GitHub's redirect back to the page's
// server, and stops where that sends it, which it returns (the App's installation page).
func (g *GitHub) PressCreate(page string) (*http.Response, error) {
	browser := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), g.URL+"/apps/") {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := browser.Get(page)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	form := manifestForm.FindStringSubmatch(string(body))
	if form == nil {
		return nil, errors.New("the page has no manifest form:\n" + string(body))
	}
	resp, err = browser.PostForm(html.UnescapeString(form[1]), url.Values{"manifest": {html.UnescapeString(form[2])}})
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// create is GitHub's "Create GitHub App" for the manifest POSTed.
func (g *GitHub) create(w http.ResponseWriter, r *http.Request) {
	var m map[string]any
	if err := json.Unmarshal([]byte(r.PostFormValue("manifest")), &m); err != nil {
		http.Error(w, "manifest: not a JSON object", http.StatusUnprocessableEntity)
		return
	}
	home, _ := m["url"].(string)
	if home == "" {
		http.Error(w, "manifest: url is required", http.StatusUnprocessableEntity)
		return
	}
	if hook, ok := m["hook_attributes"].(map[string]any); ok {
		if u, _ := hook["url"].(string); u == "" {
			http.Error(w, "manifest: hook_attributes.url is required", http.StatusUnprocessableEntity)
			return
		}
	}
	redirect, _ := m["redirect_url"].(string)
	target, err := url.Parse(redirect)
	if redirect == "" || err != nil {
		http.Error(w, "manifest: no redirect_url to return to", http.StatusUnprocessableEntity)
		return
	}
	name, _ := m["name"].(string)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	g.mu.Lock()
	g.nextID++
	a := &App{ID: g.nextID, Slug: strings.ToLower(strings.ReplaceAll(name, " ", "-")), Org: strings.ToLower(r.PathValue("org")), Manifest: m, key: key}
	g.apps[a.Slug] = a
	c := randomHex()
	g.codes[c] = code{slug: a.Slug, expires: g.Now().Add(time.Hour)}
	g.mu.Unlock()
	q := target.Query()
	q.Set("code", c)
	if state := r.URL.Query().Get("state"); state != "" {
		q.Set("state", state)
	}
	target.RawQuery = q.Encode()
	http.Redirect(w, r, target.String(), http.StatusFound)
}

// convert is POST /app-manifests/{code}/conversions.
func (g *GitHub) convert(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	c, ok := g.codes[r.PathValue("code")]
	delete(g.codes, r.PathValue("code"))
	g.mu.Unlock()
	if !ok || g.Now().After(c.expires) {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	g.mu.Lock()
	a := g.apps[c.slug]
	g.mu.Unlock()
	key := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(a.key)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": a.ID, "slug": a.Slug, "name": a.Manifest["name"], "owner": map[string]any{"login": a.Org, "type": "Organization"},
		"pem": string(key), "client_id": "Iv1." + randomHex()[:16], "webhook_secret": nil,
	})
}

// installation is GET /orgs/{org}/installation, as the App.
func (g *GitHub) installation(w http.ResponseWriter, r *http.Request) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		http.Error(w, `{"message":"A JSON web token could not be decoded"}`, http.StatusUnauthorized)
		return
	}
	var claims jwt.RegisteredClaims
	var app *App
	_, err := jwt.ParseWithClaims(raw, &claims, func(t *jwt.Token) (any, error) {
		iss, err := t.Claims.GetIssuer()
		if err != nil {
			return nil, err
		}
		id, err := strconv.ParseInt(iss, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("iss %q is not an App ID", iss)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, a := range g.apps {
			if a.ID == id {
				app = a
				return &a.key.PublicKey, nil
			}
		}
		return nil, fmt.Errorf("no App %d", id)
	}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(g.Now), jwt.WithIssuedAt(), jwt.WithExpirationRequired())
	if err == nil && claims.ExpiresAt.After(g.Now().Add(10*time.Minute)) {
		err = fmt.Errorf("'Expiration time' claim ('exp') is too far in the future")
	}
	if err != nil {
		http.Error(w, `{"message":"`+err.Error()+`"}`, http.StatusUnauthorized)
		return
	}
	g.mu.Lock()
	installed, org := app.installed, app.Org
	g.mu.Unlock()
	if installed == 0 || !strings.EqualFold(org, r.PathValue("org")) {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": installed, "app_id": app.ID, "account": map[string]any{"login": org}})
}

func randomHex() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
