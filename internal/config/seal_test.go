package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testPkg = "0x00000000000000000000000000000000000000000000000000000000000000aa"

// testPK is a well-formed 96-byte public key in hex (validation checks the
// form only; compose checks the point).
func testPK(digit string) string { return "a0" + strings.Repeat(digit, 190) }

func sealConfig() *Config {
	c := Default()
	c.StateDir = "/var/lib/hermesd"
	c.Walrus.Publishers = []string{"http://127.0.0.1:1"}
	c.Walrus.Aggregators = []string{"http://127.0.0.1:1"}
	c.Encryption.Format = "seal"
	c.Seal.PackageID = testPkg
	c.Seal.SuiKey = SecretRef{File: "/etc/hermesd/keys/sui.key"}
	for i := range 3 {
		c.Seal.KeyServers = append(c.Seal.KeyServers, SealKeyServer{
			ObjectID:  "0x" + strings.Repeat(string(rune('1'+i)), 64),
			URL:       "http://127.0.0.1:" + string(rune('1'+i)) + "024",
			PublicKey: testPK("0"),
		})
	}
	c.Agents = []Agent{{ID: "a", BrainDir: "/srv/a"}}
	return c
}

func TestLoadSeal(t *testing.T) {
	pk := testPK("1")
	p := writeConfig(t, `
state_dir: state
walrus:
  publishers: ["http://127.0.0.1:31415"]
  aggregators: ["http://127.0.0.1:31415"]
encryption:
  format: seal
seal:
  package_id: "`+testPkg+`"
  threshold: 2
  key_servers:
    - {object_id: "0x`+strings.Repeat("1", 64)+`", url: "https://ks1.example.com", public_key: "`+pk+`"}
    - object_id: "0x`+strings.Repeat("2", 64)+`"
      url: https://ks2.example.com
      public_key: "0x`+pk+`"
      weight: 2
      api_key: {file: keys/ks2.key}
      api_key_header: X-API-Key
  sui_key: {file: keys/sui.key}
  session_ttl: 5m
  max_size: 8MiB
agents:
  - {id: a, brain_dir: brains/a}
`)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(p)
	s := c.Seal
	if !c.SealEnabled() || s.Policy != SealPolicyAccountBased || s.Threshold != 2 || len(s.KeyServers) != 2 {
		t.Fatalf("seal = %+v", s)
	}
	if s.KeyServers[1].Weight != 2 || s.KeyServers[1].APIKey.File != filepath.Join(dir, "keys/ks2.key") {
		t.Errorf("second key server = %+v", s.KeyServers[1])
	}
	if s.SuiKey.File != filepath.Join(dir, "keys/sui.key") {
		t.Errorf("sui_key = %+v, want resolved against the file's directory", s.SuiKey)
	}
	if s.SessionTTL.D() != 5*time.Minute || s.MaxSize != 8<<20 || s.RequestTimeout.D() != 10*time.Second {
		t.Errorf("session_ttl %s, max_size %d, request_timeout %s", s.SessionTTL, s.MaxSize, s.RequestTimeout)
	}
}

func TestSealOffByDefault(t *testing.T) {
	c := Default()
	if c.SealEnabled() {
		t.Fatal("the default configuration uses Seal")
	}
	// Without a seal section, the seal defaults are never validated.
	c.Seal.Threshold = 0
	v := &validator{}
	c.validateSeal(v)
	if len(v.errs) != 0 {
		t.Fatalf("validateSeal without a seal section: %v", v.errs)
	}
}

func TestValidateSeal(t *testing.T) {
	if err := sealConfig().Validate(); err != nil {
		t.Fatalf("base seal config invalid: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(c *Config)
		field  string
	}{
		{"format seal without section", func(c *Config) { c.Seal = defaultSeal() }, "seal"},
		{"no package", func(c *Config) { c.Seal.PackageID = "" }, "seal.package_id"},
		{"short package", func(c *Config) { c.Seal.PackageID = "0x2" }, "seal.package_id"},
		{"unknown policy", func(c *Config) { c.Seal.Policy = "anyone" }, "seal.policy"},
		{"allowlist without object", func(c *Config) { c.Seal.Policy = SealPolicyAllowlist }, "seal.allowlist.object_id"},
		{"allowlist without version", func(c *Config) {
			c.Seal.Policy = SealPolicyAllowlist
			c.Seal.Allowlist.ObjectID = testPkg
		}, "seal.allowlist.initial_shared_version"},
		{"allowlist object with account_based", func(c *Config) { c.Seal.Allowlist.ObjectID = testPkg }, "seal.allowlist"},
		{"bad allowlist id", func(c *Config) { c.Seal.Allowlist.ID = "ens" }, "seal.allowlist.id"},
		{"token ids missing", func(c *Config) {
			c.Seal.Policy = SealPolicyAllowlist
			c.Seal.Allowlist = SealAllowlist{ObjectID: testPkg, InitialSharedVersion: 3, ID: "token"}
		}, "agents[0].token_id"},
		{"no key servers", func(c *Config) { c.Seal.KeyServers = nil }, "seal.key_servers"},
		{"bad object id", func(c *Config) { c.Seal.KeyServers[1].ObjectID = "0x12" }, "seal.key_servers[1].object_id"},
		{"duplicate object id (any case)", func(c *Config) {
			c.Seal.KeyServers[0].ObjectID = "0x" + strings.Repeat("ab", 32)
			c.Seal.KeyServers[2].ObjectID = "0x" + strings.Repeat("AB", 32)
		}, "seal.key_servers[2].object_id"},
		{"no url", func(c *Config) { c.Seal.KeyServers[0].URL = "" }, "seal.key_servers[0].url"},
		{"bad url", func(c *Config) { c.Seal.KeyServers[0].URL = "ftp://ks" }, "seal.key_servers[0].url"},
		{"no public key", func(c *Config) { c.Seal.KeyServers[0].PublicKey = "" }, "seal.key_servers[0].public_key"},
		{"short public key", func(c *Config) { c.Seal.KeyServers[0].PublicKey = "a0b1" }, "seal.key_servers[0].public_key"},
		{"negative weight", func(c *Config) { c.Seal.KeyServers[0].Weight = -1 }, "seal.key_servers[0].weight"},
		{"too many shares", func(c *Config) { c.Seal.KeyServers[0].Weight = 254 }, "seal.key_servers"},
		{"api key without header", func(c *Config) { c.Seal.KeyServers[0].APIKey = SecretRef{Env: "K"} }, "seal.key_servers[0].api_key"},
		{"bad api key header", func(c *Config) {
			c.Seal.KeyServers[0].APIKey = SecretRef{Env: "K"}
			c.Seal.KeyServers[0].APIKeyHeader = "X Key"
		}, "seal.key_servers[0].api_key_header"},
		{"content-type as api key header", func(c *Config) {
			c.Seal.KeyServers[0].APIKey = SecretRef{Env: "K"}
			c.Seal.KeyServers[0].APIKeyHeader = "content-type"
		}, "seal.key_servers[0].api_key_header"},
		{"threshold zero", func(c *Config) { c.Seal.Threshold = 0 }, "seal.threshold"},
		{"threshold above the weights", func(c *Config) { c.Seal.Threshold = 4 }, "seal.threshold"},
		{"no sui key", func(c *Config) { c.Seal.SuiKey = SecretRef{} }, "seal.sui_key"},
		{"two sui key sources", func(c *Config) { c.Seal.SuiKey = SecretRef{File: "/k", Env: "K"} }, "seal.sui_key"},
		{"ttl above the servers' limit", func(c *Config) { c.Seal.SessionTTL = Duration(31 * time.Minute) }, "seal.session_ttl"},
		{"ttl not whole minutes", func(c *Config) { c.Seal.SessionTTL = Duration(90 * time.Second) }, "seal.session_ttl"},
		{"no max size", func(c *Config) { c.Seal.MaxSize = 0 }, "seal.max_size"},
		{"no request timeout", func(c *Config) { c.Seal.RequestTimeout = 0 }, "seal.request_timeout"},
		{"v2 still needs a key", func(c *Config) { c.Encryption.Format = "v2" }, "encryption.key"},
		{"escrow with format seal", func(c *Config) { c.Seal.Escrow = true }, "seal.escrow"},
		{"escrow without the seal section", func(c *Config) {
			c.Encryption = Encryption{Format: "v3", Key: SecretRef{File: "/k"}, V1MaxSize: 1 << 20}
			c.Seal = defaultSeal()
			c.Seal.Escrow = true
		}, "seal.escrow"},
		{"escrow without threshold servers", func(c *Config) {
			c.Encryption = Encryption{Format: "v3", Key: SecretRef{File: "/k"}, V1MaxSize: 1 << 20}
			c.Seal.Escrow = true
			c.Seal.Threshold = 4
		}, "seal.threshold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sealConfig()
			tt.mutate(c)
			wantFieldError(t, c.Validate(), tt.field)
		})
	}

	// Escrow with format v3 and a complete seal section.
	c0 := sealConfig()
	c0.Encryption = Encryption{Format: "v3", Key: SecretRef{File: "/k"}, V1MaxSize: 1 << 20}
	c0.Seal.Escrow = true
	if err := c0.Validate(); err != nil {
		t.Errorf("escrow with v3 and the seal section: %v", err)
	}

	// Weights count toward the threshold.
	c := sealConfig()
	c.Seal.KeyServers[0].Weight = 3
	c.Seal.Threshold = 5
	if err := c.Validate(); err != nil {
		t.Errorf("threshold 5 of weights 3+1+1: %v", err)
	}
}
