package main

import (
	"os"
	"time"

	"github.com/google/go-github/v93/github"
)

// githubRequestTimeout bounds each request to GitHub: the library's default client has none
// (go-github v93 github.go, WithTimeout: "If not set ... no timeout will be used"), and the
// retrier runs unattended.
const githubRequestTimeout = 2 * time.Minute

// githubClient is a GitHub REST client with token (none: unauthenticated), at GITHUB_API_URL
// when it names another server than github.com's (GitHub Enterprise Server; the tests'
// stand-ins).
func githubClient(token string) (*github.Client, error) {
	opts := []github.ClientOptionsFunc{github.WithTimeout(githubRequestTimeout)}
	if token != "" {
		opts = append(opts, github.WithAuthToken(token))
	}
	if api := os.Getenv("GITHUB_API_URL"); api != "" && api != "https://api.github.com" {
		opts = append(opts, github.WithEnterpriseURLs(api, api))
	}
	return github.NewClient(opts...)
}
