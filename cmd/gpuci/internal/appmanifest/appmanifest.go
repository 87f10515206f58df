// Package appmanifest makes the GitHub App ARC registers runners with, by GitHub's manifest
// flow: a person presses "Create GitHub App" and "Install" in a browser, and nothing is copied
// by hand (GitHub docs, "Registering a GitHub App from a manifest"):
//
//  1. a form POSTs the manifest (a JSON string in the parameter `manifest`, with a `state` in
//     the URL) to <server>/organizations/<org>/settings/apps/new; the person names the App
//     there and creates it;
//  2. GitHub redirects to the manifest's redirect_url with a temporary `code` and the `state`;
//  3. POST /app-manifests/<code>/conversions (no authentication; within an hour) returns the
//     App's ID, slug and private key.
//
// Then the person installs the App on the organization (<server>/apps/<slug>/installations/new),
// and the installation's ID is GitHub's answer to GET /orgs/<org>/installation, authenticated as
// the App with a JWT signed by its key (GitHub docs, "Generating a JSON Web Token (JWT) for a
// GitHub App": RS256, iat, exp at most ten minutes on, iss the App's ID).
package appmanifest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-github/v93/github"
)

// Permissions are what ARC needs of an App for organization runners, and nothing else:
// self-hosted runners read and write, metadata read (ARC's docs, "Authenticating to the GitHub
// API"; docs/operations.md, "GitHub credentials").
var Permissions = map[string]string{"organization_self_hosted_runners": "write", "metadata": "read"}

// Manifest is the App's manifest: private to the organization, no webhook.
type Manifest struct {
	Name               string            `json:"name"`
	URL                string            `json:"url"`
	HookAttributes     HookAttributes    `json:"hook_attributes"`
	RedirectURL        string            `json:"redirect_url"`
	Public             bool              `json:"public"`
	DefaultPermissions map[string]string `json:"default_permissions"`
}

// HookAttributes is the manifest's webhook: off (ARC's listener long-polls; no event is sent).
type HookAttributes struct {
	URL    string `json:"url"`
	Active bool   `json:"active"`
}

// NewManifest is the manifest of an App named name, whose homepage is ARC's, that returns to
// redirect once created.
func NewManifest(name, redirect string) Manifest {
	home := "https://github.com/actions/actions-runner-controller"
	return Manifest{Name: name, URL: home, HookAttributes: HookAttributes{URL: home, Active: false},
		RedirectURL: redirect, Public: false, DefaultPermissions: Permissions}
}

// App is what the flow ends with.
type App struct {
	ID             int64
	Slug           string
	InstallationID int64
	PrivateKey     []byte // PEM
}

// Flow runs the manifest flow for Org against GitHub's web (ServerURL) and REST API (API).
type Flow struct {
	Org       string
	Name      string
	ServerURL string         // https://github.com
	API       *github.Client // unauthenticated; the App's own requests add its JWT
	// Poll is how often GitHub is asked whether the App is installed yet.
	Poll time.Duration
	// Say tells the person what to do next (the URL to open, the button to press).
	Say func(string)
	// Created keeps the App as soon as GitHub hands over its key, which it does once: before
	// anything else can fail (the owner's check, the wait for Install), so that a run cut short
	// leaves an App that the next run can Resume, not one whose key is lost.
	Created func(*App) error
}

// Run serves the page that submits the manifest on l (a loopback address), waits for GitHub's
// redirect, converts its code, sends the browser to the App's installation page and waits for
// the installation. It ends with ctx.
func (f *Flow) Run(ctx context.Context, l net.Listener) (*App, error) {
	state, err := randomState()
	if err != nil {
		return nil, err
	}
	base := "http://" + l.Addr().String()
	manifest, err := json.Marshal(NewManifest(f.Name, base+"/created"))
	if err != nil {
		return nil, err
	}
	create := fmt.Sprintf("%s/organizations/%s/settings/apps/new?state=%s", f.ServerURL, url.PathEscape(f.Org), state)
	created := make(chan *App, 1)
	failed := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = submitPage.Execute(w, struct{ Action, Manifest, Org string }{create, string(manifest), f.Org})
	})
	mux.HandleFunc("GET /created", func(w http.ResponseWriter, r *http.Request) {
		// The state ties the redirect to this run's manifest: another page's code is refused.
		if r.URL.Query().Get("state") != state {
			http.Error(w, "state does not match this run's: not converted", http.StatusBadRequest)
			return
		}
		cfg, _, err := f.API.Apps.CompleteAppManifest(r.Context(), r.URL.Query().Get("code"))
		if err != nil {
			http.Error(w, "GitHub refused the code: "+err.Error(), http.StatusBadGateway)
			failed <- fmt.Errorf("converting the manifest's code: %w", err)
			return
		}
		app := &App{ID: cfg.GetID(), Slug: cfg.GetSlug(), PrivateKey: []byte(cfg.GetPEM())}
		if err := f.Created(app); err != nil {
			http.Error(w, "keeping the App's key: "+err.Error(), http.StatusInternalServerError)
			failed <- fmt.Errorf("keeping GitHub App %s's key: %w", app.Slug, err)
			return
		}
		// GitHub's logins are case-insensitive; the conversion returns the canonical one.
		if !strings.EqualFold(cfg.GetOwner().GetLogin(), f.Org) {
			http.Error(w, "the App is not the organization's", http.StatusBadRequest)
			failed <- fmt.Errorf("the App %s is owned by %q, not %s", cfg.GetSlug(), cfg.GetOwner().GetLogin(), f.Org)
			return
		}
		created <- app
		http.Redirect(w, r, f.installPage(app), http.StatusFound)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	f.Say(fmt.Sprintf("Open %s/ in a browser signed in to GitHub as an owner of %s, and press Create GitHub App", base, f.Org))

	var app *App
	select {
	case app = <-created:
	case err := <-failed:
		return nil, err
	case <-ctx.Done():
		return nil, fmt.Errorf("no GitHub App was created: %w", ctx.Err())
	}
	return f.wait(ctx, app, false) // the redirect said where to press Install
}

// installPage is where the App is installed, and what the person is told to press there.
func (f *Flow) installPage(app *App) string {
	install := fmt.Sprintf("%s/apps/%s/installations/new", f.ServerURL, url.PathEscape(app.Slug))
	f.Say(fmt.Sprintf("GitHub App %s (ID %d). Install it on %s: press Install on %s", app.Slug, app.ID, f.Org, install))
	return install
}

// Resume waits for an App made earlier (its ID and key kept by Created) to be installed on
// the organization, saying where to press Install when it is not yet.
func (f *Flow) Resume(ctx context.Context, app *App) (*App, error) { return f.wait(ctx, app, true) }

func (f *Flow) wait(ctx context.Context, app *App, sayWhere bool) (*App, error) {
	for {
		id, err := f.installation(ctx, app)
		if err == nil {
			app.InstallationID = id
			return app, nil
		}
		if !errors.Is(err, errNotInstalled) {
			return nil, err
		}
		if sayWhere {
			f.installPage(app)
			sayWhere = false
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("GitHub App %s (ID %d) is not installed on %s yet: %w", app.Slug, app.ID, f.Org, ctx.Err())
		case <-time.After(f.Poll):
		}
	}
}

var errNotInstalled = errors.New("not installed")

// installation asks GitHub, as the App, for its installation on the organization.
func (f *Flow) installation(ctx context.Context, app *App) (int64, error) {
	token, err := JWT(app.ID, app.PrivateKey, time.Now())
	if err != nil {
		return 0, err
	}
	asApp, err := f.API.Clone(github.WithAuthToken(token))
	if err != nil {
		return 0, err
	}
	inst, resp, err := asApp.Apps.GetOrganizationInstallation(ctx, f.Org)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return 0, errNotInstalled
	}
	if err != nil {
		return 0, fmt.Errorf("asking GitHub for the App's installation on %s: %w", f.Org, err)
	}
	return inst.GetID(), nil
}

// JWT is the App's token for GitHub's App endpoints: RS256, issued a minute back (GitHub's
// allowance for clock drift), valid nine minutes (GitHub refuses more than ten).
func JWT(appID int64, pemKey []byte, now time.Time) (string, error) {
	key, err := jwt.ParseRSAPrivateKeyFromPEM(pemKey)
	if err != nil {
		return "", fmt.Errorf("the App's private key: %w", err)
	}
	return jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(9 * time.Minute)),
		Issuer:    strconv.FormatInt(appID, 10),
	}).SignedString(key)
}

func randomState() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// submitPage POSTs the manifest to GitHub: the button, or at once where scripts run.
var submitPage = template.Must(template.New("submit").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>lux-gpu-ci: a GitHub App for {{.Org}}</title></head>
<body>
<form id="create" method="post" action="{{.Action}}">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<p>lux-gpu-ci registers its runners with a GitHub App of {{.Org}}: self-hosted runners (read and write) and metadata (read), nothing else, no webhook.</p>
<button type="submit">Continue to GitHub</button>
</form>
<script>document.getElementById("create").submit()</script>
</body></html>
`))
