package config

import (
	"fmt"
	"net/http"
	"regexp"
	"time"
)

// Seal configures Mysten Seal (threshold identity-based encryption on Sui)
// for snapshots: encryption.format seal writes every snapshot as a Seal
// EncryptedObject, the reference runtime's "seal" cipher, and restores read
// such blobs whatever the format. Encryption needs only the public half
// (package, key servers, threshold); restores ask threshold key servers for
// keys as the requester (sui_key), which the policy must let in.
type Seal struct {
	// PackageID is the policy package's original (first-version) object
	// ID: the namespace of every identity.
	PackageID string `yaml:"package_id"`
	// Policy is the package's seal_approve module: account_based (Seal's
	// patterns::account_based, identity = the requester's address) or
	// allowlist (the reference runtime's agent_seal::allowlist, identity =
	// allowlist object ID ‖ agent).
	Policy    string        `yaml:"policy"`
	Allowlist SealAllowlist `yaml:"allowlist"`
	// Threshold is how many key-server shares (counting weights) a
	// restore needs.
	Threshold  int             `yaml:"threshold"`
	KeyServers []SealKeyServer `yaml:"key_servers"`
	// SuiKey is the requester's Ed25519 Sui key (suiprivkey1… or hex),
	// which signs session keys; it needs no SUI.
	SuiKey SecretRef `yaml:"sui_key"`
	// SessionTTL is how long one signed session key is used, whole minutes
	// from 1 to 30.
	SessionTTL Duration `yaml:"session_ttl"`
	// MaxSize caps a sealed snapshot: Seal encrypts whole buffers, so the
	// tar is held in memory (as v1's).
	MaxSize ByteSize `yaml:"max_size"`
	// RequestTimeout bounds one key request to one key server.
	RequestTimeout Duration `yaml:"request_timeout"`
	// Escrow puts each agent's v3 key, sealed to these key servers and
	// policy, in every head pack (docs/format-v3.md §6.1), so that
	// 'hermesd restore --escrow' recovers a brain with only sui_key.
	Escrow bool `yaml:"escrow"`
}

// SealAllowlist is the shared Allowlist object of policy allowlist.
type SealAllowlist struct {
	ObjectID string `yaml:"object_id"`
	// InitialSharedVersion is the version at which the object was shared
	// (`sui client object ID` shows it); key requests reference the object
	// with it, so no Sui RPC is needed.
	InitialSharedVersion uint64 `yaml:"initial_shared_version"`
	// ID is what follows the allowlist ID in an agent's identity when
	// writing: "name" (the agent's ENS name, or its id) or "token" (its
	// token id in decimal). Restores accept either.
	ID string `yaml:"id"`
}

// SealKeyServer is one key server: its on-chain KeyServer object's ID, URL
// and public key, configured so that no Sui RPC is needed.
type SealKeyServer struct {
	ObjectID string `yaml:"object_id"`
	URL      string `yaml:"url"`
	// PublicKey is the 96-byte BLS12-381 G2 public key in hex.
	PublicKey string `yaml:"public_key"`
	// Weight is how many shares the server holds (default 1).
	Weight int `yaml:"weight"`
	// APIKey and APIKeyHeader are for permissioned servers (Enoki:
	// X-API-Key).
	APIKey       SecretRef `yaml:"api_key"`
	APIKeyHeader string    `yaml:"api_key_header"`
}

// Seal policies.
const (
	SealPolicyAccountBased = "account_based"
	SealPolicyAllowlist    = "allowlist"
)

// maxSealServers bounds the shares of one object (share indices are a u8).
const maxSealServers = 255

var (
	publicKeyRe  = regexp.MustCompile(`^(0x)?[0-9a-fA-F]{192}$`)
	headerNameRe = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

func defaultSeal() Seal {
	return Seal{
		Policy:         SealPolicyAccountBased,
		Allowlist:      SealAllowlist{ID: "name"},
		Threshold:      2,
		SessionTTL:     Duration(10 * time.Minute),
		MaxSize:        64 << 20,
		RequestTimeout: Duration(10 * time.Second),
	}
}

// SealEnabled reports whether the configuration uses Seal: format seal, or a
// seal section to restore Seal blobs with.
func (c *Config) SealEnabled() bool {
	return c.Encryption.Format == "seal" || c.Seal.PackageID != "" || len(c.Seal.KeyServers) > 0 || c.Seal.Escrow
}

func (c *Config) validateSeal(v *validator) {
	if !c.SealEnabled() {
		return
	}
	s := &c.Seal
	if c.Encryption.Format == "seal" && s.PackageID == "" && len(s.KeyServers) == 0 {
		v.add("seal", "required with encryption.format seal (package_id, key_servers, threshold, sui_key)")
		return
	}
	if s.Escrow && c.Encryption.Format != "v3" {
		v.add("seal.escrow", "needs encryption.format v3 (the escrow lives in v3 head packs), not %s", shown(c.Encryption.Format))
	}
	if s.Escrow && s.PackageID == "" && len(s.KeyServers) == 0 {
		v.add("seal.escrow", "needs the seal section: package_id, policy, key_servers, threshold and sui_key")
		return
	}
	switch {
	case s.PackageID == "":
		v.add("seal.package_id", "required: the policy package's first-version object ID")
	case !suiAddrRe.MatchString(s.PackageID):
		v.add("seal.package_id", "%s is not a Sui object ID (0x + 64 hex digits)", shown(s.PackageID))
	}
	switch s.Policy {
	case SealPolicyAccountBased:
		if s.Allowlist.ObjectID != "" {
			v.add("seal.allowlist", "only used with policy allowlist")
		}
	case SealPolicyAllowlist:
		a := &s.Allowlist
		switch {
		case a.ObjectID == "":
			v.add("seal.allowlist.object_id", "required with policy allowlist")
		case !suiAddrRe.MatchString(a.ObjectID):
			v.add("seal.allowlist.object_id", "%s is not a Sui object ID (0x + 64 hex digits)", shown(a.ObjectID))
		}
		if a.InitialSharedVersion == 0 {
			v.add("seal.allowlist.initial_shared_version", "required with policy allowlist (sui client object %s shows it)", a.ObjectID)
		}
	default:
		v.add("seal.policy", "%s is not one of account_based, allowlist", shown(s.Policy))
	}
	switch s.Allowlist.ID {
	case "name", "token":
	default:
		v.add("seal.allowlist.id", "%s is not one of name, token", shown(s.Allowlist.ID))
	}
	if s.Policy == SealPolicyAllowlist && s.Allowlist.ID == "token" {
		for i, a := range c.Agents {
			if a.TokenID == nil {
				v.add(fmt.Sprintf("agents[%d].token_id", i), "required: seal.allowlist.id is token")
			}
		}
	}

	if len(s.KeyServers) == 0 {
		v.add("seal.key_servers", "at least one key server is required")
	}
	seen := map[string]int{}
	total := 0
	for i := range s.KeyServers {
		k := &s.KeyServers[i]
		f := func(name string) string { return fmt.Sprintf("seal.key_servers[%d].%s", i, name) }
		switch {
		case k.ObjectID == "":
			v.add(f("object_id"), "required: the key server's on-chain KeyServer object ID")
		case !suiAddrRe.MatchString(k.ObjectID):
			v.add(f("object_id"), "%s is not a Sui object ID (0x + 64 hex digits)", shown(k.ObjectID))
		default:
			if j, dup := seen[normalHex(k.ObjectID)]; dup {
				v.add(f("object_id"), "also seal.key_servers[%d].object_id (give one server a weight instead)", j)
			}
			seen[normalHex(k.ObjectID)] = i
		}
		if k.URL == "" {
			v.add(f("url"), "required")
		} else if err := checkHTTPURL(k.URL); err != nil {
			v.add(f("url"), "%v", err)
		}
		if k.PublicKey == "" {
			v.add(f("public_key"), "required: the key server's 96-byte public key in hex (from its on-chain object)")
		} else if !publicKeyRe.MatchString(k.PublicKey) {
			v.add(f("public_key"), "not a 96-byte public key in hex (192 hex digits)")
		}
		switch {
		case k.Weight < 0:
			v.add(f("weight"), "must not be negative")
		case k.Weight == 0:
			total++
		default:
			total += k.Weight
		}
		if (k.APIKeyHeader == "") != k.APIKey.IsZero() {
			v.add(f("api_key"), "set both api_key and api_key_header, or neither")
		} else if k.APIKeyHeader != "" && !headerNameRe.MatchString(k.APIKeyHeader) {
			v.add(f("api_key_header"), "%s is not an HTTP header name", shown(k.APIKeyHeader))
		} else if k.APIKeyHeader != "" && http.CanonicalHeaderKey(k.APIKeyHeader) == "Content-Type" {
			v.add(f("api_key_header"), "must not be Content-Type")
		}
	}
	if total > maxSealServers {
		v.add("seal.key_servers", "the weights add up to %d shares, more than %d", total, maxSealServers)
	}
	if len(s.KeyServers) > 0 && (s.Threshold < 1 || s.Threshold > total) {
		v.add("seal.threshold", "%d must be between 1 and the total weight of the key servers, %d", s.Threshold, total)
	}
	if s.SuiKey.IsZero() {
		v.add("seal.sui_key", "required: the requester's Sui key restores ask the key servers with ({file: PATH} or {env: NAME})")
	}
	ttl := s.SessionTTL.D()
	if ttl < time.Minute || ttl > 30*time.Minute || ttl%time.Minute != 0 {
		v.add("seal.session_ttl", "%s must be whole minutes from 1m to 30m (the key servers' limit)", ttl)
	}
	if s.MaxSize <= 0 {
		v.add("seal.max_size", "must be positive")
	}
	if s.RequestTimeout <= 0 {
		v.add("seal.request_timeout", "must be positive")
	}
}

func normalHex(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'F' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
