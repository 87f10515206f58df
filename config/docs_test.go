package config_test

// The operator's page describes the config the program reads, with the defaults it applies:
// docs/operations.md's two tables (stack keys, pool fields) against config.Defaults,
// config.Required and config.DefaultPool — so the page and the code cannot drift apart.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// docTable returns the rows of the markdown table that follows heading in docs/operations.md,
// keyed by each `name` in the row's first cell, valued by its second cell.
func docTable(t *testing.T, heading string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "docs", "operations.md"))
	require.NoError(t, err)
	text := string(b)
	at := strings.Index(text, heading)
	require.GreaterOrEqual(t, at, 0, "docs/operations.md has %q", heading)
	rows := map[string]string{}
	inTable := false
	for _, line := range strings.Split(text[at:], "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[1], -1) {
			rows[m[1]] = strings.TrimSpace(cells[2])
		}
	}
	require.NotEmpty(t, rows, "a table follows %q", heading)
	return rows
}

// Every key the program reads is in the Configuration table, and the table names no other.
func TestOperationsPageNamesEveryKey(t *testing.T) {
	rows := docTable(t, "## Configuration")
	want := map[string]bool{config.KeyRegion: true, config.KeyAWSProfile: true, config.KeyAssumeRole: true}
	for k := range config.Defaults {
		want[k] = true
	}
	for _, k := range config.Required {
		want[k] = true
	}
	for k := range want {
		assert.Contains(t, rows, k, "docs/operations.md's Configuration table describes %s", k)
	}
	for k := range rows {
		assert.True(t, want[k], "docs/operations.md describes %s, which the program does not read", k)
	}
}

// Every pool field is in the pools table, with the default DefaultPool really has.
func TestOperationsPageGivesEachPoolFieldsDefault(t *testing.T) {
	rows := docTable(t, "## GPU pools and `runs-on`")
	def := reflect.ValueOf(config.DefaultPool())
	typ := def.Type()
	checked := 0
	for i := 0; i < typ.NumField(); i++ {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		cell, ok := rows[name]
		if !assert.True(t, ok, "docs/operations.md's pools table describes %s", name) {
			continue
		}
		// The default as the page writes it: a scalar as itself, a list as [a, b]; the page
		// may add words after it. A list cell may give several fields' defaults (a / b).
		if f := def.Field(i); f.Kind() == reflect.Pointer && f.IsNil() {
			continue // unset by default: "none", and the page says what absence means
		}
		v := def.Field(i).Interface()
		var shown string
		switch f := def.Field(i); {
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			var items []string
			for j := 0; j < f.Len(); j++ {
				items = append(items, f.Index(j).String())
			}
			shown = "[" + strings.Join(items, ", ") + "]"
		case f.Type() == reflect.TypeFor[string]() || f.Type() == reflect.TypeFor[config.JobForm]():
			if f.String() == "" {
				continue // "none": the page says what absence means
			}
			shown = f.String()
		case f.Type() == reflect.TypeFor[config.Duration]():
			shown = v.(config.Duration).String()
		default:
			x := v
			b, err := json.Marshal(x)
			require.NoError(t, err)
			shown = string(b)
		}
		assert.Contains(t, cell, "`"+shown+"`", "the default of %s is %s", name, shown)
		checked++
	}
	assert.GreaterOrEqual(t, checked, 12, "most fields have a default the page states")
}
