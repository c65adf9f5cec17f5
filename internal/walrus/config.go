package walrus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/redact"
	"github.com/hermesd/hermesd/internal/redstuff"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// Defaults for the zero fields of Config.
const (
	// DefaultMaxBlobSize is the body limit of public publishers (10 MiB).
	DefaultMaxBlobSize int64 = 10 << 20
	// DefaultEpochs is how many epochs ahead a blob is stored for when
	// neither Config.Epochs nor WithEpochs says.
	DefaultEpochs = 5
	// MaxEpochsAhead is the most epochs mainnet and testnet store ahead.
	MaxEpochsAhead = 53

	// DefaultAttemptTimeout bounds how long one attempt waits for the server
	// to start answering once the request is sent: a publisher encodes the
	// blob and runs two Sui transactions in that window.
	DefaultAttemptTimeout = 5 * time.Minute
	// DefaultIdleTimeout bounds a stall while body bytes are moving, in
	// either direction. A transfer that makes progress never hits it.
	DefaultIdleTimeout = time.Minute
	// DefaultTimeout bounds one whole operation, all attempts included.
	DefaultTimeout = 30 * time.Minute

	// DefaultMaxReadSize bounds a read whose caller gave neither an
	// expected nor a maximum size: above the protocol's largest blob
	// (about 13.6 GiB), far below what a hostile endless body would fill.
	DefaultMaxReadSize int64 = 16 << 30

	// MaxRedirects is how many redirects a read follows.
	MaxRedirects = 5

	DefaultRetryMax      = 8
	DefaultRetryWaitMin  = 500 * time.Millisecond
	DefaultRetryWaitMax  = 30 * time.Second
	DefaultRetryAfterMax = time.Minute
)

// Config configures a Client. Zero fields take the defaults above.
type Config struct {
	// Publishers and Aggregators are base URLs (http or https, no query),
	// tried in order and rotated through on retryable failures. A path
	// prefix and userinfo are allowed and may hold an API key: only
	// scheme://host[:port] of them ever appears in errors, logs and
	// results.
	Publishers  []string
	Aggregators []string

	// Epochs is how many epochs ahead a blob is stored for (1..53).
	Epochs int
	// Permanent asks for a non-deletable blob. Blobs are deletable by
	// default, and a public publisher keeps the Blob object, so without
	// Permanent or SendObjectTo its operator could delete the blob.
	Permanent bool
	// SendObjectTo transfers the new Blob object to this Sui address
	// (0x + 64 hex digits). Exclusive with Share.
	SendObjectTo string
	// Share wraps the blob in a shared object anyone can fund and extend.
	Share bool

	// BearerToken is sent as "Authorization: Bearer" to publishers that
	// require authentication. It is never logged. TokenSource, when set,
	// is called before every store attempt instead (publisher JWTs are
	// single-use, so a daemon mints one per attempt).
	BearerToken string
	TokenSource func(ctx context.Context) (string, error)

	// MaxBlobSize is the largest body Store sends; bigger bodies fail before
	// any request with ErrTooLarge.
	MaxBlobSize int64
	// MaxReadSize bounds a read given neither WithExpectedSize nor
	// WithMaxSize (see DefaultMaxReadSize); a larger answer fails with
	// ErrBodyTooLarge.
	MaxReadSize int64

	// Shards and Price are the network's shard count and prices (zero:
	// walruscost.DefaultShards, mainnet's and testnet's, and
	// DefaultPrice). The blob ids of whole-blob reads are computed and
	// checked over Shards; what a store answer reports it cost is held to
	// what Walrus's formula allows for the bytes sent at them
	// (StoreResult.Clamped).
	Shards int
	Price  walruscost.Price
	// ScratchDir, when set, is where the id of a large blob keeps its
	// working columns (about half the blob) instead of memory
	// (redstuff.Options).
	ScratchDir string

	AttemptTimeout time.Duration // see DefaultAttemptTimeout
	IdleTimeout    time.Duration // see DefaultIdleTimeout
	Timeout        time.Duration // see DefaultTimeout

	// RetryMax is the number of retries after the first attempt; a negative
	// value disables retries.
	RetryMax      int
	RetryWaitMin  time.Duration
	RetryWaitMax  time.Duration
	RetryAfterMax time.Duration // cap on a server's Retry-After

	// Logger receives retry warnings and per-operation debug lines; nil
	// discards them.
	Logger *slog.Logger

	// OnAttempt, when set, is called after every HTTP attempt (for metrics).
	// It runs on the operation's goroutine and must not block.
	OnAttempt func(Attempt)

	// Recovered, when set, returns a channel that is closed when the store
	// is next seen to answer again after an outage (the daemon's prober,
	// which probes while attempts fail). A retry waiting out its backoff
	// stops waiting then, so an outage of minutes does not leave an
	// operation waiting a backoff of many seconds more; a wait the server
	// asked for (Retry-After) is kept.
	Recovered func() <-chan struct{}

	// WriteGate, when set, is asked before every store attempt and before
	// every chunk of its body is handed to the transport: its error (a
	// fleet node that may not write now) fails the store at once, and an
	// attempt under way is aborted mid-body, so nothing more is stored.
	WriteGate func() error

	// Transport replaces the HTTP transport (tests). The client wraps it to
	// enforce AttemptTimeout and IdleTimeout.
	Transport http.RoundTripper
}

// Attempt describes one finished HTTP attempt, for metrics.
type Attempt struct {
	Op       string // "store" or "read"
	Endpoint string // scheme://host[:port] of the endpoint
	N        int    // 1 for the first attempt of an operation
	Status   int    // HTTP status, 0 when no response arrived
	Err      error  // nil when the attempt succeeded
	Bytes    int64  // body bytes sent (store) or received (read)
	Duration time.Duration
	Retry    bool          // whether another attempt follows
	Backoff  time.Duration // wait before that attempt
}

// ErrConfig marks configuration mistakes found by New.
var ErrConfig = errors.New("walrus: invalid configuration")

var suiAddressRe = regexp.MustCompile(`^0x[0-9a-fA-F]{64}$`)

func (c Config) withDefaults() Config {
	if c.Epochs == 0 {
		c.Epochs = DefaultEpochs
	}
	if c.MaxBlobSize == 0 {
		c.MaxBlobSize = DefaultMaxBlobSize
	}
	if c.Shards == 0 {
		c.Shards = redstuff.DefaultShards
	}
	if c.MaxReadSize == 0 {
		c.MaxReadSize = DefaultMaxReadSize
	}
	if c.Price == (walruscost.Price{}) {
		c.Price = walruscost.DefaultPrice
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	switch {
	case c.RetryMax == 0:
		c.RetryMax = DefaultRetryMax
	case c.RetryMax < 0:
		c.RetryMax = 0
	}
	if c.RetryWaitMin == 0 {
		c.RetryWaitMin = DefaultRetryWaitMin
	}
	if c.RetryWaitMax == 0 {
		c.RetryWaitMax = DefaultRetryWaitMax
	}
	if c.RetryWaitMax < c.RetryWaitMin {
		c.RetryWaitMax = c.RetryWaitMin
	}
	if c.RetryAfterMax == 0 {
		c.RetryAfterMax = DefaultRetryAfterMax
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	for i, p := range c.Publishers {
		if err := checkBaseURL(p); err != nil {
			bad("publishers[%d]: %v", i, err)
		}
	}
	for i, a := range c.Aggregators {
		if err := checkBaseURL(a); err != nil {
			bad("aggregators[%d]: %v", i, err)
		}
	}
	if len(c.Publishers) == 0 && len(c.Aggregators) == 0 {
		bad("no publishers and no aggregators")
	}
	if err := checkEpochs(c.Epochs); err != nil {
		bad("epochs: %v", err)
	}
	if err := redstuff.CheckShards(c.Shards); err != nil {
		bad("shards: %v", err)
	}
	if c.SendObjectTo != "" && !suiAddressRe.MatchString(c.SendObjectTo) {
		bad("send_object_to: %q is not a Sui address (0x + 64 hex digits)", c.SendObjectTo)
	}
	if c.Share && c.SendObjectTo != "" {
		bad("share and send_object_to are mutually exclusive (publishers reject both)")
	}
	if c.MaxBlobSize < 0 {
		bad("max_blob_size: must not be negative")
	}
	if c.MaxReadSize < 0 {
		bad("max_read_size: must not be negative")
	}
	if c.AttemptTimeout < 0 || c.IdleTimeout < 0 || c.Timeout < 0 {
		bad("timeouts must not be negative")
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
}

func checkEpochs(n int) error {
	if n < 1 || n > MaxEpochsAhead {
		return fmt.Errorf("%d is outside 1..%d", n, MaxEpochsAhead)
	}
	return nil
}

// checkBaseURL accepts http(s) URLs with a host and no query or fragment.
// Its errors name only the origin: the rest may be an API key.
func checkBaseURL(s string) error {
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

// normalizeBase strips trailing slashes so paths can be appended.
func normalizeBase(s string) string { return strings.TrimRight(s, "/") }
