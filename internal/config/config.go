// Package config loads hermesd's YAML configuration: defaults, then a strict
// parse (unknown keys are errors) of the file with ${ENV} expansion, then
// validation that names the offending field.
//
// Secrets never live in the file body: the snapshot key, the Ethereum signer
// and the receipt signing key are referenced by file path or by the name of
// an environment variable (a SecretRef), and the publisher token likewise.
// Relative paths in the file are resolved against the file's directory, so a
// config and the brains it names can move together.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hermesd/hermesd/internal/walruscost"
)

// DefaultPath is where hermesd looks for its configuration when neither the
// -config flag nor $HERMESD_CONFIG names one.
const DefaultPath = "/etc/hermesd/hermesd.yml"

// EnvPath names the environment variable that overrides DefaultPath.
const EnvPath = "HERMESD_CONFIG"

// CanonicalENSRegistry is the ENS registry address on mainnet and Sepolia.
const CanonicalENSRegistry = "0x00000000000C2E074eC69A0dFb2997BA6C7d2e1e"

// Config is hermesd's whole configuration.
type Config struct {
	// StateDir holds hermesd's own state: per-agent receipt logs, pending
	// pointers, hash caches, spool files and the process lock. It must not be
	// inside any brain directory.
	StateDir string `yaml:"state_dir"`

	// AllowSymlinks lets state_dir, brain_dir and seed_dir be or pass
	// through symbolic links. Off by default: a link swapped under a
	// running daemon would make it snapshot (and upload) another tree, or
	// write its state somewhere else.
	AllowSymlinks bool `yaml:"allow_symlinks"`

	// AllowUnsafeDirs lets state_dir, brain_dir and seed_dir be system
	// directories (/, /etc, /usr, /var, ... and anything below /etc, /usr
	// (but /usr/local), /proc, /sys, /dev, /boot and the /bin, /sbin and
	// /lib trees; fsys.SystemDir has the list), a brain or seed directory
	// be the home directory of the user hermesd runs as, and a brain or
	// seed directory be writable by everyone (or lie in a directory
	// everyone may write without the sticky bit). Off by default: as root,
	// a brain in /etc snapshots /etc/shadow, and files anyone can plant in
	// a brain end up in its snapshots.
	AllowUnsafeDirs bool `yaml:"allow_unsafe_dirs"`

	// ShutdownTimeout bounds how long a stopping hermesd keeps trying to
	// publish pending pointers (a second signal aborts at once).
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`

	Log        Log        `yaml:"log"`
	HTTP       HTTP       `yaml:"http"`
	Walrus     Walrus     `yaml:"walrus"`
	Chain      Chain      `yaml:"chain"`
	ENS        ENS        `yaml:"ens"`
	Encryption Encryption `yaml:"encryption"`
	Seal       Seal       `yaml:"seal"`
	Repository Repository `yaml:"repository"`
	Receipts   Receipts   `yaml:"receipts"`
	Cost       Cost       `yaml:"cost"`
	// Cluster, when set, makes this hermesd one node of a fleet that
	// shares its agents through etcd; nil runs every agent here.
	Cluster *Cluster `yaml:"cluster"`
	// Defaults apply to every agent that does not override them.
	Defaults AgentDefaults `yaml:"defaults"`
	Agents   []Agent       `yaml:"agents"`

	// Path is the file the configuration was loaded from ("" when parsed
	// from a reader without one).
	Path string `yaml:"-"`
}

// Log configures structured logging.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text or json
}

// HTTP configures the health, metrics and receipt-ingestion server.
type HTTP struct {
	// Listen is host:port; "" disables the server. Only loopback addresses
	// are accepted unless AllowRemote is set.
	Listen      string `yaml:"listen"`
	AllowRemote bool   `yaml:"allow_remote"`
	// Token is the bearer secret every request that changes state (posting
	// receipts, resolving a pointer hold) must carry. Without it those
	// endpoints answer 403 on TCP; the socket, if any, still takes them.
	Token SecretRef `yaml:"token"`
	// Socket is a Unix socket serving the same API, for an agent runtime
	// on the same host or in the same pod; its file mode (SocketMode)
	// decides who may connect, so requests on it need no token.
	Socket     string   `yaml:"socket"`
	SocketMode FileMode `yaml:"socket_mode"`
	// Readiness decides /readyz: "all" (default) is ready only when every
	// agent is (restored, watched, its last snapshot succeeded, nothing
	// held); "any" when at least one is — for a pod where one broken agent
	// must not take the others out of service.
	Readiness string `yaml:"readiness"`
}

// Walrus configures blob storage.
type Walrus struct {
	Publishers  []string `yaml:"publishers"`
	Aggregators []string `yaml:"aggregators"`
	// Epochs is how many epochs ahead each snapshot is paid for.
	Epochs    int  `yaml:"epochs"`
	Permanent bool `yaml:"permanent"`
	// SendObjectTo transfers the created Blob object to this Sui address, so
	// the publisher's operator cannot delete it. Exclusive with Share.
	SendObjectTo string `yaml:"send_object_to"`
	Share        bool   `yaml:"share"`
	// MaxBlobSize is the publisher's body limit; public publishers take
	// 10 MiB. Larger snapshots fail before upload with a clear error.
	MaxBlobSize ByteSize `yaml:"max_blob_size"`
	// Token is a fixed bearer token for an authenticated publisher.
	Token SecretRef `yaml:"token"`
	// JWTSecret is the HS256 secret an authenticated publisher verifies
	// (its --jwt-decode-secret). hermesd then mints a fresh single-use
	// token (exp, iat, jti) for every upload attempt. Exclusive with Token.
	JWTSecret SecretRef `yaml:"jwt_secret"`
	// JWTTTL is how long a minted token is valid.
	JWTTTL Duration `yaml:"jwt_ttl"`
	// EpochDuration is the network's epoch length (mainnet two weeks,
	// testnet one day). With epochs it tells when a snapshot's blob
	// expires; an unchanged brain is snapshotted again before that.
	EpochDuration  Duration `yaml:"epoch_duration"`
	AttemptTimeout Duration `yaml:"attempt_timeout"`
	Timeout        Duration `yaml:"timeout"`
	RetryMax       int      `yaml:"retry_max"`
	// RetryWaitMin and RetryWaitMax bound the exponential backoff between
	// attempts (a server's Retry-After still wins).
	RetryWaitMin Duration `yaml:"retry_wait_min"`
	RetryWaitMax Duration `yaml:"retry_wait_max"`
	// MaxDownloadSize bounds a download whose size is not known in
	// advance (a whole-blob restore): an aggregator sending more is cut
	// off at once.
	MaxDownloadSize ByteSize `yaml:"max_download_size"`
	// Quilts stores small v3 packs as patches of Walrus quilts shared by
	// all agents of the daemon (docs/design.md §11); BatchWindow is how
	// long a quilt gathers packs after its first one.
	Quilts      bool     `yaml:"quilts"`
	BatchWindow Duration `yaml:"batch_window"`
}

// MaxBatchWindow bounds walrus.batch_window: a pack waits that long in
// memory before it is stored.
const MaxBatchWindow = time.Hour

// Chain configures the Ethereum side: RPC, ENS registry and the key that
// signs setText transactions.
type Chain struct {
	RPC string `yaml:"rpc"`
	// ChainID, when set, is checked against eth_chainId at startup so a
	// mainnet key never signs on the wrong network by accident.
	ChainID     uint64    `yaml:"chain_id"`
	ENSRegistry string    `yaml:"ens_registry"`
	Signer      SecretRef `yaml:"signer"`
	TxTimeout   Duration  `yaml:"tx_timeout"`
	// MaxFeeGwei caps the EIP-1559 fee per gas; a pending pointer waits
	// rather than paying more.
	MaxFeeGwei float64 `yaml:"max_fee_gwei"`
	// GasLimit caps the gas of one pointer transaction; more pending
	// pointers than fit are split into several.
	GasLimit     uint64   `yaml:"gas_limit"`
	PollInterval Duration `yaml:"poll_interval"`
	// CheckInterval is how often every published pointer is read back and
	// repaired if it went back to an older snapshot (also after the chain
	// comes back from an outage).
	CheckInterval Duration `yaml:"check_interval"`
	// HeadInterval is how often the chain's head is looked at (one block
	// header): a head that went back or a block that changed hash (a
	// reorg, an older chain restored) has every pointer read back at once
	// instead of at the next check_interval.
	HeadInterval Duration `yaml:"head_interval"`
	// UniversalResolver, when set, is the ENS Universal Resolver every
	// read of a pointer resolves through (docs/design.md §7.1); empty walks
	// the registry (ENSIP-10).
	UniversalResolver string `yaml:"universal_resolver"`
	// GatewayTimeout bounds one CCIP-read gateway request, headers and
	// body.
	GatewayTimeout Duration `yaml:"gateway_timeout"`
	// GatewayMaxBody bounds one CCIP-read gateway answer.
	GatewayMaxBody ByteSize `yaml:"gateway_max_body"`
}

// CCIP-read gateway bounds: the defaults (the ens package's) and the
// largest accepted answer bound (a node takes the answer back as calldata).
const (
	DefaultGatewayTimeout = 10 * time.Second
	DefaultGatewayMaxBody = 1 << 20
	MaxGatewayMaxBody     = 4 << 20
)

// Encryption configures the snapshot format. Snapshots are always
// encrypted; there is no switch to turn that off.
type Encryption struct {
	Key SecretRef `yaml:"key"`
	// Format is how new snapshots are written: "v3" (the content-addressed
	// repository, default), "v2" (the whole brain as one streaming
	// envelope), "v1" (the reference runtime's whole-buffer envelope,
	// capped at V1MaxSize) or "seal" (a Seal EncryptedObject under the seal
	// section's key servers, as the reference runtime's Seal cipher writes;
	// Key is then optional). Every format is read.
	Format    string   `yaml:"format"`
	V1MaxSize ByteSize `yaml:"v1_max_size"`
}

// Repository configures when format v3 writes live objects again
// (docs/design.md §10, Expiry): Walrus blobs expire, so objects a snapshot
// still needs are re-packed before their pack's end epoch, and packs are
// compacted when there are too many of them or they hold mostly dead data.
type Repository struct {
	// ExpiryMargin is how many epochs before its end epoch a pack's live
	// objects are re-packed (at least 1, less than every agent's epochs).
	ExpiryMargin int `yaml:"expiry_margin"`
	// MaxPacks bounds the packs a snapshot needs (each costs a range read
	// on restore); past it the least used ones are merged. At most 512:
	// readers refuse a commit listing more packs than that allows besides
	// the ones its data fills (repo.PackBound).
	MaxPacks int `yaml:"max_packs"`
	// MinLive re-packs a pack once less than this fraction of it is still
	// referenced (0 never does).
	MinLive float64 `yaml:"min_live"`
}

// Cost prices what hermesd spends, for `hermesd cost` and status. What
// was spent is recorded from the publishers' answers and the chain's
// receipts; these turn it into US dollars and price the naive comparison
// (one whole-brain blob and one L1 write per snapshot). A USD price of 0
// is unknown: amounts it would convert are shown in WAL, ETH and
// transactions only.
type Cost struct {
	// WALUSD and ETHUSD are USD per WAL and per ETH (every chain's gas
	// is paid in ETH); SuiTxUSD is USD per Sui transaction.
	WALUSD   float64 `yaml:"wal_usd"`
	ETHUSD   float64 `yaml:"eth_usd"`
	SuiTxUSD float64 `yaml:"sui_tx_usd"`
	// WalrusStoragePrice (FROST per encoded MiB per epoch),
	// WalrusWritePrice (FROST per encoded MiB written) and WalrusShards
	// price the naive way's blobs: `walrus info` shows the network's.
	// WalrusShards is also what the Walrus client computes blob ids over
	// to check every whole blob it reads.
	WalrusStoragePrice uint64 `yaml:"walrus_storage_price"`
	WalrusWritePrice   uint64 `yaml:"walrus_write_price"`
	WalrusShards       int    `yaml:"walrus_shards"`
}

// Receipts configures receipt signing and verification.
type Receipts struct {
	// Signer, when set, signs hermesd's own transition receipt for every
	// snapshot.
	Signer SecretRef `yaml:"signer"`
	// Trusted lists the operator addresses whose signatures verify.
	Trusted []string `yaml:"trusted"`
	// ImportPolicy decides what an import does with receipts that are not
	// signed by a trusted operator: quarantine (default: set aside in a
	// bounded file beside the log, never folded into a snapshot) or reject
	// (the whole input).
	ImportPolicy string `yaml:"import_policy"`
	// QuarantineMaxBytes and QuarantineMaxCount bound each agent's
	// quarantine file; lines beyond them are dropped and counted.
	QuarantineMaxBytes ByteSize `yaml:"quarantine_max_bytes"`
	QuarantineMaxCount int      `yaml:"quarantine_max_count"`
}

// AgentDefaults are per-agent settings with global defaults.
type AgentDefaults struct {
	// Quiet is how long the brain must be still before a snapshot starts.
	Quiet Duration `yaml:"quiet"`
	// MaxLag bounds how long a continuously changing brain waits.
	MaxLag Duration `yaml:"max_lag"`
	// PointerInterval is the minimum time between two ENS writes of one
	// agent; snapshots in between stay pending and the newest one wins.
	PointerInterval Duration `yaml:"pointer_interval"`
	// SnapshotInterval is the minimum time between two uploads of one
	// agent: a brain that changes constantly is uploaded at most this
	// often (every upload is a paid blob). 0 uploads after every quiet
	// period.
	SnapshotInterval Duration `yaml:"snapshot_interval"`
	// Epochs overrides walrus.epochs.
	Epochs int `yaml:"epochs"`
	// Records is the ens.records id of the contract that holds the
	// agents' records, for every agent with an ens_name that does not
	// say otherwise; "" or "l1" is the name's own resolver on L1.
	Records string `yaml:"records"`
}

// Agent is one brain that hermesd keeps alive.
type Agent struct {
	ID       string `yaml:"id"`
	BrainDir string `yaml:"brain_dir"`
	// ENSName is the name whose agent-snapshot record points at the newest
	// snapshot. Without one the agent is snapshotted but never published,
	// and its encryption identity is its id.
	ENSName string `yaml:"ens_name"`
	// TokenID is the agent's iNFT token id, carried in receipts.
	TokenID *uint64 `yaml:"token_id"`
	// Key is the agent's own v3 key or a handover (see AgentKey).
	Key AgentKey `yaml:"key"`
	// SeedDir fills files missing after a restore or on a fresh start; it
	// never overwrites.
	SeedDir string `yaml:"seed_dir"`
	// Records is the ens.records id of the contract that holds this
	// agent's record ("l1": its name's own resolver on L1; "": as
	// defaults.records says).
	Records string `yaml:"records"`

	Quiet            *Duration `yaml:"quiet"`
	MaxLag           *Duration `yaml:"max_lag"`
	PointerInterval  *Duration `yaml:"pointer_interval"`
	SnapshotInterval *Duration `yaml:"snapshot_interval"`
	Epochs           int       `yaml:"epochs"`
	// Hooks override cluster.hooks for this agent (fleet mode only).
	Hooks *Hooks `yaml:"hooks"`
}

// SecretRef names where a secret comes from: a file (mode 0600) or an
// environment variable. It never holds the secret itself.
type SecretRef struct {
	File string `yaml:"file"`
	Env  string `yaml:"env"`
	// Keystore and PasswordFile select a go-ethereum keystore JSON file
	// and the file holding its passphrase (Ethereum signers only).
	Keystore     string `yaml:"keystore"`
	PasswordFile string `yaml:"password_file"`
}

// IsZero reports whether no source is configured.
func (s SecretRef) IsZero() bool {
	return s.File == "" && s.Env == "" && s.Keystore == ""
}

// String describes the source without revealing anything secret.
func (s SecretRef) String() string {
	switch {
	case s.File != "":
		return "file " + s.File
	case s.Env != "":
		return "env $" + s.Env
	case s.Keystore != "":
		return "keystore " + s.Keystore
	}
	return "none"
}

// Default returns the configuration every file is layered on.
func Default() *Config {
	return &Config{
		StateDir:        "/var/lib/hermesd",
		ShutdownTimeout: Duration(30 * time.Second),
		Log:             Log{Level: "info", Format: "text"},
		HTTP:            HTTP{Listen: "127.0.0.1:9797", SocketMode: 0o600, Readiness: "all"},
		Walrus: Walrus{
			Epochs:         5,
			MaxBlobSize:    10 << 20,
			AttemptTimeout: Duration(5 * time.Minute),
			Timeout:        Duration(30 * time.Minute),
			RetryMax:       8,
			RetryWaitMin:   Duration(500 * time.Millisecond),
			RetryWaitMax:   Duration(30 * time.Second),
			JWTTTL:         Duration(5 * time.Minute),
			EpochDuration:  Duration(14 * 24 * time.Hour),
			// A whole-blob (v1/v2) restore of a brain with a 1 GiB
			// memory.db is a 1 GiB download; v3 reads bounded ranges.
			MaxDownloadSize: 16 << 30,
			// 2 m: where quilts fill. Measured by the cost bench
			// (scripts/benchtool/cost; docs/design.md §11), per busy
			// agent-month in a fleet of 100: 30 s cost twice as much, 5 m
			// saved another 12 % and made a lone agent's newest snapshot
			// five minutes older.
			Quilts:      true,
			BatchWindow: Duration(2 * time.Minute),
		},
		Chain: Chain{
			ENSRegistry:    CanonicalENSRegistry,
			TxTimeout:      Duration(5 * time.Minute),
			MaxFeeGwei:     100,
			GasLimit:       1_000_000,
			PollInterval:   Duration(2 * time.Second),
			CheckInterval:  Duration(5 * time.Minute),
			HeadInterval:   Duration(12 * time.Second),
			GatewayTimeout: Duration(DefaultGatewayTimeout),
			GatewayMaxBody: DefaultGatewayMaxBody,
		},
		Encryption: Encryption{Format: "v3", V1MaxSize: 64 << 20},
		Seal:       defaultSeal(),
		Repository: Repository{ExpiryMargin: 1, MaxPacks: 64, MinLive: 0.2},
		Receipts:   Receipts{ImportPolicy: "quarantine", QuarantineMaxBytes: 16 << 20, QuarantineMaxCount: 10_000},
		Cost: Cost{
			WalrusStoragePrice: walruscost.DefaultPrice.Storage,
			WalrusWritePrice:   walruscost.DefaultPrice.Write,
			WalrusShards:       walruscost.DefaultShards,
		},
		Defaults: AgentDefaults{
			Quiet:           Duration(2 * time.Second),
			MaxLag:          Duration(30 * time.Second),
			PointerInterval: Duration(10 * time.Minute),
			// As pointer_interval: a cold restore finds only what the
			// pointer names, so uploading more often buys it nothing and
			// costs a quilt share each (a sixth of the Walrus cost for a
			// busy agent, measured; docs/design.md §11). A change after a
			// quieter spell is not held.
			SnapshotInterval: Duration(10 * time.Minute),
		},
	}
}

// ResolvePath picks the configuration file: the flag value if set, else
// $HERMESD_CONFIG, else DefaultPath.
func ResolvePath(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if p := os.Getenv(EnvPath); p != "" {
		return p
	}
	return DefaultPath
}

// Load reads, parses and validates the file at path.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("config %s does not exist (pass -config FILE or set $%s)", path, EnvPath)
		}
		return nil, fmt.Errorf("open config: %w", err)
	}
	defer f.Close()
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config path: %w", err)
	}
	c, err := Parse(f, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.Path = abs
	c.resolvePaths(filepath.Dir(abs))
	c.fillNodeName()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// maxConfigSize bounds what Parse reads; a config is a few kilobytes.
const maxConfigSize = 4 << 20

// Parse decodes a configuration on top of Default. lookup resolves ${VAR}
// references (os.LookupEnv in production); an unset variable is an error,
// because silently substituting "" has sent backups to the wrong place.
//
// References are expanded after the YAML is parsed, inside scalar values
// only: a variable's value is data, never YAML, so a newline or a colon in
// it cannot add keys to the configuration. Keys are never expanded.
// Parse does not validate and does not resolve relative paths; Load does.
func Parse(r io.Reader, lookup func(string) (string, bool)) (*Config, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(raw) > maxConfigSize {
		return nil, fmt.Errorf("larger than %d bytes", maxConfigSize)
	}
	c := Default()
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return c, nil // an empty file is all defaults
		}
		return nil, fmt.Errorf("parse: %w", scrubYAML(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse: more than one YAML document")
	}
	if err := expandNode(&doc, "", lookup); err != nil {
		return nil, err
	}
	// Unknown keys and values of the wrong kind are reported against the
	// tree as written (its paths and lines), before anything is decoded.
	if err := checkSchema(&doc); err != nil {
		return nil, err
	}
	if err := doc.Decode(c); err != nil {
		return nil, fmt.Errorf("parse: %w", oneLine(scrubYAML(err)))
	}
	c.fillRecordsDefaults()
	c.fillClusterDefaults(&doc)
	return c, nil
}

// expandNode expands ${VAR} in every scalar value below n (not in keys).
// The node keeps its style: the encoder that turns the tree back into
// YAML quotes a value that plain style cannot carry, so whatever a
// variable holds stays one scalar.
func expandNode(n *yaml.Node, path string, lookup func(string) (string, bool)) error {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := expandNode(c, path, lookup); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := expandNode(c, fmt.Sprintf("%s[%d]", path, i), lookup); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := expandNode(n.Content[i+1], join(path, n.Content[i].Value), lookup); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return nil
		}
		v, err := expandEnv(n.Value, lookup)
		if err != nil {
			return schemaErr(path, n.Line, err)
		}
		n.Value = v
		if n.Style == 0 {
			// A plain scalar's type is resolved from its new value (a
			// port, a number, a boolean), as if it had been written so.
			n.Tag = ""
		}
	}
	return nil
}

// expandEnv replaces ${NAME} with the variable's value and $$ with $. A bare
// $NAME is left alone so values such as bcrypt hashes survive.
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", errors.New("unterminated ${")
			}
			name := s[i+2 : i+2+end]
			if !validEnvName(name) {
				return "", fmt.Errorf("invalid variable name ${%s}", name)
			}
			v, ok := lookup(name)
			if !ok {
				return "", fmt.Errorf("environment variable %s is not set", name)
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String(), nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// resolvePaths makes every relative path absolute against base.
func (c *Config) resolvePaths(base string) {
	abs := func(p *string) {
		if *p == "" {
			return
		}
		if strings.HasPrefix(*p, "~/") {
			if home, err := os.UserHomeDir(); err == nil {
				*p = filepath.Join(home, (*p)[2:])
				return
			}
		}
		if !filepath.IsAbs(*p) {
			*p = filepath.Join(base, *p)
		}
		*p = filepath.Clean(*p)
	}
	secret := func(s *SecretRef) {
		abs(&s.File)
		abs(&s.Keystore)
		abs(&s.PasswordFile)
	}
	abs(&c.StateDir)
	abs(&c.HTTP.Socket)
	secret(&c.HTTP.Token)
	secret(&c.Walrus.Token)
	secret(&c.Walrus.JWTSecret)
	secret(&c.Chain.Signer)
	for i := range c.ENS.Records {
		secret(&c.ENS.Records[i].Signer)
	}
	secret(&c.Encryption.Key)
	secret(&c.Receipts.Signer)
	secret(&c.Seal.SuiKey)
	for i := range c.Seal.KeyServers {
		secret(&c.Seal.KeyServers[i].APIKey)
	}
	if cl := c.Cluster; cl != nil {
		abs(&cl.TLS.CAFile)
		abs(&cl.TLS.CertFile)
		abs(&cl.TLS.KeyFile)
		secret(&cl.Password)
	}
	for i := range c.Agents {
		abs(&c.Agents[i].BrainDir)
		abs(&c.Agents[i].SeedDir)
		c.Agents[i].Key.resolvePaths(abs)
	}
}

// Agent returns the agent with the given id.
func (c *Config) Agent(id string) (*Agent, error) {
	for i := range c.Agents {
		if c.Agents[i].ID == id {
			return &c.Agents[i], nil
		}
	}
	ids := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		ids[i] = a.ID
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no agent %q: the configuration has no agents", id)
	}
	return nil, fmt.Errorf("no agent %q (configured: %s)", id, strings.Join(ids, ", "))
}

// Effective settings of an agent, its overrides applied to the defaults.

// QuietPeriod is how long the brain must be still before a snapshot.
func (c *Config) QuietPeriod(a *Agent) time.Duration {
	if a.Quiet != nil {
		return a.Quiet.D()
	}
	return c.Defaults.Quiet.D()
}

// MaxLagOf bounds how long changes may wait for a snapshot.
func (c *Config) MaxLagOf(a *Agent) time.Duration {
	if a.MaxLag != nil {
		return a.MaxLag.D()
	}
	return c.Defaults.MaxLag.D()
}

// PointerIntervalOf is the minimum time between two chain writes.
func (c *Config) PointerIntervalOf(a *Agent) time.Duration {
	if a.PointerInterval != nil {
		return a.PointerInterval.D()
	}
	return c.Defaults.PointerInterval.D()
}

// SnapshotIntervalOf is the minimum time between two uploads.
func (c *Config) SnapshotIntervalOf(a *Agent) time.Duration {
	if a.SnapshotInterval != nil {
		return a.SnapshotInterval.D()
	}
	return c.Defaults.SnapshotInterval.D()
}

// RefreshAfterOf is how old a v1/v2 snapshot may get before an unchanged
// brain is uploaded again, so that the pointer never names an expired
// blob: one epoch before expiry (half an epoch for one-epoch storage).
// Format v3 renews by re-packing instead (Repository), so it is 0 there.
func (c *Config) RefreshAfterOf(a *Agent) time.Duration {
	if c.Encryption.Format == "v3" {
		return 0
	}
	ed := c.Walrus.EpochDuration.D()
	if n := c.EpochsOf(a); n > 1 {
		return time.Duration(n-1) * ed
	}
	return ed / 2
}

// EpochsOf is how many epochs a snapshot of a is stored for.
func (c *Config) EpochsOf(a *Agent) int {
	switch {
	case a.Epochs > 0:
		return a.Epochs
	case c.Defaults.Epochs > 0:
		return c.Defaults.Epochs
	}
	return c.Walrus.Epochs
}
