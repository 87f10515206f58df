package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// SecretPlaceholder stands in for a secure value that cannot be decrypted offline.
const SecretPlaceholder = "[secret]"

// ReadStackFile reads a Pulumi.<stack>.yaml into the form the Pulumi CLI hands a program:
// fully qualified keys, scalars as strings, lists and objects as JSON. Secure values cannot
// be decrypted without the stack's secrets provider: they come back as SecretPlaceholder and
// are listed in secretKeys.
func ReadStackFile(path string) (cfg map[string]string, secretKeys []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var file struct {
		Config map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg = map[string]string{}
	for k, v := range file.Config {
		if !strings.Contains(k, ":") {
			k = qualify(k)
		}
		switch v := v.(type) {
		case string:
			cfg[k] = v
		case map[string]any:
			if _, secure := v["secure"]; secure && len(v) == 1 {
				cfg[k] = SecretPlaceholder
				secretKeys = append(secretKeys, k)
				continue
			}
			cfg[k], err = jsonString(v)
		case []any:
			cfg[k], err = jsonString(v)
		default:
			cfg[k] = fmt.Sprint(v)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %w", path, k, err)
		}
	}
	sort.Strings(secretKeys)
	return cfg, secretKeys, nil
}

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// ReadStackFileOffline is ReadStackFile for tools that run the program without the stack's
// secrets provider (make render, gpuci cost): when the file holds no GitHub credential —
// they are usually set per environment with --secret — a placeholder token stands in.
func ReadStackFileOffline(path string) (cfg map[string]string, secretKeys []string, err error) {
	cfg, secretKeys, err = ReadStackFile(path)
	if err != nil {
		return nil, nil, err
	}
	if v, ok := cfg[qualify(KeyRegistryCredentials)]; !ok || v == SecretPlaceholder {
		if placeholders := registryCredentialPlaceholders(cfg[qualify(KeyImageCache)]); placeholders != "" {
			cfg[qualify(KeyRegistryCredentials)] = placeholders
			if !ok {
				secretKeys = append(secretKeys, qualify(KeyRegistryCredentials))
			}
		}
	}
	for _, k := range []string{KeyGitHubToken, KeyGitHubAppID, KeyGitHubAppPrivateKey} {
		if _, ok := cfg[qualify(k)]; ok {
			return cfg, secretKeys, nil
		}
	}
	cfg[qualify(KeyGitHubToken)] = SecretPlaceholder
	return cfg, append(secretKeys, qualify(KeyGitHubToken)), nil
}

// registryCredentialPlaceholders stands a placeholder credential in for each cached registry
// that needs one (imageCache is the key's raw JSON): registryCredentials is set with --secret.
func registryCredentialPlaceholders(imageCache string) string {
	var hosts []string
	if json.Unmarshal([]byte(imageCache), &hosts) != nil {
		return ""
	}
	creds := map[string]RegistryCredential{}
	for _, h := range hosts {
		if u, ok := UpstreamFor(h); ok && u.NeedsCredential {
			creds[h] = RegistryCredential{Username: SecretPlaceholder, AccessToken: SecretPlaceholder}
		}
	}
	if len(creds) == 0 {
		return ""
	}
	b, _ := json.Marshal(creds)
	return string(b)
}

// StackFile is the path of a stack's Pulumi.<stack>.yaml in the project directory dir.
func StackFile(dir, stack string) string {
	return filepath.Join(dir, "Pulumi."+stack+".yaml")
}

// StackOf is the stack a Pulumi.<stack>.yaml belongs to (the inverse of StackFile).
func StackOf(path string) string {
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "Pulumi."), filepath.Ext(path))
}

// ParseStackFileOffline reads and validates a stack file as ReadStackFileOffline does.
func ParseStackFileOffline(path string) (*Config, error) {
	cfg, _, err := ReadStackFileOffline(path)
	if err != nil {
		return nil, err
	}
	return Parse(StackOf(path), func(key string) (string, bool) {
		v, ok := cfg[key]
		return v, ok
	}, nil)
}
