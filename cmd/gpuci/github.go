package main

import (
	"os"

	"github.com/google/go-github/v93/github"
)

// githubClient is a GitHub REST client with token (none: unauthenticated), at GITHUB_API_URL
// when it names another server than github.com's (GitHub Enterprise Server; the tests'
// stand-ins).
func githubClient(token string) (*github.Client, error) {
	var opts []github.ClientOptionsFunc
	if token != "" {
		opts = append(opts, github.WithAuthToken(token))
	}
	if api := os.Getenv("GITHUB_API_URL"); api != "" && api != "https://api.github.com" {
		opts = append(opts, github.WithEnterpriseURLs(api, api))
	}
	return github.NewClient(opts...)
}
