package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/hermesd/hermesd/internal/ensname"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/redact"
	"github.com/hermesd/hermesd/internal/redstuff"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// FieldError is one validation failure, named by its YAML path.
type FieldError struct {
	Field string // e.g. "agents[1].brain_dir"
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// ErrInvalid is matched (errors.Is) by every validation failure.
var ErrInvalid = errors.New("invalid configuration")

// ValidationError lists every problem found, so one run shows them all.
type ValidationError struct{ Fields []*FieldError }

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		msgs[i] = f.Error()
	}
	return strings.Join(msgs, "; ")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// MaxEpochsAhead is the most epochs Walrus stores a blob ahead.
const MaxEpochsAhead = 53

var (
	agentIDRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	addressRe = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)
	suiAddrRe = regexp.MustCompile(`^0x[0-9a-fA-F]{64}$`)
)

// Validate checks the configuration and normalizes ENS names (ENSIP-15) in
// place, so every later use of Agent.ENSName sees the normalized form.
func (c *Config) Validate() error {
	v := &validator{}
	c.validate(v)
	if len(v.errs) > 0 {
		return &ValidationError{Fields: v.errs}
	}
	return nil
}

type validator struct{ errs []*FieldError }

func (v *validator) add(field, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (c *Config) validate(v *validator) {
	if c.StateDir == "" {
		v.add("state_dir", "required")
	} else if !filepath.IsAbs(c.StateDir) {
		v.add("state_dir", "must be an absolute path (relative paths are resolved against the config file)")
	}

	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.add("log.level", "%s is not one of debug, info, warn, error", shown(c.Log.Level))
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		v.add("log.format", "%s is not one of text, json", shown(c.Log.Format))
	}

	if c.HTTP.Listen != "" {
		if err := CheckListen(c.HTTP.Listen, c.HTTP.AllowRemote); err != nil {
			v.add("http.listen", "%v", err)
		}
	}
	if c.HTTP.Socket != "" && !filepath.IsAbs(c.HTTP.Socket) {
		v.add("http.socket", "must be an absolute path")
	}
	if c.HTTP.SocketMode&0o007 != 0 {
		v.add("http.socket_mode", "%04o lets every local user post to hermesd; give access to a group at most (e.g. 0660)", uint32(c.HTTP.SocketMode))
	}
	switch c.HTTP.Readiness {
	case "all", "any":
	default:
		v.add("http.readiness", "%s is not one of all, any", shown(c.HTTP.Readiness))
	}
	if c.Chain.CheckInterval <= 0 {
		v.add("chain.check_interval", "must be positive")
	}
	if c.Chain.HeadInterval <= 0 {
		v.add("chain.head_interval", "must be positive")
	}
	if c.Walrus.MaxDownloadSize <= 0 {
		v.add("walrus.max_download_size", "must be positive")
	}
	if c.Receipts.QuarantineMaxBytes <= 0 || c.Receipts.QuarantineMaxCount <= 0 {
		v.add("receipts.quarantine_max_bytes", "quarantine_max_bytes and quarantine_max_count must be positive")
	}
	checkPath := func(field, p string) {
		for _, r := range p {
			if r < 0x20 || r == 0x7f {
				v.add(field, "%q contains a control character", p)
				return
			}
		}
	}
	checkPath("state_dir", c.StateDir)
	checkPath("http.socket", c.HTTP.Socket)
	for i := range c.Agents {
		checkPath(fmt.Sprintf("agents[%d].brain_dir", i), c.Agents[i].BrainDir)
		checkPath(fmt.Sprintf("agents[%d].seed_dir", i), c.Agents[i].SeedDir)
	}
	c.validateDirs(v)

	c.validateWalrus(v)
	c.validateChain(v)
	c.validateRecords(v)
	c.validateSecrets(v)
	c.validateSeal(v)
	c.validateRepository(v)
	c.validateCost(v)
	c.validateAgents(v)
	c.validateAgentKeys(v)
	c.validateCluster(v)
}

// validateDirs refuses system directories as state, brain or seed
// directory, and the home directory as a brain or seed directory, unless
// allow_unsafe_dirs (fsys.CheckSystemDir, fsys.CheckNotHome: a path
// property, checked here for every command; the agent and the state
// directory check again when they are used, and for directories anyone
// may write to).
func (c *Config) validateDirs(v *validator) {
	if c.AllowUnsafeDirs {
		return
	}
	check := func(field, p string, checks ...func(string) error) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		for _, f := range checks {
			if err := f(p); err != nil {
				v.add(field, "%v (set allow_unsafe_dirs: true to allow it)", err)
				return
			}
		}
	}
	check("state_dir", c.StateDir, fsys.CheckSystemDir)
	for i := range c.Agents {
		check(fmt.Sprintf("agents[%d].brain_dir", i), c.Agents[i].BrainDir, fsys.CheckSystemDir, fsys.CheckNotHome)
		check(fmt.Sprintf("agents[%d].seed_dir", i), c.Agents[i].SeedDir, fsys.CheckSystemSource, fsys.CheckNotHome)
	}
}

// CheckListen accepts host:port addresses on loopback, or anywhere when
// allowRemote is set.
func CheckListen(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if port == "" {
		return fmt.Errorf("%q has no port", addr)
	}
	if allowRemote {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address; set allow_remote: true to listen beyond this machine", addr)
	}
	return nil
}

// checkHTTPURL accepts an http(s) base URL. Its errors show the URL's
// origin only: its path, query and user part may hold an API key.
func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%s: scheme must be http or https", redact.URL(s))
	}
	if u.Host == "" {
		return fmt.Errorf("%s has no host", redact.URL(s))
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return fmt.Errorf("%s: give the base URL without query or fragment", redact.URL(s))
	}
	return nil
}

func (c *Config) validateWalrus(v *validator) {
	w := &c.Walrus
	for i, p := range w.Publishers {
		if err := checkHTTPURL(p); err != nil {
			v.add(fmt.Sprintf("walrus.publishers[%d]", i), "%v", err)
		}
	}
	for i, a := range w.Aggregators {
		if err := checkHTTPURL(a); err != nil {
			v.add(fmt.Sprintf("walrus.aggregators[%d]", i), "%v", err)
		}
	}
	if len(c.Agents) > 0 {
		if len(w.Publishers) == 0 {
			v.add("walrus.publishers", "at least one publisher is required to store snapshots")
		}
		if len(w.Aggregators) == 0 {
			v.add("walrus.aggregators", "at least one aggregator is required to verify and restore snapshots")
		}
	}
	if w.Epochs < 1 || w.Epochs > MaxEpochsAhead {
		v.add("walrus.epochs", "%d is outside 1..%d", w.Epochs, MaxEpochsAhead)
	}
	if w.Share && w.SendObjectTo != "" {
		v.add("walrus.share", "share and send_object_to are mutually exclusive (publishers reject both)")
	}
	if w.SendObjectTo != "" && !suiAddrRe.MatchString(w.SendObjectTo) {
		v.add("walrus.send_object_to", "%s is not a Sui address (0x + 64 hex digits)", shown(w.SendObjectTo))
	}
	if w.EpochDuration <= 0 {
		v.add("walrus.epoch_duration", "must be positive")
	}
	if w.BatchWindow < 0 || w.BatchWindow.D() > MaxBatchWindow {
		v.add("walrus.batch_window", "%s is outside 0 … %s", w.BatchWindow, Duration(MaxBatchWindow))
	}
	if w.JWTTTL <= 0 {
		v.add("walrus.jwt_ttl", "must be positive")
	}
	if !w.Token.IsZero() && !w.JWTSecret.IsZero() {
		v.add("walrus.jwt_secret", "token and jwt_secret are exclusive")
	}
	if w.MaxBlobSize <= 0 {
		v.add("walrus.max_blob_size", "must be positive")
	}
	if w.AttemptTimeout <= 0 {
		v.add("walrus.attempt_timeout", "must be positive")
	}
	if w.Timeout <= 0 {
		v.add("walrus.timeout", "must be positive")
	}
	if w.RetryMax < 0 {
		v.add("walrus.retry_max", "must not be negative")
	}
	if w.RetryWaitMin <= 0 || w.RetryWaitMax < w.RetryWaitMin {
		v.add("walrus.retry_wait_max", "retry_wait_min must be positive and retry_wait_max at least as long")
	}
}

func (c *Config) validateChain(v *validator) {
	ch := &c.Chain
	publishing := false
	for _, a := range c.Agents {
		if a.ENSName != "" {
			publishing = true
		}
	}
	if ch.RPC != "" {
		checkRPC(v, "chain.rpc", ch.RPC)
	} else if publishing {
		v.add("chain.rpc", "required when an agent has an ens_name")
	}
	if !addressRe.MatchString(ch.ENSRegistry) {
		v.add("chain.ens_registry", "%s is not an address (0x + 40 hex digits)", shown(ch.ENSRegistry))
	}
	if ch.TxTimeout <= 0 {
		v.add("chain.tx_timeout", "must be positive")
	}
	if ch.MaxFeeGwei <= 0 {
		v.add("chain.max_fee_gwei", "must be positive")
	}
	if ch.GasLimit < 50_000 {
		v.add("chain.gas_limit", "%d is too low for a setText transaction (at least 50000)", ch.GasLimit)
	}
	if ch.PollInterval <= 0 {
		v.add("chain.poll_interval", "must be positive")
	}
	if ch.UniversalResolver != "" && !addressRe.MatchString(ch.UniversalResolver) {
		v.add("chain.universal_resolver", "%s is not an address (0x + 40 hex digits)", shown(ch.UniversalResolver))
	}
	if ch.GatewayTimeout <= 0 {
		v.add("chain.gateway_timeout", "must be positive")
	}
	if ch.GatewayMaxBody < 1<<10 || ch.GatewayMaxBody > MaxGatewayMaxBody {
		v.add("chain.gateway_max_body", "%d bytes is outside 1KiB..4MiB", int64(ch.GatewayMaxBody))
	}
}

// checkID checks the id of list[i] (agents, ens.records): required, 1-64
// characters of the id alphabet, unique in the list (seen maps each id
// checked so far to its index).
func checkID(v *validator, list string, i int, id string, seen map[string]int) {
	field := fmt.Sprintf("%s[%d].id", list, i)
	switch {
	case id == "":
		v.add(field, "required")
	case !agentIDRe.MatchString(id):
		v.add(field, "%s must be 1-64 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit", shown(id))
	default:
		if j, dup := seen[id]; dup {
			v.add(field, "%q is also %s[%d].id", id, list, j)
		}
		seen[id] = i
	}
}

// checkRPC checks a JSON-RPC URL: http, https, ws or wss with a host.
func checkRPC(v *validator, field, rpc string) {
	u, err := url.Parse(rpc)
	if err != nil || u.Host == "" {
		v.add(field, "%s is not a URL with a host", redact.URL(rpc))
		return
	}
	switch u.Scheme {
	case "http", "https", "ws", "wss":
	default:
		v.add(field, "%s: scheme must be http, https, ws or wss", redact.URL(rpc))
	}
}

func (c *Config) validateSecrets(v *validator) {
	checkRef := func(field string, s SecretRef, keystoreOK bool) {
		n := 0
		for _, set := range []bool{s.File != "", s.Env != "", s.Keystore != ""} {
			if set {
				n++
			}
		}
		if n > 1 {
			v.add(field, "give exactly one of file, env or keystore")
		}
		if s.Keystore != "" && !keystoreOK {
			v.add(field+".keystore", "not supported here; use file or env")
		}
		if s.Keystore != "" && s.PasswordFile == "" {
			v.add(field+".password_file", "required with keystore")
		}
		if s.PasswordFile != "" && s.Keystore == "" {
			v.add(field+".password_file", "only used with keystore")
		}
		if s.Env != "" && !validEnvName(s.Env) {
			v.add(field+".env", "%s is not an environment variable name (give the variable's name, not its value)", shown(s.Env))
		}
	}
	checkRef("http.token", c.HTTP.Token, false)
	checkRef("walrus.token", c.Walrus.Token, false)
	checkRef("walrus.jwt_secret", c.Walrus.JWTSecret, false)
	checkRef("chain.signer", c.Chain.Signer, true)
	for i := range c.ENS.Records {
		checkRef(fmt.Sprintf("ens.records[%d].signer", i), c.ENS.Records[i].Signer, true)
	}
	checkRef("encryption.key", c.Encryption.Key, false)
	checkRef("receipts.signer", c.Receipts.Signer, true)
	checkRef("seal.sui_key", c.Seal.SuiKey, false)
	if c.Cluster != nil {
		checkRef("cluster.password", c.Cluster.Password, false)
	}
	for i := range c.Seal.KeyServers {
		checkRef(fmt.Sprintf("seal.key_servers[%d].api_key", i), c.Seal.KeyServers[i].APIKey, false)
	}

	// Format seal needs no key of its own: its keys come from the key
	// servers (a key, if set, still opens older v1/v2 snapshots).
	if len(c.Agents) > 0 && c.Encryption.Key.IsZero() && c.Encryption.Format != "seal" {
		v.add("encryption.key", "required: snapshots are always encrypted (create a key with 'hermesd keygen -o FILE')")
	}
	switch c.Encryption.Format {
	case "v1", "v2", "v3", "seal":
	default:
		v.add("encryption.format", "%s is not one of v3, v2, v1, seal", shown(c.Encryption.Format))
	}
	if c.Encryption.V1MaxSize <= 0 {
		v.add("encryption.v1_max_size", "must be positive")
	}
	for i, t := range c.Receipts.Trusted {
		if !addressRe.MatchString(t) {
			v.add(fmt.Sprintf("receipts.trusted[%d]", i), "%s is not an address (0x + 40 hex digits)", shown(t))
		}
	}
	switch c.Receipts.ImportPolicy {
	case "quarantine", "reject":
	case "keep":
		v.add("receipts.import_policy", "keep was removed: receipts not signed by a trusted operator are never folded into snapshots (use quarantine or reject)")
	default:
		v.add("receipts.import_policy", "%s is not one of quarantine, reject", shown(c.Receipts.ImportPolicy))
	}
}

// minPackSize is the smallest blob size limit format v3 can cut packs to
// (repo.MinPackSize: a 1 MiB chunk and its index must fit).
const minPackSize = 2 << 20

// CheckSigners reports the first of agents (every configured agent when
// none is given) whose pointer no configured key can write: chain.signer,
// or the signer of the ens.records target the agent writes to. Validate
// does not ask for one: restoring, drilling and reading a pointer need the
// snapshot key and an RPC, never the key that owns the names, so only the
// commands that write a pointer call this.
func (c *Config) CheckSigners(agents ...*Agent) error {
	if len(agents) == 0 {
		for i := range c.Agents {
			agents = append(agents, &c.Agents[i])
		}
	}
	v := &validator{}
	for _, a := range agents {
		if a.ENSName == "" || !c.Chain.Signer.IsZero() {
			continue
		}
		if r := c.RecordsOf(a); r == nil {
			v.add("chain.signer", "required to write agent %s's pointer (%s): the key that owns the name", a.ID, a.ENSName)
			break
		} else if r.Signer.IsZero() {
			v.add("chain.signer", "required to write agent %s's pointer (%s): ens.records %s has no signer of its own", a.ID, a.ENSName, r.ID)
			break
		}
	}
	if len(v.errs) > 0 {
		return &ValidationError{Fields: v.errs}
	}
	return nil
}

func (c *Config) validateCost(v *validator) {
	k := &c.Cost
	for _, p := range []struct {
		field string
		v     float64
	}{{"cost.wal_usd", k.WALUSD}, {"cost.eth_usd", k.ETHUSD}, {"cost.sui_tx_usd", k.SuiTxUSD}} {
		if p.v < 0 || math.IsNaN(p.v) || math.IsInf(p.v, 0) {
			v.add(p.field, "%v is not a price (0 means unknown)", p.v)
		}
	}
	if err := redstuff.CheckShards(k.WalrusShards); err != nil {
		v.add("cost.walrus_shards", "%d: RS2 encodes over 4..%d shards (Walrus's blob ids are computed over them)", k.WalrusShards, walruscost.MaxShards)
	}
}

// maxPacks bounds repository.max_packs (repo.MaxWriterPacks: readers
// refuse a commit that lists more packs than that plus what its data
// fills, repo.PackBound).
const maxPacks = 512

func (c *Config) validateRepository(v *validator) {
	r := &c.Repository
	if c.Encryption.Format == "v3" && c.Walrus.MaxBlobSize > 0 && c.Walrus.MaxBlobSize < minPackSize {
		v.add("walrus.max_blob_size", "%s is below the %s format v3 packs need", c.Walrus.MaxBlobSize, ByteSize(minPackSize))
	}
	if r.ExpiryMargin < 1 {
		v.add("repository.expiry_margin", "must be at least 1 epoch (a pack would be kept until it is gone)")
	}
	for i := range c.Agents {
		// A pack is re-packed once it may be within the margin of its end:
		// the epoch an upload reports may end right after it, so a pack
		// stored for margin+1 epochs would be due again at once.
		if n := c.EpochsOf(&c.Agents[i]); c.Encryption.Format == "v3" && r.ExpiryMargin+2 > n {
			v.add("repository.expiry_margin", "%d leaves no time for agent %s, whose packs are stored for %d epochs (at most epochs-2)",
				r.ExpiryMargin, c.Agents[i].ID, n)
			break
		}
	}
	if r.MaxPacks < 4 || r.MaxPacks > maxPacks {
		v.add("repository.max_packs", "%d is outside 4..%d (readers refuse a commit listing far more packs than its data needs)", r.MaxPacks, maxPacks)
	}
	if r.MinLive < 0 || r.MinLive >= 1 {
		v.add("repository.min_live", "%v is outside 0 (never) .. below 1", r.MinLive)
	}
}

func (c *Config) validateAgents(v *validator) {
	if c.Defaults.MaxLag < c.Defaults.Quiet {
		v.add("defaults.max_lag", "must not be shorter than defaults.quiet")
	}
	if c.Defaults.Epochs < 0 || c.Defaults.Epochs > MaxEpochsAhead {
		v.add("defaults.epochs", "%d is outside 0..%d", c.Defaults.Epochs, MaxEpochsAhead)
	}
	ids := map[string]int{}
	names := map[string]int{}
	tokens := map[uint64]int{}
	for i := range c.Agents {
		a := &c.Agents[i]
		f := func(name string) string { return fmt.Sprintf("agents[%d].%s", i, name) }
		checkID(v, "agents", i, a.ID, ids)
		if a.BrainDir == "" {
			v.add(f("brain_dir"), "required")
		} else if !filepath.IsAbs(a.BrainDir) {
			v.add(f("brain_dir"), "must be an absolute path")
		} else if c.StateDir != "" && (within(a.BrainDir, c.StateDir) || within(c.StateDir, a.BrainDir)) {
			v.add(f("brain_dir"), "%s and state_dir %s must not contain each other", a.BrainDir, c.StateDir)
		}
		if a.SeedDir != "" && a.BrainDir != "" && (within(a.SeedDir, a.BrainDir) || within(a.BrainDir, a.SeedDir)) {
			v.add(f("seed_dir"), "must not be inside the brain directory or contain it")
		}
		if a.ENSName != "" {
			n, err := ensname.Normalize(a.ENSName)
			if err != nil {
				v.add(f("ens_name"), "not a valid ENS name: %v", err)
			} else if strings.Count(n, ".") < 1 {
				v.add(f("ens_name"), "%q needs at least two labels (e.g. agent.eth)", a.ENSName)
			} else {
				a.ENSName = n
				if j, dup := names[n]; dup {
					v.add(f("ens_name"), "%q is also agents[%d].ens_name", n, j)
				}
				names[n] = i
			}
		}
		if a.TokenID != nil {
			t := *a.TokenID
			if j, dup := tokens[t]; dup {
				// One iNFT, one agent: receipts of a token go to the
				// agent holding it (docs/design.md §8).
				v.add(f("token_id"), "%d is also agents[%d].token_id", t, j)
			}
			tokens[t] = i
			if !TokenIDExact(t) {
				v.add(f("token_id"), "%d is not exactly representable as a JavaScript number (it reads as %.0f): the agent runtime and every JavaScript verifier would file hermesd's receipts under another token and recover another signer, and hermesd refuses such receipts itself", t, float64(t))
			}
		}
		if a.Epochs < 0 || a.Epochs > MaxEpochsAhead {
			v.add(f("epochs"), "%d is outside 0..%d", a.Epochs, MaxEpochsAhead)
		}
		if c.MaxLagOf(a) < c.QuietPeriod(a) {
			v.add(f("max_lag"), "must not be shorter than the quiet period")
		}
		for j := 0; j < i; j++ {
			b := &c.Agents[j]
			if a.BrainDir != "" && b.BrainDir != "" && (within(a.BrainDir, b.BrainDir) || within(b.BrainDir, a.BrainDir)) {
				v.add(f("brain_dir"), "overlaps agents[%d].brain_dir %s", j, b.BrainDir)
			}
		}
	}
}

// MaxSafeTokenID is JavaScript's Number.MAX_SAFE_INTEGER, 2^53 − 1.
const MaxSafeTokenID = 1<<53 - 1

// TokenIDExact reports whether a JavaScript number holds t exactly (every
// uint64 is below 10^21, so JavaScript prints an exact one back digit for
// digit): true up to 2^53 − 1, and beyond for multiples of the float64
// spacing there.
func TokenIDExact(t uint64) bool {
	f := float64(t)
	return t <= MaxSafeTokenID || f < 1<<64 && uint64(f) == t
}

// Warnings lists what the configuration allows but an operator should
// know; Load's caller shows them (hermesd run logs them at start).
func (c *Config) Warnings() []string {
	var w []string
	for i := range c.Agents {
		a := &c.Agents[i]
		if a.TokenID != nil && *a.TokenID > MaxSafeTokenID && TokenIDExact(*a.TokenID) {
			w = append(w, fmt.Sprintf("agents[%d].token_id: %d is above 2^53 - 1: JavaScript holds it exactly, but not its neighbours (%d reads as %.0f), so check every JavaScript tool that handles it as a number",
				i, *a.TokenID, *a.TokenID+1, float64(*a.TokenID+1)))
		}
	}
	return w
}

// within reports whether path p is dir or inside it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Identity is the agent identity bound into every v2 envelope: its
// normalized ENS name, or its id when it has none.
func (a *Agent) Identity() string {
	if a.ENSName != "" {
		return a.ENSName
	}
	return a.ID
}
