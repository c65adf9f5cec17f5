package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// configKeys lists every key of the configuration file as its YAML path
// (`walrus.batch_window`, `agents[].key`), from the Config type itself:
// what checkSchema accepts. A secret ({file}, {env}, ...) and an agent's
// key are one key each, as the file writes them.
func configKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := yamlName(f)
		if name == "" {
			continue
		}
		path := prefix + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			keys = append(keys, configKeys(ft.Elem(), path+"[].")...)
			continue
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[SecretRef]() && ft != reflect.TypeFor[AgentKey]() &&
			!reflect.PointerTo(ft).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
			keys = append(keys, configKeys(ft, path+".")...)
			continue
		}
		keys = append(keys, path)
	}
	return keys
}

// documentedKeys reads the key column of the table in
// docs/configuration.md: each cell names one key in full and may add
// sibling keys by their last part (`walrus.retry_max`, `retry_wait_min`).
func documentedKeys(doc string) []string {
	code := regexp.MustCompile("`([a-z0-9_.\\[\\]]+)`")
	var keys []string
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line, "|", 3)[1]
		parent := ""
		for i, m := range code.FindAllStringSubmatch(cell, -1) {
			k := m[1]
			if i == 0 {
				if j := strings.LastIndexByte(k, '.'); j >= 0 {
					parent = k[:j+1]
				}
			} else if !strings.Contains(k, ".") {
				k = parent + k
			}
			keys = append(keys, k)
		}
	}
	return keys
}

// TestEveryKeyDocumented: docs/configuration.md lists every key the
// configuration takes, and no key it does not (an unknown key's error
// sends the reader there).
func TestEveryKeyDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := documentedKeys(string(b))
	keys := configKeys(reflect.TypeFor[Config](), "")
	if len(keys) < 100 {
		t.Fatalf("found only %d keys in Config: %v", len(keys), keys)
	}
	for _, k := range keys {
		if !slices.Contains(documented, k) {
			t.Errorf("docs/configuration.md does not list %s", k)
		}
	}
	for _, k := range documented {
		if !slices.Contains(keys, k) {
			t.Errorf("docs/configuration.md lists %s, which is no key of the configuration", k)
		}
	}
}
