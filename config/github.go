package config

import (
	"fmt"
	"regexp"
)

// GitHub is where runners register and how they authenticate: a personal access token or
// a GitHub App. Credentials are Secrets from the moment they are read (never printed) and
// Pulumi secrets in every resource that holds them.
type GitHub struct {
	Org string
	// ConfigURL is the org URL ARC registers runners with.
	ConfigURL string
	// Token is set for PAT auth (secret).
	Token *Secret
	// App is set for GitHub App auth.
	App *GitHubApp
}

// GitHubApp holds GitHub App credentials; the private key is a secret.
type GitHubApp struct {
	AppID, InstallationID string
	PrivateKey            Secret
}

var (
	githubOrgRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	appIDRE     = regexp.MustCompile(`^([0-9]+|Iv[0-9A-Za-z.]+)$`)
	numericRE   = regexp.MustCompile(`^[0-9]+$`)
)

func (p *parser) parseGitHub() GitHub {
	org, _ := p.raw(KeyGitHubOrg)
	g := GitHub{Org: org}
	switch {
	case g.Org == "":
		p.fail(KeyGitHubOrg, "is not set; runners need an organization to register with", "luxfi")
	case !githubOrgRE.MatchString(g.Org):
		p.fail(KeyGitHubOrg, fmt.Sprintf("%q is not a GitHub organization name", g.Org), "luxfi")
	}
	g.ConfigURL = "https://github.com/" + g.Org

	// Each credential key defaults to "" (see Defaults): empty is unset.
	token, hasToken := p.secret(KeyGitHubToken)
	appID, hasAppID := p.optional(KeyGitHubAppID)
	inst, hasInst := p.optional(KeyGitHubAppInstallationID)
	key, hasKey := p.secret(KeyGitHubAppPrivateKey)
	hasApp := hasAppID || hasInst || hasKey
	switch {
	case hasToken && hasApp:
		p.failHow(KeyGitHubToken, "and the GitHub App keys are both set; choose one way to authenticate", "pulumi config rm githubToken, or remove the githubApp* keys")
	case hasToken:
		g.Token = token
	case hasApp:
		if !hasAppID || !appIDRE.MatchString(appID) {
			p.fail(KeyGitHubAppID, "must be the GitHub App's numeric ID or client ID", "123456")
		}
		if !hasInst || !numericRE.MatchString(inst) {
			p.fail(KeyGitHubAppInstallationID, "must be the App installation's numeric ID", "12345678")
		}
		if !hasKey {
			p.fail(KeyGitHubAppPrivateKey, "is not set", "cat app.pem")
		}
		g.App = &GitHubApp{AppID: appID, InstallationID: inst}
		if key != nil {
			g.App.PrivateKey = *key
		}
	default:
		p.failHow(KeyGitHubToken, "is not set, and no GitHub App is configured; ARC cannot register runners", "printf %s \"$PAT\" | pulumi config set --secret githubToken (a PAT with admin:org), or set githubAppId, githubAppInstallationId and githubAppPrivateKey")
	}
	return g
}

// optional reads a string key whose default is "": it is set only if not empty.
func (p *parser) optional(key string) (string, bool) {
	v, ok := p.raw(key)
	return v, ok && v != ""
}

// secret reads a credential. It must be stored as a Pulumi secret: a plain-text credential
// in a stack file is an error, not a warning. The value never appears in a message.
func (p *parser) secret(key string) (*Secret, bool) {
	v, ok := p.raw(key)
	if !ok || v == "" {
		return nil, false
	}
	if p.isSecret != nil && !p.isSecret(qualify(key)) {
		p.fail(key, "is stored in plain text in the stack file", `printf %s "$VALUE"`)
	}
	return newSecret(v), true
}
