package fleettest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hermesd/hermesd/internal/config"
)

// ClusterSection is a node configuration's cluster section as the fleet
// is configured (docs/fleet.md):
//
//	cluster:
//	  endpoints: [URL, …]
//	  fleet: NAME
//	  node: NAME
//	  lease_ttl: 10s
//	  handoff_timeout: 1m
//	  tls: {ca_file, cert_file, key_file}
//	  username: NAME
//	  password: {file: PATH} | {env: NAME}
//	  hooks: {on_acquire: [ARGV…], on_release: [ARGV…], timeout: 30s}
type ClusterSection struct {
	Endpoints      []string          `yaml:"endpoints"`
	Fleet          string            `yaml:"fleet"`
	Node           string            `yaml:"node"`
	LeaseTTL       string            `yaml:"lease_ttl"`
	HandoffTimeout string            `yaml:"handoff_timeout"`
	TLS            map[string]string `yaml:"tls"`
	Username       string            `yaml:"username"`
	Password       map[string]string `yaml:"password"`
	Hooks          struct {
		OnAcquire []string `yaml:"on_acquire"`
		OnRelease []string `yaml:"on_release"`
		Timeout   string   `yaml:"timeout"`
	} `yaml:"hooks"`
}

// SchemaHasCluster reports whether the configuration schema has the
// cluster section (the fleet core's), so that a node configuration loads
// whole.
func SchemaHasCluster() bool {
	for f := range reflect.TypeFor[config.Config]().Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == "cluster" {
			return true
		}
	}
	return false
}

// LoadNodeConfig loads a fleet node's configuration file and returns it
// with its cluster section, which it checks against the fleet's schema
// strictly (an unknown key fails). While the schema has no cluster
// section, the rest of the file is loaded and validated without it.
func LoadNodeConfig(t testing.TB, path string) (*config.Config, ClusterSection) {
	t.Helper()
	c, cs, err := loadNodeConfig(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c, cs
}

func loadNodeConfig(path, scratch string) (*config.Config, ClusterSection, error) {
	var cs ClusterSection
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, cs, err
	}
	section, rest, err := splitCluster(raw)
	if err != nil {
		return nil, cs, fmt.Errorf("%s: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(section))
	dec.KnownFields(true)
	if err := dec.Decode(&cs); err != nil {
		return nil, cs, fmt.Errorf("%s: cluster: %w", path, err)
	}
	// node may be left out: hermesd names the node after its host.
	if len(cs.Endpoints) == 0 || cs.Fleet == "" {
		return nil, cs, fmt.Errorf("%s: cluster: endpoints and fleet are required", path)
	}
	for _, d := range []string{cs.LeaseTTL, cs.HandoffTimeout, cs.Hooks.Timeout} {
		if _, err := time.ParseDuration(d); d != "" && err != nil {
			return nil, cs, fmt.Errorf("%s: cluster: %w", path, err)
		}
	}
	load := path
	if !SchemaHasCluster() {
		load = filepath.Join(scratch, filepath.Base(path))
		if err := os.WriteFile(load, rest, 0o600); err != nil {
			return nil, cs, err
		}
	}
	c, err := config.Load(load)
	if err != nil {
		return nil, cs, err
	}
	return c, cs, nil
}

// splitCluster returns the body of the top-level cluster section (as its
// own YAML document) and the file without it.
func splitCluster(raw []byte) (section, rest []byte, err error) {
	lines := strings.SplitAfter(string(raw), "\n")
	var sec, out strings.Builder
	in, found := false, false
	for _, l := range lines {
		top := len(l) > 0 && l[0] != ' ' && l[0] != '\t' && l[0] != '#' && strings.TrimSpace(l) != ""
		switch {
		case top && strings.HasPrefix(l, "cluster:"):
			if found {
				return nil, nil, fmt.Errorf("two cluster sections")
			}
			in, found = true, true
			if v := strings.TrimSpace(strings.TrimPrefix(l, "cluster:")); v != "" {
				sec.WriteString(v + "\n") // a flow mapping on one line
				in = false
			}
		case top:
			in = false
			out.WriteString(l)
		case in:
			sec.WriteString(strings.TrimPrefix(l, "  "))
		default:
			out.WriteString(l)
		}
	}
	if !found {
		return nil, nil, fmt.Errorf("no cluster section")
	}
	return []byte(sec.String()), []byte(out.String()), nil
}
