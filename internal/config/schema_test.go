package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestErrorsNameThePlace: a configuration error names the YAML path and
// the line, says what is wrong in words (never a Go type), suggests the
// key that was meant, and is one line (never a literal \u000a, nor
// "field shutdown_timout not found in type config.Config").
func TestErrorsNameThePlace(t *testing.T) {
	agents := "agents:\n  - id: a\n    brain_dir: /srv/a\n  - id: b\n"
	for _, tc := range []struct{ name, body, want string }{
		{"misspelt top-level key", "state_dir: /s\nshutdown_timout: 10s\n", "shutdown_timout (line 2): unknown key; did you mean shutdown_timeout?"},
		{"misspelt key in a list", agents + "    brain_dri: /srv/b\n", "agents[1].brain_dri (line 5): unknown key; did you mean brain_dir?"},
		{"dashes and case", "Shutdown-Timeout: 3s\n", "Shutdown-Timeout (line 1): unknown key; did you mean shutdown_timeout?"},
		{"words swapped", "chain:\n  interval_check: 1m\n", "chain.interval_check (line 2): unknown key; did you mean check_interval?"},
		{"nothing near", "walrus:\n  colour: blue\n", "walrus.colour (line 2): unknown key (docs/configuration.md lists every key)"},
		{"a few keys here", "agents:\n  - id: a\n    key: {path: /k}\n", "agents[0].key.path (line 3): unknown key; the keys here are file, env, handover, identity"},
		{"repeated key", "walrus:\n  epochs: 3\n  epochs: 4\n", "walrus.epochs (line 3): repeated key (first at line 2)"},
		{"string for a number", agents + "    epochs: many\n", "agents[1].epochs (line 5): want an integer, not a string"},
		{"negative unsigned", "chain: {gas_limit: -1}\n", "chain.gas_limit (line 1): want an unsigned integer, not a negative one"},
		{"scalar for a mapping", "log: debug\n", "log (line 1): want a mapping (level, format), not a string"},
		{"mapping for a list", "agents: {id: a}\n", "agents (line 1): want a list, not a mapping"},
		{"string for a boolean", "walrus: {share: yes}\n", "walrus.share (line 1): want true or false, not a string"},
		{"bad duration", "defaults:\n  quiet: soon\n", `defaults.quiet (line 2): "soon" is not a duration`},
		{"unset variable", "state_dir: /s\nagents:\n  - id: a\n    brain_dir: ${NOPE}\n", "agents[0].brain_dir (line 4): environment variable NOPE is not set"},
		{"two problems", "walrus: {epochs: x, publishers: y}\n", "walrus.epochs (line 1): want an integer, not a string; walrus.publishers (line 1): want a list, not a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.body), os.LookupEnv)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not say %q", msg, tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not match ErrInvalid", msg)
			}
			for _, bad := range []string{"\n", "config.", "uint64", "[]string", "not found in type", "cannot unmarshal"} {
				if strings.Contains(msg, bad) {
					t.Errorf("error %q holds %q", msg, bad)
				}
			}
		})
	}
	// Many problems: the first few, and how many more.
	body := strings.Repeat("nope: 1\n", 1) + "a1: 1\na2: 2\na3: 3\na4: 4\n"
	if _, err := Parse(strings.NewReader(body), os.LookupEnv); err == nil || !strings.HasSuffix(err.Error(), "; and 2 more") {
		t.Errorf("five unknown keys: %v", err)
	}
}

func TestNearestKey(t *testing.T) {
	for key, want := range map[string]string{
		"state_dri": "state_dir", "statedir": "state_dir", "STATE_DIR": "state_dir", "agent": "agents",
		"shutdown": "", "x": "", "allow_symlink": "allow_symlinks", "log": "log",
	} {
		if got := nearestKey(key, typeOfConfig); got != want {
			t.Errorf("nearestKey(%q) = %q, want %q", key, got, want)
		}
	}
}
