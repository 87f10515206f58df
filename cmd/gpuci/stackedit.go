package main

// Edits of a stack file that keep it as a person wrote it: its comments, order and secrets,
// through the YAML's node tree; and written only if the config accepts the result
// (gpuci grow, gpuci cuda-image).

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/luxfi/lux-gpu-ci/config"
)

// editPool is the stack file with edit applied to pool's entry in gpuPools, every other
// byte's meaning (comments, order, secrets) kept: it edits the YAML's node tree.
func editPool(file []byte, pool string, edit func(p *yaml.Node)) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(file, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 {
		return nil, errors.New("not a YAML document")
	}
	pools := mappingValue(mappingValue(doc.Content[0], "config"), config.Project+":"+config.KeyGPUPools)
	if pools == nil || pools.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("no %s:%s list", config.Project, config.KeyGPUPools)
	}
	for _, p := range pools.Content {
		if n := mappingValue(p, "name"); n == nil || n.Value != pool {
			continue
		}
		edit(p)
		var out bytes.Buffer
		enc := yaml.NewEncoder(&out)
		enc.SetIndent(2)
		if err := enc.Encode(&doc); err != nil {
			return nil, err
		}
		return out.Bytes(), nil
	}
	return nil, fmt.Errorf("no pool named %q in %s:%s", pool, config.Project, config.KeyGPUPools)
}

func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// setMappingValue sets key of the mapping m to the scalar value of YAML tag tag (!!int,
// !!str), adding the key at its end if m has none.
func setMappingValue(m *yaml.Node, key, tag, value string) {
	if v := mappingValue(m, key); v != nil {
		v.Kind, v.Tag, v.Value, v.Style = yaml.ScalarNode, tag, value, 0
		return
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value})
}

// writeIfValid writes after to the stack file at path if the config accepts it, and else
// changes nothing and says what the config refused.
func writeIfValid(path string, after []byte) error {
	tmp := filepath.Join(filepath.Dir(path), ".edit."+filepath.Base(path))
	if err := os.WriteFile(tmp, after, 0o644); err != nil {
		return err
	}
	defer os.Remove(tmp)
	if _, err := config.ParseStackFileOffline(tmp); err != nil {
		return fmt.Errorf("%w (nothing changed)", err)
	}
	return os.WriteFile(path, after, 0o644)
}
