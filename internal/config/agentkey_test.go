package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// agentKeyConfig is a minimal valid v3 configuration with one published
// agent; key is its agents[0].key value (YAML flow mapping) or "".
func agentKeyConfig(key string) string {
	s := `
state_dir: /var/lib/hermesd
walrus: {publishers: ["http://127.0.0.1:1"], aggregators: ["http://127.0.0.1:1"]}
chain: {rpc: "http://127.0.0.1:8545", signer: {env: SIGNER}}
encryption: {key: {file: /etc/hermesd/snapshot.key}, format: v3}
agents:
  - id: auditor
    brain_dir: /srv/auditor
    ens_name: auditor.eth
`
	if key != "" {
		s += "    key: " + key + "\n"
	}
	return s
}

func TestAgentKeyLoads(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		want      AgentKey
		handover  bool
		describe  string
	}{
		{"none", "", AgentKey{}, false, "derived from encryption.key"},
		{"file", "{file: keys/auditor.key}", AgentKey{File: "KEYS/keys/auditor.key"}, false, "file KEYS/keys/auditor.key"},
		{"env", "{env: AUDITOR_KEY}", AgentKey{Env: "AUDITOR_KEY"}, false, "env $AUDITOR_KEY"},
		{"handover", "{handover: in/auditor.handover, identity: /etc/hermesd/buyer.key}",
			AgentKey{Handover: "KEYS/in/auditor.handover", Identity: "/etc/hermesd/buyer.key"}, true,
			"handover KEYS/in/auditor.handover (identity /etc/hermesd/buyer.key)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeConfig(t, agentKeyConfig(tc.key))
			dir := filepath.Dir(p)
			c, err := Load(p)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			for _, s := range []*string{&want.File, &want.Handover} {
				*s = strings.Replace(*s, "KEYS", dir, 1) // relative paths resolve against the file
			}
			got := c.Agents[0].Key
			if got != want {
				t.Fatalf("key = %+v, want %+v", got, want)
			}
			if got.IsZero() != (tc.key == "") || got.IsHandover() != tc.handover {
				t.Fatalf("IsZero %v IsHandover %v", got.IsZero(), got.IsHandover())
			}
			if s := got.String(); s != strings.Replace(tc.describe, "KEYS", dir, 1) {
				t.Fatalf("String() = %q", s)
			}
			if sec := got.Secret(); sec.File != want.File || sec.Env != want.Env || sec.Keystore != "" {
				t.Fatalf("Secret() = %+v", sec)
			}
		})
	}
}

func TestAgentKeyRefused(t *testing.T) {
	for _, tc := range []struct {
		name, config, field, msg string
	}{
		{"file and env", agentKeyConfig("{file: /k, env: K}"), "agents[0].key", "exactly one"},
		{"file and handover", agentKeyConfig("{file: /k, handover: /h, identity: /i}"), "agents[0].key", "exactly one"},
		{"identity alone", agentKeyConfig("{identity: /i}"), "agents[0].key", "only used with handover"},
		{"handover without identity", agentKeyConfig("{handover: /h}"), "agents[0].key.identity", "transfer request"},
		{"identity with file", agentKeyConfig("{file: /k, identity: /i}"), "agents[0].key.identity", "only used with handover"},
		{"same file", agentKeyConfig("{handover: /h, identity: /h}"), "agents[0].key.identity", "handover file itself"},
		{"bad env", agentKeyConfig("{env: 'A-B'}"), "agents[0].key.env", "not an environment variable"},
		{"format v2", strings.Replace(agentKeyConfig("{file: /k}"), "format: v3", "format: v2", 1), "agents[0].key", "format v3 only"},
		{"handover without name", strings.Replace(agentKeyConfig("{handover: /h, identity: /i}"), "    ens_name: auditor.eth\n", "", 1),
			"agents[0].key.handover", "needs its ens_name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, tc.config))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Load: %v, want a ValidationError", err)
			}
			for _, f := range ve.Fields {
				if f.Field == tc.field && strings.Contains(f.Msg, tc.msg) {
					return
				}
			}
			t.Fatalf("Load: %v, want %s: …%s…", err, tc.field, tc.msg)
		})
	}
	// Unknown keys inside key: are refused by the strict parse.
	_, err := Load(writeConfig(t, agentKeyConfig("{keystore: /ks.json}")))
	if err == nil || !strings.Contains(err.Error(), "keystore") {
		t.Fatalf("Load with key.keystore: %v", err)
	}
}
