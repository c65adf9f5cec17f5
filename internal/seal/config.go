package seal

import (
	"fmt"
	"io"
	"log/slog"
	"net/url"
)

// KeyServer is one configured Seal key server. The object ID, URL and public
// key are public (the on-chain KeyServer object's fields, configured here so
// no Sui RPC is needed); the API key is a secret and comes from a file or
// the environment, never from a configuration body.
type KeyServer struct {
	ObjectID  Address
	URL       string // base URL; /v1/fetch_key is appended to its path
	PublicKey PublicKey
	// Weight is how many shares this server holds (default 1): the SDK's
	// weighted servers, where one key unlocks all of a server's shares.
	Weight int
	// APIKeyHeader names the header carrying APIKey for permissioned or
	// committee servers (Enoki uses "X-API-Key"); empty sends none.
	APIKeyHeader string
	APIKey       Secret
}

func (s *KeyServer) weight() int {
	if s.Weight == 0 {
		return 1
	}
	return s.Weight
}

// Config is what encryption needs and the client uses: the identity
// namespace (the policy package's first version), the threshold and the
// key servers. hermesd's YAML maps onto it field by field.
type Config struct {
	// PackageID is the policy package's original (first-version) ID: the
	// namespace of every identity and what session keys are signed for.
	PackageID Address
	// Threshold is the number of shares (counting weights) needed to
	// decrypt, 1 to the total weight.
	Threshold int
	Servers   []KeyServer
}

// Validate checks the configuration for encryption and key fetching.
func (c *Config) Validate() error { return c.validate(true) }

func (c *Config) validate(needURL bool) error {
	if c == nil || len(c.Servers) == 0 {
		return fmt.Errorf("%w: no key servers", ErrInvalidConfig)
	}
	seen := map[Address]bool{}
	total := 0
	for i := range c.Servers {
		s := &c.Servers[i]
		if seen[s.ObjectID] {
			return fmt.Errorf("%w: key server %s listed twice (use weight instead)", ErrInvalidConfig, s.ObjectID)
		}
		seen[s.ObjectID] = true
		if s.Weight < 0 {
			return fmt.Errorf("%w: key server %s: negative weight", ErrInvalidConfig, s.ObjectID)
		}
		if s.PublicKey.IsZero() {
			return fmt.Errorf("%w: key server %s: no public key", ErrInvalidConfig, s.ObjectID)
		}
		if needURL {
			if err := checkServerURL(s.URL); err != nil {
				return fmt.Errorf("%w: key server %s: %w", ErrInvalidConfig, s.ObjectID, err)
			}
		}
		if (s.APIKeyHeader == "") != s.APIKey.IsZero() {
			return fmt.Errorf("%w: key server %s: set both the API key header and the API key, or neither", ErrInvalidConfig, s.ObjectID)
		}
		total += s.weight()
		if total > MaxServices {
			return fmt.Errorf("%w: total weight above %d shares", ErrInvalidConfig, MaxServices)
		}
	}
	if c.Threshold < 1 || c.Threshold > total {
		return fmt.Errorf("%w: threshold %d must be between 1 and the total weight %d", ErrInvalidConfig, c.Threshold, total)
	}
	return nil
}

func checkServerURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL is not echoed: its path or query may hold a secret.
		return fmt.Errorf("URL must be http(s)://host[:port][/path]")
	}
	if u.User != nil {
		return fmt.Errorf("URL must not contain credentials")
	}
	return nil
}

// redactURL keeps only scheme://host[:port] of a URL for error messages: a
// key server's path or query may carry an API key.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	return u.Scheme + "://" + u.Host
}

// Secret is a secret string such as an API key. It prints as [REDACTED] with
// every fmt verb, in logs and in JSON/YAML/text encodings.
type Secret struct{ s string }

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{s: s} }

// Reveal returns the secret for the one place that sends it.
func (s Secret) Reveal() string { return s.s }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.s == "" }

func (s Secret) String() string             { return redacted }
func (s Secret) GoString() string           { return redacted }
func (s Secret) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }
func (s Secret) LogValue() slog.Value       { return slog.StringValue(redacted) }

// MarshalText keeps the secret out of any encoding of a config struct.
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
