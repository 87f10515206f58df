package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/appmanifest"
)

// runGitHubApp makes the organization's GitHub App for ARC by GitHub's manifest flow: the
// person presses Create and Install in a browser; the App's ID, its installation's ID and the
// path of its key (written 0600, never printed) go to standard output as NAME=value lines,
// which make bootstrap reads.
func runGitHubApp(args []string) error {
	fs := flag.NewFlagSet("github-app", flag.ExitOnError)
	org := fs.String("org", "", "the organization the App belongs to and is installed on")
	name := fs.String("name", "", "the App's name (default lux-gpu-ci-<org>; GitHub's App names are unique)")
	keyOut := fs.String("key-out", "", "where to write the App's private key (PEM, mode 0600)")
	listen := fs.String("listen", "127.0.0.1:0", "the loopback address of the page that submits the manifest")
	timeout := fs.Duration("timeout", 30*time.Minute, "how long to wait for the two presses")
	asJSON := fs.Bool("json", false, "print JSON instead of NAME=value lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *org == "" || *keyOut == "" {
		return fmt.Errorf("--org and --key-out are required")
	}
	if *name == "" {
		// GitHub's App names are at most 34 characters, and unique on GitHub.
		*name = "lux-gpu-ci-" + *org
		if len(*name) > 34 {
			*name = (*name)[:34]
		}
	}
	// GitHub's web and API: github.com's, unless GITHUB_SERVER_URL and GITHUB_API_URL name
	// another (as in GitHub Actions; the tests' stand-in).
	server := os.Getenv("GITHUB_SERVER_URL")
	if server == "" {
		server = "https://github.com"
	}
	api, err := githubClient("")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	made := *keyOut + ".app" // the App's ID and slug, kept with its key from the moment GitHub hands it over
	flow := &appmanifest.Flow{Org: *org, Name: *name, ServerURL: server, API: api, Poll: 3 * time.Second,
		Say: func(s string) { fmt.Fprintln(os.Stderr, s) },
		Created: func(app *appmanifest.App) error {
			if err := os.MkdirAll(filepath.Dir(*keyOut), 0o700); err != nil {
				return err
			}
			if err := os.WriteFile(*keyOut, app.PrivateKey, 0o600); err != nil {
				return err
			}
			return os.WriteFile(made, fmt.Appendf(nil, "%d %s\n", app.ID, app.Slug), 0o600)
		}}
	var app *appmanifest.App
	if earlier, err := resumable(made, *keyOut); err != nil {
		return err
	} else if earlier != nil {
		// An earlier run made the App and kept its key, and was cut short before the
		// installation: it is installed (or waited for), not made a second time.
		fmt.Fprintf(os.Stderr, "GitHub App %s (ID %d) was made by an earlier run (%s)\n", earlier.Slug, earlier.ID, made)
		app, err = flow.Resume(ctx, earlier)
		if err != nil {
			return err
		}
	} else {
		l, err := net.Listen("tcp", *listen)
		if err != nil {
			return err
		}
		if app, err = flow.Run(ctx, l); err != nil {
			return err
		}
	}
	if *asJSON {
		return printJSON(struct {
			AppID          int64  `json:"appId"`
			Slug           string `json:"slug"`
			InstallationID int64  `json:"installationId"`
			PrivateKeyFile string `json:"privateKeyFile"`
		}{app.ID, app.Slug, app.InstallationID, *keyOut})
	}
	fmt.Printf("GITHUB_APP_ID=%d\nGITHUB_APP_INSTALLATION_ID=%d\nGITHUB_APP_PRIVATE_KEY_FILE=%s\n", app.ID, app.InstallationID, *keyOut)
	return nil
}

// resumable is the App an earlier run made and kept (its ID and slug in made, its key in
// keyFile), or nil when there is none.
func resumable(made, keyFile string) (*appmanifest.App, error) {
	b, err := os.ReadFile(made)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// A record without its key (or a damaged one) cannot be resumed: say how to start over.
	over := fmt.Sprintf("delete %s to make a new App (and delete the half-made one in the organization's settings › GitHub Apps)", made)
	app := &appmanifest.App{}
	if _, err := fmt.Sscanf(string(b), "%d %s", &app.ID, &app.Slug); err != nil {
		return nil, fmt.Errorf("%s cannot be read (%v): %s", made, err, over)
	}
	if app.PrivateKey, err = os.ReadFile(keyFile); err != nil {
		return nil, fmt.Errorf("the App %s made earlier has no key to resume with (%v): %s", made, err, over)
	}
	return app, nil
}
