package appmanifest_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-github/v93/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/appmanifest"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakegithubapp"
)

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func newFlow(t *testing.T, gh *fakegithubapp.GitHub, said chan<- string) (*appmanifest.Flow, net.Listener) {
	return newFlowKeeping(t, gh, said, func(*appmanifest.App) error { return nil })
}

func newFlowKeeping(t *testing.T, gh *fakegithubapp.GitHub, said chan<- string, keep func(*appmanifest.App) error) (*appmanifest.Flow, net.Listener) {
	t.Helper()
	api, err := github.NewClient(github.WithEnterpriseURLs(gh.URL+"/api/v3/", gh.URL+"/api/v3/"))
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return &appmanifest.Flow{Org: "newcomer-org", Name: "lux-gpu-ci-newcomer-org", ServerURL: gh.URL, API: api,
		Poll: 10 * time.Millisecond, Say: func(s string) { said <- s }, Created: keep}, l
}

var openURL = regexp.MustCompile(`^Open (http://127\.0\.0\.1:\d+/) in a browser`)

// Two presses make the App: Create, then Install. What the flow ends with is the App GitHub
// made from exactly ARC's permissions, its key, and its installation on the organization.
func TestTwoPressesMakeTheOrganizationsApp(t *testing.T) {
	t.Parallel()
	gh := fakegithubapp.New()
	defer gh.Close()
	said := make(chan string, 4)
	kept := make(chan *appmanifest.App, 1)
	flow, l := newFlowKeeping(t, gh, said, func(a *appmanifest.App) error { kept <- a; return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		app *appmanifest.App
		err error
	}
	done := make(chan result, 1)
	go func() { app, err := flow.Run(ctx, l); done <- result{app, err} }()

	page := openURL.FindStringSubmatch(<-said)
	require.NotNil(t, page)
	resp, err := gh.PressCreate(page[1])
	require.NoError(t, err)
	require.Equal(t, http.StatusFound, resp.StatusCode, "sent on to the installation page")
	apps := gh.Apps()
	require.Len(t, apps, 1)
	assert.Equal(t, gh.URL+"/apps/"+apps[0].Slug+"/installations/new", resp.Header.Get("Location"))
	assert.Contains(t, <-said, "press Install on "+gh.URL+"/apps/lux-gpu-ci-newcomer-org/installations/new")
	// What GitHub was asked to make: ARC's two permissions, no webhook, private.
	m := apps[0].Manifest
	assert.Equal(t, map[string]any{"organization_self_hosted_runners": "write", "metadata": "read"}, m["default_permissions"])
	assert.Equal(t, map[string]any{"url": "https://github.com/actions/actions-runner-controller", "active": false}, m["hook_attributes"])
	assert.Equal(t, false, m["public"])
	assert.Equal(t, "newcomer-org", apps[0].Org)

	// Its key was kept the moment GitHub handed it over, before the installation.
	select {
	case a := <-kept:
		assert.Equal(t, apps[0].ID, a.ID)
		assert.Contains(t, string(a.PrivateKey), "PRIVATE KEY")
	default:
		t.Fatal("the App's key was not kept before the installation")
	}
	// Not installed yet: the flow waits for the press.
	select {
	case r := <-done:
		t.Fatalf("the flow ended before the App was installed: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, gh.Install(apps[0].Slug))
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, apps[0].ID, r.app.ID)
	assert.Equal(t, apps[0].ID*10+1, r.app.InstallationID, "the installation GitHub answered the App's JWT with")
	_, err = jwt.ParseRSAPrivateKeyFromPEM(r.app.PrivateKey)
	require.NoError(t, err, "the App's own key")
}

// A redirect that is not this run's (another page's state) converts nothing: its code is left
// unspent and the flow goes on waiting.
func TestARedirectOfAnotherStateIsRefused(t *testing.T) {
	t.Parallel()
	gh := fakegithubapp.New()
	defer gh.Close()
	said := make(chan string, 4)
	flow, l := newFlow(t, gh, said)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := flow.Run(ctx, l); done <- err }()
	page := openURL.FindStringSubmatch(<-said)
	require.NotNil(t, page)
	resp, err := http.Get(page[1] + "created?code=planted&state=" + strings.Repeat("0", 32))
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, readAll(t, resp))
	assert.Empty(t, gh.Apps())
	err = <-done
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Contains(t, err.Error(), "no GitHub App was created")
}

// A run cut short after GitHub made the App resumes from what it kept: no second App, the
// person told where to press Install, and the installation found.
func TestAnAppMadeEarlierIsInstalledNotMadeAgain(t *testing.T) {
	t.Parallel()
	gh := fakegithubapp.New()
	defer gh.Close()
	said := make(chan string, 4)
	kept := make(chan *appmanifest.App, 1)
	flow, l := newFlowKeeping(t, gh, said, func(a *appmanifest.App) error { kept <- a; return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := flow.Run(ctx, l); done <- err }()
	page := openURL.FindStringSubmatch(<-said)
	require.NotNil(t, page)
	_, err := gh.PressCreate(page[1])
	require.NoError(t, err)
	<-said
	cancel() // Ctrl-C before Install
	require.Error(t, <-done)
	earlier := <-kept

	again, _ := newFlow(t, gh, said)
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resumed := make(chan *appmanifest.App, 1)
	go func() {
		app, err := again.Resume(ctx, &appmanifest.App{ID: earlier.ID, Slug: earlier.Slug, PrivateKey: earlier.PrivateKey})
		assert.NoError(t, err)
		resumed <- app
	}()
	assert.Contains(t, <-said, "press Install on "+gh.URL+"/apps/"+earlier.Slug+"/installations/new")
	require.NoError(t, gh.Install(earlier.Slug))
	app := <-resumed
	require.NotNil(t, app)
	assert.Equal(t, earlier.ID*10+1, app.InstallationID)
	assert.Len(t, gh.Apps(), 1, "one App")
}
