package configs

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/systemdunit"
)

// sampleEnv is every environment variable the samples may reference with
// ${NAME}. A sample that references anything else fails, so the list in
// each sample's header and this one stay in step.
var sampleEnv = map[string]string{
	"SEPOLIA_RPC_URL":           "https://sepolia.example.invalid/v3/test",
	"MAINNET_RPC_URL":           "https://mainnet.example.invalid/v3/test",
	"HERMESD_ENS_NAME":          "Drill.Hermes-Test.eth", // normalized on load
	"HERMESD_SNAPSHOT_KEY_FILE": "/etc/hermesd/keys/snapshot.key",
	"WALRUS_PUBLISHER_URL":      "http://127.0.0.1:31415",
	"WALRUS_SEND_OBJECT_TO":     "0x" + strings.Repeat("ab", 32),
}

// samples are the YAML configurations this package ships (plus the drill
// configuration of testnet/), each with what must hold beyond validity.
var samples = map[string]func(t *testing.T, c *config.Config){
	"devnet.yml":                     checkDevnet,
	"testnet.yml":                    checkTestnet,
	"mainnet.yml":                    checkMainnet,
	"../testnet/hermesd.testnet.yml": checkDrill,
}

func setSampleEnv(t *testing.T) {
	t.Helper()
	for k, v := range sampleEnv {
		t.Setenv(k, v)
	}
}

// strictLookup resolves only sampleEnv, whatever the process environment
// holds, and records what was asked for.
func strictLookup(t *testing.T, used map[string]bool) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := sampleEnv[name]
		if !ok {
			t.Errorf("sample references ${%s}, which is not in sampleEnv (document it in the sample's header and add it here)", name)
		}
		used[name] = true
		return v, ok
	}
}

func TestEverySampleIsChecked(t *testing.T) {
	var found []string
	for _, pattern := range []string{"*.yml", "../testnet/*.yml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, m...)
	}
	for _, f := range found {
		if _, ok := samples[f]; !ok {
			t.Errorf("%s is not in the samples table of configs_test.go", f)
		}
	}
	for f := range samples {
		if !slices.Contains(found, f) {
			t.Errorf("sample %s is missing", f)
		}
	}
}

func TestSamplesLoadAndValidate(t *testing.T) {
	for file, check := range samples {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			// Strict parse first: unknown keys and unknown variables fail.
			used := map[string]bool{}
			if _, err := config.Parse(bytes.NewReader(raw), strictLookup(t, used)); err != nil {
				t.Fatalf("parse: %v", err)
			}
			// Then the real loader: path resolution and validation.
			setSampleEnv(t)
			c, err := config.Load(file)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if len(c.Agents) == 0 {
				t.Error("a sample should configure at least one agent")
			}
			if err := config.CheckListen(c.HTTP.Listen, false); c.HTTP.Listen != "" && err != nil {
				t.Errorf("http.listen %q is not loopback: %v", c.HTTP.Listen, err)
			}
			if c.HTTP.AllowRemote {
				t.Error("samples must not set http.allow_remote")
			}
			if c.Encryption.Format != "v3" {
				t.Errorf("encryption.format = %q; samples should show the default v3", c.Encryption.Format)
			}
			check(t, c)
		})
	}
}

// TestSamplesRejectDrift proves the loader would catch a sample that
// drifts from the schema: the same file with one unknown key must fail.
func TestSamplesRejectDrift(t *testing.T) {
	setSampleEnv(t)
	for file := range samples {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			bad := bytes.Replace(raw, []byte("\nchain:\n"), []byte("\nchain:\n  rpc_url: https://typo.example\n"), 1)
			if bytes.Equal(bad, raw) {
				t.Fatal("sample has no top-level chain: section")
			}
			if _, err := config.Parse(bytes.NewReader(bad), os.LookupEnv); err == nil || !strings.Contains(err.Error(), "rpc_url") {
				t.Fatalf("unknown key accepted: %v", err)
			}
		})
	}
}

func checkDevnet(t *testing.T, c *config.Config) {
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	// Paths are relative to the file, as the header promises.
	if want := filepath.Join(dir, "state"); c.StateDir != want {
		t.Errorf("state_dir = %s, want %s", c.StateDir, want)
	}
	if want := filepath.Join(dir, "keys", "snapshot.key"); c.Encryption.Key.File != want {
		t.Errorf("encryption.key.file = %s, want %s", c.Encryption.Key.File, want)
	}
	// The values `hermesd-devnet` uses by default (cmd/hermesd-devnet/flags.go,
	// internal/devchain, internal/devnet).
	if c.Chain.ChainID != 1337 || c.Chain.RPC != "http://127.0.0.1:18545" {
		t.Errorf("chain = %d %s, want the devnet's 1337 at 127.0.0.1:18545", c.Chain.ChainID, c.Chain.RPC)
	}
	if !slices.Equal(c.Walrus.Publishers, []string{"http://127.0.0.1:31415"}) || !slices.Equal(c.Walrus.Aggregators, c.Walrus.Publishers) {
		t.Errorf("walrus endpoints = %v %v, want the devnet's 127.0.0.1:31415", c.Walrus.Publishers, c.Walrus.Aggregators)
	}
	a := c.Agents[0]
	if a.ID != "auditor" || a.ENSName != "auditor.hermes.eth" || a.TokenID == nil || *a.TokenID != 3 {
		t.Errorf("agent = %s %s %v, want the devnet's default auditor=auditor.hermes.eth, token 3", a.ID, a.ENSName, a.TokenID)
	}
	if got := c.PointerIntervalOf(&a); got != 0 {
		t.Errorf("pointer interval = %s, want 0 on the devnet", got)
	}
	// One agent each way: the second one's record on the devnet's L2.
	if len(c.Agents) != 2 || c.RecordsOf(&c.Agents[0]) != nil {
		t.Fatalf("want auditor on L1 and scout on the L2, got %d agents", len(c.Agents))
	}
	s := c.Agents[1]
	r := c.RecordsOf(&s)
	if s.ID != "scout" || s.ENSName != "scout."+devnet.DefaultL2Parent || r == nil || r.ID != devnet.L2RecordsID ||
		r.ChainID != devnet.DefaultL2ChainID || r.RPC != "http://127.0.0.1:18546" ||
		!strings.EqualFold(r.Resolver, devchain.ResolverAddress.Hex()) {
		t.Errorf("scout = %s %s, records %+v; want the devnet's L2 (chain 1338 at 127.0.0.1:18546, resolver %s)",
			s.ID, s.ENSName, r, devchain.ResolverAddress.Hex())
	}
}

// ensUniversalResolver is the Universal Resolver ENS documents for mainnet
// and its testnets (docs.ens.domains, "Deployments").
const ensUniversalResolver = "0xeEeEEEeE14D718C2B47D9923Deab1335E144EeEe"

func checkTestnet(t *testing.T, c *config.Config) {
	if c.Chain.UniversalResolver != ensUniversalResolver {
		t.Errorf("chain.universal_resolver = %q, want ENS's %s (Sepolia runs ENSv2)", c.Chain.UniversalResolver, ensUniversalResolver)
	}
	checkSepoliaWalrusTestnet(t, c)
	if c.Chain.Signer.Env != "DEPLOYER_PRIVATE_KEY" {
		t.Errorf("chain.signer = %s, want env DEPLOYER_PRIVATE_KEY (as the reference runtime)", c.Chain.Signer)
	}
	if got := c.PointerIntervalOf(&c.Agents[0]); got != time.Minute {
		t.Errorf("pointer interval = %s, want 1m", got)
	}
}

func checkDrill(t *testing.T, c *config.Config) {
	checkSepoliaWalrusTestnet(t, c)
	// testnet/drill.sh relies on these.
	if len(c.Agents) != 1 || c.Agents[0].ID != "drill" {
		t.Fatalf("agents = %+v, want exactly one agent with id drill", c.Agents)
	}
	dir, err := filepath.Abs("../testnet")
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]string{"state": c.StateDir, "brain": c.Agents[0].BrainDir, "seed": c.Agents[0].SeedDir} {
		if want := filepath.Join(dir, name); got != want {
			t.Errorf("%s = %s, want %s (relative to the config)", name, got, want)
		}
	}
	if c.HTTP.Listen == "" || c.HTTP.Listen == config.Default().HTTP.Listen {
		t.Errorf("http.listen = %q; drill.sh polls the daemon and must not collide with a devnet on the default port", c.HTTP.Listen)
	}
	if c.Encryption.Key.File != sampleEnv["HERMESD_SNAPSHOT_KEY_FILE"] {
		t.Errorf("encryption.key.file = %q, want $HERMESD_SNAPSHOT_KEY_FILE", c.Encryption.Key.File)
	}
	raw, err := os.ReadFile("../testnet/hermesd.testnet.yml")
	if err != nil {
		t.Fatal(err)
	}
	// drill.sh rewrites exactly this line when HERMESD_SIGNER_KEY_FILE is set.
	if n := strings.Count(string(raw), "  signer: {env: DEPLOYER_PRIVATE_KEY} # drill.sh: signer line\n"); n != 1 {
		t.Errorf("the signer line drill.sh rewrites occurs %d times, want 1", n)
	}
}

func checkSepoliaWalrusTestnet(t *testing.T, c *config.Config) {
	t.Helper()
	if c.Chain.ChainID != 11155111 {
		t.Errorf("chain.chain_id = %d, want Sepolia's 11155111", c.Chain.ChainID)
	}
	if c.Chain.RPC != sampleEnv["SEPOLIA_RPC_URL"] {
		t.Errorf("chain.rpc = %q, want $SEPOLIA_RPC_URL", c.Chain.RPC)
	}
	if c.Chain.ENSRegistry != config.CanonicalENSRegistry {
		t.Errorf("chain.ens_registry = %s", c.Chain.ENSRegistry)
	}
	if !slices.Contains(c.Walrus.Publishers, "https://publisher.walrus-testnet.walrus.space") ||
		!slices.Contains(c.Walrus.Aggregators, "https://aggregator.walrus-testnet.walrus.space") {
		t.Errorf("walrus endpoints %v %v miss Mysten's testnet publisher/aggregator", c.Walrus.Publishers, c.Walrus.Aggregators)
	}
	for _, u := range append(slices.Clone(c.Walrus.Publishers), c.Walrus.Aggregators...) {
		if !strings.Contains(u, "testnet") {
			t.Errorf("walrus endpoint %s is not a testnet endpoint", u)
		}
	}
	// Public testnet publishers reject large epoch counts.
	for _, a := range c.Agents {
		if e := c.EpochsOf(&a); e < 1 || e > 10 {
			t.Errorf("agent %s stores for %d epochs; public testnet publishers reject more than ~10", a.ID, e)
		}
	}
	if c.Walrus.MaxBlobSize > 10<<20 {
		t.Errorf("walrus.max_blob_size = %s, above the public publishers' 10 MiB", c.Walrus.MaxBlobSize)
	}
	if want := strings.ToLower(sampleEnv["HERMESD_ENS_NAME"]); c.Agents[0].ENSName != want {
		t.Errorf("ens_name = %q, want the normalized $HERMESD_ENS_NAME %q", c.Agents[0].ENSName, want)
	}
}

func checkMainnet(t *testing.T, c *config.Config) {
	if c.Chain.UniversalResolver != ensUniversalResolver {
		t.Errorf("chain.universal_resolver = %q, want ENS's %s", c.Chain.UniversalResolver, ensUniversalResolver)
	}
	if c.Chain.ChainID != 1 || c.Chain.RPC != sampleEnv["MAINNET_RPC_URL"] {
		t.Errorf("chain = %d %s, want 1 and $MAINNET_RPC_URL", c.Chain.ChainID, c.Chain.RPC)
	}
	for _, u := range append(slices.Clone(c.Walrus.Publishers), c.Walrus.Aggregators...) {
		if strings.Contains(u, "testnet") {
			t.Errorf("mainnet sample uses testnet endpoint %s", u)
		}
	}
	if !slices.Equal(c.Walrus.Publishers, []string{sampleEnv["WALRUS_PUBLISHER_URL"]}) {
		t.Errorf("walrus.publishers = %v; there is no public mainnet publisher, so only $WALRUS_PUBLISHER_URL", c.Walrus.Publishers)
	}
	if !slices.Contains(c.Walrus.Aggregators, "https://aggregator.walrus-mainnet.walrus.space") {
		t.Errorf("walrus.aggregators = %v, want Mysten's mainnet aggregator", c.Walrus.Aggregators)
	}
	if !c.Walrus.Permanent || c.Walrus.SendObjectTo != sampleEnv["WALRUS_SEND_OBJECT_TO"] {
		t.Errorf("permanent=%v send_object_to=%q; the operator should own permanent blobs", c.Walrus.Permanent, c.Walrus.SendObjectTo)
	}
	if c.Chain.Signer.Env != "" {
		t.Errorf("chain.signer = %s; show a key file or keystore on mainnet, not an env var", c.Chain.Signer)
	}
	if c.Chain.MaxFeeGwei >= config.Default().Chain.MaxFeeGwei {
		t.Errorf("chain.max_fee_gwei = %v; the sample should show a tighter cap than the default", c.Chain.MaxFeeGwei)
	}
	if c.Defaults.PointerInterval.D() < 10*time.Minute {
		t.Errorf("defaults.pointer_interval = %s, want at least the 10m default on mainnet", c.Defaults.PointerInterval)
	}
	// gas_limit must fit the first write of every agent in one multicall
	// (ens.md: ~84k gas per first write in a multicall, 105k alone) + 10%.
	need := uint64(105_000)
	if n := uint64(len(c.Agents)); n > 1 {
		need = 84_000 * n
	}
	if need += need / 10; c.Chain.GasLimit < need {
		t.Errorf("chain.gas_limit = %d, below the ~%d a first write of %d agents needs", c.Chain.GasLimit, need, len(c.Agents))
	}

	// send_object_to may be switched off with an empty variable.
	t.Run("empty send_object_to", func(t *testing.T) {
		t.Setenv("WALRUS_SEND_OBJECT_TO", "")
		c, err := config.Load("mainnet.yml")
		if err != nil {
			t.Fatal(err)
		}
		if c.Walrus.SendObjectTo != "" {
			t.Errorf("send_object_to = %q", c.Walrus.SendObjectTo)
		}
	})
}

// TestSamplesDocumentEveryKey fails when the schema gains a key that
// mainnet.yml (the complete reference) does not show or mention.
func TestSamplesDocumentEveryKey(t *testing.T) {
	raw, err := os.ReadFile("mainnet.yml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, key := range yamlKeys(reflect.TypeFor[config.Config]()) {
		if !regexp.MustCompile(`(^|[\s{#-])` + regexp.QuoteMeta(key) + `:`).MatchString(text) {
			t.Errorf("mainnet.yml does not mention the key %q", key)
		}
	}
}

// yamlKeys lists the YAML key names of a struct type, recursively.
func yamlKeys(typ reflect.Type) []string {
	var keys []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		keys = append(keys, name)
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == typ.PkgPath() {
			keys = append(keys, yamlKeys(ft)...)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// publicObjectIDs are public Sui object IDs the samples may show, though
// they have a private key's shape: Mysten Labs' testnet Seal key servers.
var publicObjectIDs = []string{
	"0x73d05d62c18d9374e3ea529e8e0ed6161da1a141a94d3f76ae3fe4e99356db75",
	"0xf5d14a81a982144ae441cd7d64b09027f116a468bd36e7eca494f750591623c8",
}

// TestNoInlineSecrets: no sample may carry something shaped like a private
// key (0x + 64 hex digits) other than a known public object ID.
func TestNoInlineSecrets(t *testing.T) {
	files := []string{"hermesd.service", "kubernetes/hermesd-agent.yaml"}
	for f := range samples {
		files = append(files, f)
	}
	key := regexp.MustCompile(`0x[0-9a-fA-F]{64}`)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range key.FindAll(raw, -1) {
			if !slices.Contains(publicObjectIDs, string(m)) {
				t.Errorf("%s contains %s, which looks like a private key", f, m)
			}
		}
	}
}

// unit is a systemd unit: every value of every key (keys repeat).
type unit systemdunit.Unit

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	u, err := systemdunit.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return unit(u)
}

func (u unit) one(t *testing.T, key string) string {
	t.Helper()
	if len(u[key]) != 1 {
		t.Fatalf("hermesd.service: %s is set %d times, want once", key, len(u[key]))
	}
	return u[key][0]
}

// TestSystemdUnit checks the unit against the samples it is meant for.
func TestSystemdUnit(t *testing.T) {
	u := readUnit(t, "hermesd.service")
	for k, want := range map[string]string{
		"Type":                     "simple", // hermesd has no sd_notify
		"User":                     "hermesd",
		"Group":                    "hermesd",
		"ExecStart":                "/usr/local/bin/hermesd run -config " + config.DefaultPath,
		"StateDirectory":           "hermesd",
		"Restart":                  "on-failure",
		"KillSignal":               "SIGTERM",
		"NoNewPrivileges":          "yes",
		"ProtectSystem":            "strict",
		"ProtectHome":              "yes",
		"PrivateTmp":               "yes",
		"RestrictAddressFamilies":  "AF_INET AF_INET6 AF_UNIX",
		"RestartPreventExitStatus": "2 5", // usage/config and locked (cmd/hermesd/exit.go)
	} {
		if got := u.one(t, k); got != want {
			t.Errorf("%s=%s, want %s", k, got, want)
		}
	}
	stop, err := time.ParseDuration(u.one(t, "TimeoutStopSec"))
	if err != nil {
		t.Fatal(err)
	}
	setSampleEnv(t)
	for _, f := range []string{"mainnet.yml", "testnet.yml"} {
		c, err := config.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if stop <= c.ShutdownTimeout.D() {
			t.Errorf("TimeoutStopSec=%s is not longer than %s's shutdown_timeout %s", stop, f, c.ShutdownTimeout)
		}
		if c.StateDir != "/var/lib/"+u.one(t, "StateDirectory") {
			t.Errorf("%s: state_dir %s is not the unit's StateDirectory", f, c.StateDir)
		}
		// A restore renames into place beside the brain: the parent must
		// be writable under ProtectSystem=strict.
		for _, a := range c.Agents {
			parent := filepath.Dir(a.BrainDir)
			ok := false
			for _, rw := range strings.Fields(strings.Join(u["ReadWritePaths"], " ")) {
				rel, err := filepath.Rel(strings.TrimPrefix(rw, "-"), parent)
				ok = ok || (err == nil && !strings.HasPrefix(rel, ".."))
			}
			if !ok {
				t.Errorf("%s: the parent %s of agent %s's brain is not in ReadWritePaths %v", f, parent, a.ID, u["ReadWritePaths"])
			}
		}
	}
}

// TestKubernetesExample validates the configuration embedded in the
// Kubernetes example and checks the pod spec agrees with it.
func TestKubernetesExample(t *testing.T) {
	raw, err := os.ReadFile("kubernetes/hermesd-agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]map[string]any{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			break
		}
		if d != nil {
			docs[fmt.Sprint(d["kind"])] = d
		}
	}
	cm, sts := docs["ConfigMap"], docs["StatefulSet"]
	if cm == nil || sts == nil {
		t.Fatalf("want a ConfigMap and a StatefulSet, got %v", slices.Sorted(maps.Keys(docs)))
	}
	text, _ := get(cm, "data", "hermesd.yml").(string)
	used := map[string]bool{}
	c, err := config.Parse(strings.NewReader(text), strictLookup(t, used))
	if err != nil {
		t.Fatalf("embedded hermesd.yml: %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("embedded hermesd.yml: %v", err)
	}

	spec := get(sts, "spec", "template", "spec").(map[string]any)
	if r := get(sts, "spec", "replicas"); r != 1 {
		t.Errorf("replicas = %v; one writer per agent", r)
	}
	if g, _ := spec["terminationGracePeriodSeconds"].(int); time.Duration(g)*time.Second <= c.ShutdownTimeout.D() {
		t.Errorf("terminationGracePeriodSeconds = %d, not longer than shutdown_timeout %s", g, c.ShutdownTimeout)
	}
	inits, _ := spec["initContainers"].([]any)
	if len(inits) != 2 {
		t.Fatalf("want 2 init containers (restore, sidecar), got %d", len(inits))
	}
	restore, sidecar := inits[0].(map[string]any), inits[1].(map[string]any)
	if args := fmt.Sprint(restore["args"]); !strings.HasPrefix(args, "[restore ") {
		t.Errorf("first init container runs %s, want hermesd restore", args)
	}
	if args := fmt.Sprint(sidecar["args"]); !strings.HasPrefix(args, "[run ") || sidecar["restartPolicy"] != "Always" {
		t.Errorf("second init container runs %s (restartPolicy %v), want a native sidecar running hermesd run", args, sidecar["restartPolicy"])
	}
	// Every variable the configuration needs is set where it is needed:
	// the restore step reads no chain key.
	secrets := []string{c.Encryption.Key.Env}
	for name := range used {
		secrets = append(secrets, name)
	}
	for _, ctr := range []struct {
		m    map[string]any
		need []string
	}{
		{restore, secrets},
		{sidecar, append(slices.Clone(secrets), c.Chain.Signer.Env)},
	} {
		have := map[string]bool{}
		for _, e := range ctr.m["env"].([]any) {
			have[fmt.Sprint(e.(map[string]any)["name"])] = true
		}
		for _, n := range ctr.need {
			if !have[n] {
				t.Errorf("container %v does not set %s", ctr.m["name"], n)
			}
		}
	}
}

// get walks nested YAML maps.
func get(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

// TestTestnetSealBlock uncomments testnet.yml's seal block, switches the
// format to seal, and checks that the result loads, validates and builds
// a Seal client (with generated public keys standing in for the servers'),
// and that it lists Mysten's testnet key servers of the notes.
func TestTestnetSealBlock(t *testing.T) {
	raw, err := os.ReadFile("testnet.yml")
	if err != nil {
		t.Fatal(err)
	}
	text := uncommentBlock(t, string(raw), "seal")
	if !strings.Contains(text, "\n  format: v3\n") {
		t.Fatal("testnet.yml does not set encryption.format: v3")
	}
	text = strings.Replace(text, "\n  format: v3\n", "\n  format: seal\n", 1)
	p := filepath.Join(t.TempDir(), "testnet-seal.yml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	setSampleEnv(t)
	t.Setenv("SEAL_PACKAGE_ID", "0x"+strings.Repeat("5e", 32))
	for _, v := range []string{"SEAL_PK_1", "SEAL_PK_2"} {
		mk, err := seal.GenerateMasterKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(v, mk.PublicKey().String())
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatalf("testnet.yml with its seal block: %v", err)
	}
	s := c.Seal
	if c.Encryption.Format != "seal" || s.Policy != config.SealPolicyAccountBased || s.Threshold != 2 {
		t.Errorf("format %s, policy %s, threshold %d", c.Encryption.Format, s.Policy, s.Threshold)
	}
	// Mysten Labs' Open-mode testnet servers (testnet/seal.md §3).
	want := map[string]string{
		"0x73d05d62c18d9374e3ea529e8e0ed6161da1a141a94d3f76ae3fe4e99356db75": "https://seal-key-server-testnet-1.mystenlabs.com",
		"0xf5d14a81a982144ae441cd7d64b09027f116a468bd36e7eca494f750591623c8": "https://seal-key-server-testnet-2.mystenlabs.com",
	}
	for _, k := range s.KeyServers {
		if want[k.ObjectID] != k.URL {
			t.Errorf("key server %s at %s is not one of Mysten's testnet servers", k.ObjectID, k.URL)
		}
		delete(want, k.ObjectID)
	}
	if len(want) > 0 {
		t.Errorf("missing key servers %v", want)
	}
	if s.MaxSize > c.Walrus.MaxBlobSize {
		t.Errorf("seal.max_size %d is above walrus.max_blob_size %d", s.MaxSize, c.Walrus.MaxBlobSize)
	}
	if c.Encryption.Key.IsZero() {
		t.Error("the snapshot key should stay configured: it opens the v2 snapshots taken before the switch")
	}
}

// uncommentBlock returns text with the "# BEGIN name" ... "# END name"
// block of a sample uncommented.
func uncommentBlock(t *testing.T, text, name string) string {
	t.Helper()
	begin, end := strings.Index(text, "# BEGIN "+name), strings.Index(text, "# END "+name)
	if begin < 0 || end < begin {
		t.Fatalf("no '# BEGIN %s' ... '# END %s' block", name, name)
	}
	var block strings.Builder
	for _, line := range strings.Split(text[begin:end], "\n")[1:] {
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "# ") {
			t.Fatalf("%s block line %q is not commented out", name, line)
		}
		block.WriteString(strings.TrimPrefix(line, "# ") + "\n")
	}
	return text[:begin] + block.String() + text[end:]
}

// TestTestnetRecordsBlock: testnet.yml's ens block, uncommented and used
// by the agent, loads and names Base Sepolia.
func TestTestnetRecordsBlock(t *testing.T) {
	raw, err := os.ReadFile("testnet.yml")
	if err != nil {
		t.Fatal(err)
	}
	text := uncommentBlock(t, string(raw), "ens")
	const agentLine = "    ens_name: \"${HERMESD_ENS_NAME}\"\n"
	if !strings.Contains(text, agentLine) {
		t.Fatal("testnet.yml's agent has no ens_name line")
	}
	text = strings.Replace(text, agentLine, agentLine+"    records: base-sepolia\n", 1)
	p := filepath.Join(t.TempDir(), "testnet-l2.yml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	setSampleEnv(t)
	t.Setenv("BASE_SEPOLIA_RPC_URL", "https://base-sepolia.example.invalid")
	t.Setenv("DURIN_L2_REGISTRY", "0x00000000000000000000000000000000000000b5")
	c, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	r := c.RecordsOf(&c.Agents[0])
	if r == nil || r.ChainID != 84532 || r.Resolver != "0x00000000000000000000000000000000000000b5" {
		t.Fatalf("records of the agent: %+v, want Base Sepolia (84532) at the L2Registry", r)
	}
}

// TestDrillL2Records: what testnet/drill.sh appends to the drill
// configuration when HERMESD_L2_RECORDS is set (taken from drill.sh
// itself) continues the drill agent's entry and loads.
func TestDrillL2Records(t *testing.T) {
	script, err := os.ReadFile("../testnet/drill.sh")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(script), "<<'YAML'\n")
	snippet, _, ok2 := strings.Cut(rest, "\nYAML\n")
	if !ok || !ok2 {
		t.Fatal("drill.sh has no <<'YAML' ... YAML block")
	}
	raw, err := os.ReadFile("../testnet/hermesd.testnet.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(raw), "    ens_name: \"${HERMESD_ENS_NAME}\"\n") {
		t.Fatal("hermesd.testnet.yml must end with the drill agent's ens_name line: drill.sh appends to that entry")
	}
	p := filepath.Join(t.TempDir(), "hermesd.yml")
	if err := os.WriteFile(p, append(raw, snippet+"\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	setSampleEnv(t)
	t.Setenv("HERMESD_L2_RPC_URL", "https://base-sepolia.example.invalid")
	t.Setenv("HERMESD_L2_CHAIN_ID", "84532")
	t.Setenv("HERMESD_L2_RECORDS", "0x00000000000000000000000000000000000000b5")
	t.Setenv("DEPLOYER_PRIVATE_KEY", "0x"+strings.Repeat("11", 32))
	c, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.RecordsOf(&c.Agents[0]); r == nil || r.ID != "l2" || r.ChainID != 84532 {
		t.Fatalf("the drill agent's records: %+v", r)
	}
}
