package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const fullConfig = `
state_dir: state
log: {level: debug, format: json}
http: {listen: "127.0.0.1:9000"}
walrus:
  publishers: ["http://127.0.0.1:31415"]
  aggregators: ["http://127.0.0.1:31415", "https://aggregator.example.com"]
  epochs: 7
  max_blob_size: 12MiB
  attempt_timeout: 90s
  token: {env: WALRUS_JWT}
chain:
  rpc: ${RPC_URL}
  chain_id: 1337
  signer: {file: keys/eth.key}
  tx_timeout: 1m
encryption:
  key: {file: keys/snapshot.key}
receipts:
  trusted: ["0x00000000000000000000000000000000000000aa"]
  import_policy: reject
defaults:
  quiet: 500ms
  max_lag: 5s
  pointer_interval: 0
agents:
  - id: auditor
    brain_dir: brains/auditor
    ens_name: Auditor.Example.ETH
    token_id: 3
    seed_dir: seeds/auditor
    pointer_interval: 1m
  - id: plain
    brain_dir: /srv/brains/plain
    epochs: 3
`

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hermesd.yml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadFull(t *testing.T) {
	t.Setenv("RPC_URL", "http://127.0.0.1:8545")
	p := writeConfig(t, fullConfig)
	c, err := Load(p)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	dir := filepath.Dir(p)
	checks := []struct {
		name      string
		got, want any
	}{
		{"state_dir resolved", c.StateDir, filepath.Join(dir, "state")},
		{"log level", c.Log.Level, "debug"},
		{"listen", c.HTTP.Listen, "127.0.0.1:9000"},
		{"epochs", c.Walrus.Epochs, 7},
		{"max blob", c.Walrus.MaxBlobSize, ByteSize(12 << 20)},
		{"attempt timeout", c.Walrus.AttemptTimeout.D(), 90 * time.Second},
		{"default timeout kept", c.Walrus.Timeout.D(), 30 * time.Minute},
		{"token env", c.Walrus.Token.Env, "WALRUS_JWT"},
		{"rpc expanded", c.Chain.RPC, "http://127.0.0.1:8545"},
		{"registry default", c.Chain.ENSRegistry, CanonicalENSRegistry},
		{"signer resolved", c.Chain.Signer.File, filepath.Join(dir, "keys/eth.key")},
		{"brain resolved", c.Agents[0].BrainDir, filepath.Join(dir, "brains/auditor")},
		{"abs brain kept", c.Agents[1].BrainDir, "/srv/brains/plain"},
		{"ens normalized", c.Agents[0].ENSName, "auditor.example.eth"},
		{"identity from ens", c.Agents[0].Identity(), "auditor.example.eth"},
		{"identity from id", c.Agents[1].Identity(), "plain"},
		{"token id", *c.Agents[0].TokenID, uint64(3)},
		{"quiet default", c.QuietPeriod(&c.Agents[0]), 500 * time.Millisecond},
		{"pointer override", c.PointerIntervalOf(&c.Agents[0]), time.Minute},
		{"pointer default 0", c.PointerIntervalOf(&c.Agents[1]), time.Duration(0)},
		{"epochs default", c.EpochsOf(&c.Agents[0]), 7},
		{"epochs override", c.EpochsOf(&c.Agents[1]), 3},
		{"path", c.Path, p},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if _, err := c.Agent("nope"); err == nil || !strings.Contains(err.Error(), "auditor, plain") {
		t.Errorf("Agent(nope) error = %v, want it to list configured agents", err)
	}
}

func TestParseErrors(t *testing.T) {
	env := map[string]string{"SET": "x"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name, body, want string
	}{
		{"unknown top-level key", "state_dirr: /x\n", "state_dirr (line 1): unknown key; did you mean state_dir?"},
		{"unknown nested key", "walrus:\n  publisher: http://x\n", "walrus.publisher (line 2): unknown key; did you mean publishers?"},
		{"inline secret rejected", "encryption:\n  key: {value: abc}\n", "encryption.key.value (line 2): unknown key; the keys here are file, env, keystore, password_file"},
		{"unset env", "state_dir: ${NOPE}\n", "NOPE is not set"},
		{"unterminated env", "state_dir: ${SET\n", "unterminated"},
		{"bad duration", "defaults:\n  quiet: soon\n", `"soon" is not a duration`},
		{"negative duration", "defaults:\n  quiet: -1s\n", "negative"},
		{"bad size", "walrus:\n  max_blob_size: lots\n", `"lots" is not a size`},
		{"two documents", "state_dir: /a\n---\nstate_dir: /b\n", "more than one YAML document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.body), lookup)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestExpandEnv(t *testing.T) {
	lookup := func(k string) (string, bool) {
		if k == "A" {
			return "alpha", true
		}
		return "", false
	}
	tests := []struct{ in, want string }{
		{"x: ${A}", "x: alpha"},
		{"x: $$A and $A", "x: $A and $A"},
		{"price: 5$", "price: 5$"},
		{"${A}${A}", "alphaalpha"},
	}
	for _, tt := range tests {
		got, err := expandEnv(tt.in, lookup)
		if err != nil || got != tt.want {
			t.Errorf("expandEnv(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// validBase is a valid configuration with one named agent, for tests to
// break one field of.
func validBase() *Config {
	c := Default()
	c.StateDir = "/var/lib/hermesd"
	c.Walrus.Publishers = []string{"http://127.0.0.1:1"}
	c.Walrus.Aggregators = []string{"http://127.0.0.1:1"}
	c.Chain.RPC = "http://127.0.0.1:8545"
	c.Chain.Signer = SecretRef{Env: "DEPLOYER_PRIVATE_KEY"}
	c.Encryption.Key = SecretRef{File: "/etc/hermesd/snapshot.key"}
	c.Agents = []Agent{{ID: "a", BrainDir: "/srv/a", ENSName: "a.eth"}}
	return c
}

// wantFieldError fails unless err is a ValidationError naming field.
func wantFieldError(t *testing.T, err error, field string) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate() = %v, want a ValidationError", err)
	}
	for _, f := range ve.Fields {
		if f.Field == field {
			return
		}
	}
	t.Fatalf("Validate() = %v, want an error for field %s", err, field)
}

// TestCheckSigners: a configuration without a chain key is valid (restore,
// drill and pointer get read only); CheckSigners, which the commands that
// write a pointer call, names the agent whose pointer needs one.
func TestCheckSigners(t *testing.T) {
	c := validBase()
	c.Chain.Signer = SecretRef{}
	c.Agents = append(c.Agents, Agent{ID: "b", BrainDir: "/srv/b"})
	if err := c.Validate(); err != nil {
		t.Fatalf("no chain.signer: Validate() = %v, want nil", err)
	}
	err := c.CheckSigners()
	wantFieldError(t, err, "chain.signer")
	if !strings.Contains(err.Error(), "agent a's pointer (a.eth)") {
		t.Errorf("CheckSigners() = %v, want it to name the agent and its name", err)
	}
	// An agent without a name writes no pointer.
	if err := c.CheckSigners(&c.Agents[1]); err != nil {
		t.Errorf("CheckSigners(agent without ens_name) = %v, want nil", err)
	}
	c.Chain.Signer = SecretRef{Env: "DEPLOYER_PRIVATE_KEY"}
	if err := c.CheckSigners(); err != nil {
		t.Errorf("with chain.signer: CheckSigners() = %v, want nil", err)
	}
}

func TestValidate(t *testing.T) {
	base := validBase
	if err := base().Validate(); err != nil {
		t.Fatalf("base config invalid: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(c *Config)
		field  string
	}{
		{"no state dir", func(c *Config) { c.StateDir = "" }, "state_dir"},
		{"bad log level", func(c *Config) { c.Log.Level = "loud" }, "log.level"},
		{"remote listen", func(c *Config) { c.HTTP.Listen = "0.0.0.0:9797" }, "http.listen"},
		{"all interfaces", func(c *Config) { c.HTTP.Listen = ":9797" }, "http.listen"},
		{"bad publisher url", func(c *Config) { c.Walrus.Publishers = []string{"ftp://x"} }, "walrus.publishers[0]"},
		{"publisher with query", func(c *Config) { c.Walrus.Publishers = []string{"http://x/?epochs=1"} }, "walrus.publishers[0]"},
		{"no aggregators", func(c *Config) { c.Walrus.Aggregators = nil }, "walrus.aggregators"},
		{"epochs too many", func(c *Config) { c.Walrus.Epochs = 54 }, "walrus.epochs"},
		{"share and send", func(c *Config) {
			c.Walrus.Share = true
			c.Walrus.SendObjectTo = "0x" + strings.Repeat("a", 64)
		}, "walrus.share"},
		{"bad sui address", func(c *Config) { c.Walrus.SendObjectTo = "0x12" }, "walrus.send_object_to"},
		{"no rpc with ens", func(c *Config) { c.Chain.RPC = "" }, "chain.rpc"},
		{"bad registry", func(c *Config) { c.Chain.ENSRegistry = "0x1" }, "chain.ens_registry"},
		{"bad universal resolver", func(c *Config) { c.Chain.UniversalResolver = "0xeEeEEEeE14D718C2B47D9923Deab1335E144EeE" }, "chain.universal_resolver"},
		{"no gateway timeout", func(c *Config) { c.Chain.GatewayTimeout = 0 }, "chain.gateway_timeout"},
		{"tiny gateway bound", func(c *Config) { c.Chain.GatewayMaxBody = 100 }, "chain.gateway_max_body"},
		{"huge gateway bound", func(c *Config) { c.Chain.GatewayMaxBody = 5 << 20 }, "chain.gateway_max_body"},
		{"two signer sources", func(c *Config) { c.Chain.Signer = SecretRef{File: "/k", Env: "K"} }, "chain.signer"},
		{"keystore needs password", func(c *Config) { c.Chain.Signer = SecretRef{Keystore: "/ks.json"} }, "chain.signer.password_file"},
		{"no encryption key", func(c *Config) { c.Encryption.Key = SecretRef{} }, "encryption.key"},
		{"bad format", func(c *Config) { c.Encryption.Format = "none" }, "encryption.format"},
		{"bad trusted", func(c *Config) { c.Receipts.Trusted = []string{"nope"} }, "receipts.trusted[0]"},
		{"bad policy", func(c *Config) { c.Receipts.ImportPolicy = "drop" }, "receipts.import_policy"},
		{"bad agent id", func(c *Config) { c.Agents[0].ID = "Bad Id" }, "agents[0].id"},
		{"duplicate id", func(c *Config) { c.Agents = append(c.Agents, Agent{ID: "a", BrainDir: "/srv/b"}) }, "agents[1].id"},
		{"overlapping brains", func(c *Config) { c.Agents = append(c.Agents, Agent{ID: "b", BrainDir: "/srv/a/sub"}) }, "agents[1].brain_dir"},
		{"brain inside state", func(c *Config) { c.Agents[0].BrainDir = "/var/lib/hermesd/brain" }, "agents[0].brain_dir"},
		{"invalid ens", func(c *Config) { c.Agents[0].ENSName = "a..eth" }, "agents[0].ens_name"},
		{"duplicate ens", func(c *Config) {
			c.Agents = append(c.Agents, Agent{ID: "b", BrainDir: "/srv/b", ENSName: "A.eth"})
		}, "agents[1].ens_name"},
		{"seed inside brain", func(c *Config) { c.Agents[0].SeedDir = "/srv/a/seed" }, "agents[0].seed_dir"},
		{"max lag below quiet", func(c *Config) { d := Duration(time.Hour); c.Agents[0].Quiet = &d }, "agents[0].max_lag"},
		{"no expiry margin", func(c *Config) { c.Repository.ExpiryMargin = 0 }, "repository.expiry_margin"},
		{"margin leaves no time", func(c *Config) { c.Agents[0].Epochs = 2 }, "repository.expiry_margin"},
		{"margin as long as storage", func(c *Config) { c.Repository.ExpiryMargin = 4 }, "repository.expiry_margin"},
		{"too few packs", func(c *Config) { c.Repository.MaxPacks = 1 }, "repository.max_packs"},
		{"too many packs", func(c *Config) { c.Repository.MaxPacks = 513 }, "repository.max_packs"},
		{"min live of all", func(c *Config) { c.Repository.MinLive = 1 }, "repository.min_live"},
		{"negative min live", func(c *Config) { c.Repository.MinLive = -0.1 }, "repository.min_live"},
		{"packs under the cap", func(c *Config) { c.Walrus.MaxBlobSize = 1 << 20 }, "walrus.max_blob_size"},
		{"negative price", func(c *Config) { c.Cost.WALUSD = -1 }, "cost.wal_usd"},
		{"price not a number", func(c *Config) { c.Cost.ETHUSD = math.NaN() }, "cost.eth_usd"},
		{"infinite price", func(c *Config) { c.Cost.SuiTxUSD = math.Inf(1) }, "cost.sui_tx_usd"},
		{"no shards", func(c *Config) { c.Cost.WalrusShards = 0 }, "cost.walrus_shards"},
		{"too many shards", func(c *Config) { c.Cost.WalrusShards = 1 << 16 }, "cost.walrus_shards"},
		{"state in /etc", func(c *Config) { c.StateDir = "/etc" }, "state_dir"},
		{"state in /var", func(c *Config) { c.StateDir = "/var" }, "state_dir"},
		{"brain in /etc", func(c *Config) { c.Agents[0].BrainDir = "/etc" }, "agents[0].brain_dir"},
		{"brain below /etc", func(c *Config) { c.Agents[0].BrainDir = "/etc/ssh" }, "agents[0].brain_dir"},
		{"brain below /usr", func(c *Config) { c.Agents[0].BrainDir = "/usr/share/brain" }, "agents[0].brain_dir"},
		{"brain is /", func(c *Config) { c.Agents[0].BrainDir = "/" }, "agents[0].brain_dir"},
		{"brain is home", func(c *Config) { c.Agents[0].BrainDir, _ = os.UserHomeDir() }, "agents[0].brain_dir"},
		{"seed is /etc", func(c *Config) { c.Agents[0].SeedDir = "/etc" }, "agents[0].seed_dir"},
		{"duplicate token", func(c *Config) {
			three := uint64(3)
			c.Agents[0].TokenID = &three
			c.Agents = append(c.Agents, Agent{ID: "b", BrainDir: "/srv/b", TokenID: &three})
		}, "agents[1].token_id"},
		{"token JavaScript rounds", func(c *Config) { t := uint64(1<<53 + 1); c.Agents[0].TokenID = &t }, "agents[0].token_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.mutate(c)
			wantFieldError(t, c.Validate(), tt.field)
		})
	}
}

// TestUnsafeDirsAllowed: allow_unsafe_dirs lets system directories
// through, and a seed may lie below /usr (hermesd only reads it).
func TestUnsafeDirsAllowed(t *testing.T) {
	p := writeConfig(t, `
state_dir: /var/lib/hermesd
allow_unsafe_dirs: true
walrus: {publishers: ["http://127.0.0.1:1"], aggregators: ["http://127.0.0.1:1"]}
encryption: {key: {env: K}}
agents: [{id: a, brain_dir: /etc/agent, seed_dir: /proc/seed}]
`)
	if _, err := Load(p); err != nil {
		t.Fatalf("allowed: %v", err)
	}
	c := Default()
	c.StateDir = "/var/lib/hermesd"
	c.Walrus.Publishers, c.Walrus.Aggregators = []string{"http://127.0.0.1:1"}, []string{"http://127.0.0.1:1"}
	c.Encryption.Key = SecretRef{Env: "K"}
	c.Agents = []Agent{{ID: "a", BrainDir: "/srv/a", SeedDir: "/usr/share/hermesd/seed"}}
	if err := c.Validate(); err != nil {
		t.Fatalf("a seed below /usr: %v", err)
	}
	c.Agents[0].BrainDir = "/etc"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "agents[0].brain_dir: /etc is a system directory") ||
		!strings.Contains(err.Error(), "allow_unsafe_dirs") {
		t.Fatalf("refusal: %v", err)
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
		bad  bool
	}{
		{"1048576", 1 << 20, false},
		{"10MiB", 10 << 20, false},
		{"10 MiB", 10 << 20, false},
		{"10MB", 10_000_000, false},
		{"1GiB", 1 << 30, false},
		{"512KiB", 512 << 10, false},
		{"-1", 0, true},
		{"1.5MiB", 0, true},
		{"99999999999TiB", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseByteSize(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseByteSize(%q) = %v, %v", tt.in, got, err)
		}
	}
	if s := ByteSize(10 << 20).String(); s != "10MiB" {
		t.Errorf("String = %q", s)
	}
}

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadSecret(SecretRef{File: good}); err != nil || v != "s3cret" {
		t.Errorf("file: %q, %v", v, err)
	}
	if _, err := ReadSecret(SecretRef{File: open}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable file accepted: %v", err)
	}
	t.Setenv("HERMESD_TEST_SECRET", "envval")
	if v, err := ReadSecret(SecretRef{Env: "HERMESD_TEST_SECRET"}); err != nil || v != "envval" {
		t.Errorf("env: %q, %v", v, err)
	}
	if _, err := ReadSecret(SecretRef{Env: "HERMESD_TEST_UNSET"}); err == nil {
		t.Error("unset env accepted")
	}
	if _, err := ReadSecret(SecretRef{}); !errors.Is(err, ErrNoSecret) {
		t.Errorf("empty ref: %v", err)
	}
}

func TestResolvePath(t *testing.T) {
	t.Setenv(EnvPath, "")
	if got := ResolvePath(""); got != DefaultPath {
		t.Errorf("default: %q", got)
	}
	t.Setenv(EnvPath, "/from/env.yml")
	if got := ResolvePath(""); got != "/from/env.yml" {
		t.Errorf("env: %q", got)
	}
	if got := ResolvePath("/flag.yml"); got != "/flag.yml" {
		t.Errorf("flag: %q", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yml"))
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Load missing = %v", err)
	}
}

// TestEnvCannotInjectConfiguration: ${VAR} is expanded inside scalar
// values after parsing, so a variable's value is data, never YAML. Before,
// expansion ran on the raw text and a newline in a variable added keys
// (http.allow_remote: true was injected this way).
func TestEnvCannotInjectConfiguration(t *testing.T) {
	env := map[string]string{
		"STATE":   "/var/lib/x\nhttp:\n  allow_remote: true\n  listen: 0.0.0.0:9797",
		"COLON":   "a: b",
		"FLOW":    "{file: /etc/shadow}",
		"CHAIN":   "1337",
		"SHARE":   "true",
		"LISTEN":  "127.0.0.1:9001",
		"KEYNAME": "state_dir",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	body := "state_dir: ${STATE}\nchain:\n  chain_id: ${CHAIN}\n  rpc: \"${COLON}\"\n" +
		"walrus:\n  share: ${SHARE}\n  publishers: [\"${FLOW}\"]\nhttp:\n  listen: ${LISTEN}\n"
	c, err := Parse(strings.NewReader(body), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.AllowRemote || c.HTTP.Listen != "127.0.0.1:9001" {
		t.Errorf("http injected: %+v", c.HTTP)
	}
	if c.StateDir != env["STATE"] || c.Chain.RPC != "a: b" || len(c.Walrus.Publishers) != 1 || c.Walrus.Publishers[0] != env["FLOW"] {
		t.Errorf("values not kept verbatim: %q %q %q", c.StateDir, c.Chain.RPC, c.Walrus.Publishers)
	}
	// A plain scalar still takes the type its value has.
	if c.Chain.ChainID != 1337 || !c.Walrus.Share {
		t.Errorf("typed values: chain_id %d share %v", c.Chain.ChainID, c.Walrus.Share)
	}
	// Keys are never expanded.
	if _, err := Parse(strings.NewReader("${KEYNAME}: /x\n"), lookup); err == nil || !strings.Contains(err.Error(), "${KEYNAME} (line 1): unknown key") {
		t.Errorf("expanded key: %v", err)
	}
	// The injected value is refused by validation, naming the field.
	c.StateDir = env["STATE"]
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "state_dir") || !strings.Contains(err.Error(), "control character") {
		t.Errorf("Validate = %v", err)
	}
}

func TestHTTPSettings(t *testing.T) {
	base := "state_dir: /s\n"
	for _, tc := range []struct {
		body, want string
	}{
		{"http: {socket: /run/hermesd.sock, socket_mode: \"0660\", readiness: any, token: {file: /k}}\n", ""},
		{"http: {socket: relative.sock}\n", "http.socket"},
		{"http: {socket: /s.sock, socket_mode: \"0666\"}\n", "http.socket_mode"},
		{"http: {readiness: some}\n", "http.readiness"},
		{"http: {socket_mode: \"999\"}\n", "not a permission mode"},
	} {
		c, err := Parse(strings.NewReader(base+tc.body), os.LookupEnv)
		if err == nil {
			err = c.Validate()
		}
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: %v (want %q)", tc.body, err, tc.want)
		}
		if tc.want == "" && (c.HTTP.SocketMode != 0o660 || c.HTTP.Readiness != "any" || c.HTTP.Token.File != "/k") {
			t.Errorf("parsed %+v", c.HTTP)
		}
	}
}

// Format v3 is the default; v1 and v2 stay writable. Only those refresh an
// unchanged brain by age: v3 re-packs (repository.*).
func TestFormatDefaults(t *testing.T) {
	c := Default()
	if c.Encryption.Format != "v3" {
		t.Errorf("default format %q, want v3", c.Encryption.Format)
	}
	if r := c.Repository; r.ExpiryMargin != 1 || r.MaxPacks != 64 || r.MinLive != 0.2 {
		t.Errorf("repository defaults %+v", r)
	}
	a := &Agent{ID: "a"}
	if d := c.RefreshAfterOf(a); d != 0 {
		t.Errorf("v3 refresh after %s, want 0 (renewed by re-packing)", d)
	}
	for _, f := range []string{"v1", "v2"} {
		c.Encryption.Format = f
		if d := c.RefreshAfterOf(a); d != 4*c.Walrus.EpochDuration.D() {
			t.Errorf("%s refresh after %s, want 4 epochs of the 5 stored", f, d)
		}
	}
	// A small blob cap is fine for the whole-blob formats.
	c.Walrus.MaxBlobSize = 1 << 20
	c.StateDir = "/var/lib/hermesd"
	if err := c.Validate(); err != nil {
		t.Errorf("v2 with a 1 MiB cap: %v", err)
	}
}

// The cost section: defaults from Walrus's early mainnet prices, USD
// prices unknown until configured.
func TestCostSection(t *testing.T) {
	c := Default()
	if k := c.Cost; k.WalrusStoragePrice != 100_000 || k.WalrusWritePrice != 20_000 || k.WalrusShards != 1000 ||
		k.WALUSD != 0 || k.ETHUSD != 0 || k.SuiTxUSD != 0 {
		t.Errorf("cost defaults %+v", k)
	}
	body := "state_dir: /s\ncost:\n  wal_usd: 0.4\n  eth_usd: 3000\n  sui_tx_usd: 0.002\n  walrus_storage_price: 11000\n  walrus_write_price: 20000\n  walrus_shards: 1000\n"
	got, err := Parse(strings.NewReader(body), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if k := got.Cost; k.WALUSD != 0.4 || k.ETHUSD != 3000 || k.SuiTxUSD != 0.002 || k.WalrusStoragePrice != 11_000 {
		t.Errorf("parsed %+v", k)
	}
	if _, err := Parse(strings.NewReader("state_dir: /s\ncost:\n  usd: 1\n"), func(string) (string, bool) { return "", false }); err == nil {
		t.Error("an unknown cost key was accepted")
	}
}

// TestTokenIDBeyondJavaScript: a token id above 2^53 - 1 that a JavaScript
// number holds exactly is allowed with a warning; one it rounds is
// refused, whatever the format: every receipt hermesd signs carries it.
func TestTokenIDBeyondJavaScript(t *testing.T) {
	for _, tt := range []struct {
		id      uint64
		valid   bool
		warning bool
	}{
		{3, true, false},
		{1<<53 - 1, true, false},
		{1 << 53, true, true},
		{1<<53 + 1, false, false},
		{1 << 60, true, true},
		{1<<64 - 1, false, false},
	} {
		c := Default()
		c.StateDir = "/var/lib/hermesd"
		c.Walrus.Publishers = []string{"http://127.0.0.1:1"}
		c.Walrus.Aggregators = []string{"http://127.0.0.1:1"}
		c.Encryption.Key = SecretRef{File: "/etc/hermesd/snapshot.key"}
		id := tt.id
		c.Agents = []Agent{{ID: "a", BrainDir: "/srv/a", TokenID: &id}}
		err := c.Validate()
		if (err == nil) != tt.valid {
			t.Errorf("%d: Validate() = %v", tt.id, err)
		}
		if err != nil && !strings.Contains(err.Error(), "not exactly representable as a JavaScript number") {
			t.Errorf("%d: %v", tt.id, err)
		}
		if w := c.Warnings(); (len(w) > 0) != tt.warning || tt.warning && !strings.Contains(w[0], "above 2^53 - 1") {
			t.Errorf("%d: warnings %q", tt.id, w)
		}
	}
}
