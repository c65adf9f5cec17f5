package seal

import (
	"bytes"
	"container/list"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hermesd/hermesd/internal/backoff"
)

// The headers a Seal key server requires: Client-Sdk-Version must parse as
// semver. A Client-Sdk-Type the server does not know ("go") skips its
// minimum-version check for the official SDKs.
const (
	DefaultSDKVersion = "1.0.0"
	SDKType           = "go"
)

// Defaults of ClientOptions.
const (
	DefaultRequestTimeout   = 10 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultCacheEntries     = 1024
	maxErrorBody            = 16 << 10
	maxServerMessage        = 200
)

// RetryPolicy says how a key request to one server is retried.
type RetryPolicy struct {
	// Attempts bounds tries (the first included) on transport errors, 429
	// and 5xx answers; default 4. Delays double from BaseDelay (default
	// 250 ms) up to MaxDelay (default 4 s), each jittered down by up to
	// half (internal/backoff); a Retry-After in seconds is honoured up to
	// MaxDelay.
	Attempts  int
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// InvalidParameterAttempts bounds tries on 403 InvalidParameter, which
	// usually means the server's full node has not indexed a new object
	// yet; default 3, InvalidParameterDelay apart (default 2 s). Every
	// other 4xx is final.
	InvalidParameterAttempts int
	InvalidParameterDelay    time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts <= 0 {
		p.Attempts = 4
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 250 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 4 * time.Second
	}
	if p.InvalidParameterAttempts <= 0 {
		p.InvalidParameterAttempts = 3
	}
	if p.InvalidParameterDelay <= 0 {
		p.InvalidParameterDelay = 2 * time.Second
	}
	return p
}

// ClientOptions tunes NewClient. The zero value is usable.
type ClientOptions struct {
	HTTPClient       *http.Client  // default: its own transport, redirects not followed
	RequestTimeout   time.Duration // per attempt; default 10 s
	SDKVersion       string        // Client-Sdk-Version; default DefaultSDKVersion
	MaxResponseBytes int64         // bound on a 200 answer; default 1 MiB
	Retry            RetryPolicy
	CacheEntries     int // verified (identity, server) keys kept; default 1024
	Logger           *slog.Logger
	Now              func() time.Time
}

// Client fetches user secret keys from Seal key servers and decrypts. It is
// safe for concurrent use. Fetched keys are verified against the servers'
// public keys and cached per (identity, server), so decrypting many objects
// of one identity asks the servers once.
type Client struct {
	cfg     Config
	servers map[Address]*KeyServer
	http    *http.Client
	opts    ClientOptions
	log     *slog.Logger

	mu    sync.Mutex
	cache map[string]*list.Element
	lru   *list.List
}

type cacheEntry struct {
	key string
	usk *UserSecretKey
}

// NewClient validates cfg and returns a client for its key servers.
func NewClient(cfg Config, opts *ClientOptions) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("seal client: %w", err)
	}
	o := ClientOptions{}
	if opts != nil {
		o = *opts
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			// A redirect would carry the request, and any API key header,
			// to a host the configuration does not name: answer it as an
			// error instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.SDKVersion == "" {
		o.SDKVersion = DefaultSDKVersion
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.CacheEntries <= 0 {
		o.CacheEntries = DefaultCacheEntries
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Retry = o.Retry.withDefaults()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{cfg: cfg, http: o.HTTPClient, opts: o, log: log, servers: map[Address]*KeyServer{},
		cache: map[string]*list.Element{}, lru: list.New()}
	c.cfg.Servers = append([]KeyServer(nil), cfg.Servers...)
	for i := range c.cfg.Servers {
		c.servers[c.cfg.Servers[i].ObjectID] = &c.cfg.Servers[i]
	}
	return c, nil
}

// Config returns the client's configuration.
func (c *Client) Config() Config { return c.cfg }

// Decrypt parses an EncryptedObject, fetches keys for its identity from
// enough of its key servers (those configured here) under the session, and
// decrypts it.
func (c *Client) Decrypt(ctx context.Context, data []byte, sk *SessionKey, ap Approve, opts *DecryptOptions) ([]byte, error) {
	o, err := ParseEncryptedObject(data)
	if err != nil {
		return nil, err
	}
	return c.DecryptObject(ctx, o, sk, ap, opts)
}

// DecryptObject is Decrypt for a parsed object.
func (c *Client) DecryptObject(ctx context.Context, o *EncryptedObject, sk *SessionKey, ap Approve, opts *DecryptOptions) ([]byte, error) {
	if o.PackageID != sk.PackageID() {
		return nil, fmt.Errorf("decrypt: %w: the object is for package %s, the session for %s", ErrInvalidConfig, o.PackageID, sk.PackageID())
	}
	ptb, err := ap.BuildPTB(o.PackageID, [][]byte{o.ID})
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}
	fullID := o.FullID()
	weights := o.Weights()
	if err := c.fetch(ctx, sk, ptb.MarshalBCS(), [][]byte{fullID}, weights, int(o.Threshold)); err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}
	keys := map[Address]*UserSecretKey{}
	pks := map[Address]PublicKey{}
	for id := range weights {
		if s, ok := c.servers[id]; ok {
			pks[id] = s.PublicKey
			if k := c.cached(fullID, id); k != nil {
				keys[id] = k
			}
		}
	}
	return decryptVerified(o, keys, pks, opts)
}

// FetchKeys fetches and caches keys for inner IDs of the session's package
// until servers of total configured weight threshold answered for all IDs
// (the SDK's fetchKeys). Use it to warm the cache for many objects.
func (c *Client) FetchKeys(ctx context.Context, sk *SessionKey, ap Approve, ids [][]byte, threshold int) error {
	ptb, err := ap.BuildPTB(sk.PackageID(), ids)
	if err != nil {
		return fmt.Errorf("fetch keys: %w", err)
	}
	weights := map[Address]int{}
	for i := range c.cfg.Servers {
		weights[c.cfg.Servers[i].ObjectID] = c.cfg.Servers[i].weight()
	}
	fullIDs := make([][]byte, len(ids))
	for i, id := range ids {
		fullIDs[i] = FullID(sk.PackageID(), id)
	}
	if err := c.fetch(ctx, sk, ptb.MarshalBCS(), fullIDs, weights, threshold); err != nil {
		return fmt.Errorf("fetch keys: %w", err)
	}
	return nil
}

// fetch asks the servers in weights that lack a cached key for every full ID,
// all at once, and returns as soon as the answered weight reaches threshold.
// It cancels the others then, or as soon as the threshold is out of reach.
func (c *Client) fetch(ctx context.Context, sk *SessionKey, ptb []byte, fullIDs [][]byte, weights map[Address]int, threshold int) error {
	if threshold < 1 {
		return fmt.Errorf("%w: threshold %d", ErrInvalidConfig, threshold)
	}
	if sk.Expired(c.opts.Now()) {
		return ErrSessionExpired
	}
	done, reachable := 0, 0
	var pending []Address
	for _, id := range sortedAddresses(weights) {
		if _, ok := c.servers[id]; !ok {
			continue // not configured: no URL or public key to use
		}
		if c.cachedAll(fullIDs, id) {
			done += weights[id]
		} else {
			pending = append(pending, id)
			reachable += weights[id]
		}
	}
	if done >= threshold {
		return nil
	}
	if done+reachable < threshold {
		return fmt.Errorf("%w: the configured key servers hold %d shares, threshold %d", ErrNotEnoughKeys, done+reachable, threshold)
	}
	req, ek, err := sk.newRequest(ptb)
	if err != nil {
		return err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}

	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// stopped: this function cancelled the requests still running, which
	// then fail with context.Canceled through no fault of their servers.
	stopped := false
	type result struct {
		id  Address
		err error
	}
	results := make(chan result, len(pending))
	for _, id := range pending {
		go func() {
			results <- result{id, c.fetchFrom(reqCtx, c.servers[id], body, ek, fullIDs)}
		}()
	}
	inflight := reachable
	var errs []error
	var unawaited []Address
	for range pending {
		res := <-results
		w := weights[res.id]
		inflight -= w
		if res.err == nil {
			done += w
			if done >= threshold {
				cancel()
				stopped = true
			}
			continue
		}
		if stopped && ctx.Err() == nil && errors.Is(res.err, context.Canceled) {
			// Cancelled here: the threshold was reached, or out of reach.
			if done < threshold {
				unawaited = append(unawaited, res.id)
			}
			continue
		}
		errs = append(errs, res.err)
		c.log.Warn("seal key server failed", "server", res.id, "err", res.err)
		if done+inflight < threshold && !stopped {
			cancel() // the threshold is out of reach
			stopped = true
		}
	}
	if done >= threshold {
		return nil
	}
	// A server still answering when the others' failures put the
	// threshold out of reach is named, so that "0 answered" does not read
	// as "it is down too".
	for _, id := range unawaited {
		s := c.servers[id]
		errs = append(errs, fmt.Errorf("key server %s (%s): not awaited, the threshold was out of reach", id, redactURL(s.URL)))
	}
	return fmt.Errorf("%w: %d of %d shares answered: %w", ErrNotEnoughKeys, done, threshold, errors.Join(errs...))
}

func sortedAddresses(m map[Address]int) []Address {
	out := make([]Address, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i][:], out[j][:]) < 0 })
	return out
}

// ServerError is an error answer of a key server. It matches ErrKeyServer,
// and ErrNoAccess or ErrInvalidPTB by kind, with errors.Is.
type ServerError struct {
	Server  Address
	URL     string // scheme://host[:port] only: the rest may hold an API key
	Status  int
	Kind    string // the server's error kind, e.g. NoAccess; empty if none
	Message string // the server's message, sanitized and truncated
}

func (e *ServerError) Error() string {
	s := fmt.Sprintf("key server %s (%s): HTTP %d", e.Server, e.URL, e.Status)
	if e.Kind != "" {
		s += " " + e.Kind
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is matches ErrKeyServer and the sentinel of the error kind.
func (e *ServerError) Is(target error) bool {
	switch target {
	case ErrKeyServer:
		return true
	case ErrNoAccess:
		return e.Kind == "NoAccess"
	case ErrInvalidPTB:
		return e.Kind == "InvalidPTB"
	case ErrInvalidSignature:
		return e.Kind == "InvalidSignature" || e.Kind == "InvalidSessionSignature"
	case ErrSessionExpired:
		return e.Kind == "InvalidCertificate"
	}
	return false
}

func (e *ServerError) retryable(p RetryPolicy) (bool, int) {
	switch {
	case e.Status == http.StatusForbidden && e.Kind == "InvalidParameter":
		return true, p.InvalidParameterAttempts
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		return true, p.Attempts
	}
	return false, 0
}

// fetchFrom requests keys from one server, with retries, and caches the
// verified keys. It succeeds only with a verified key for every full ID.
func (c *Client) fetchFrom(ctx context.Context, s *KeyServer, body []byte, ek *elgamalKey, fullIDs [][]byte) error {
	p := c.opts.Retry
	bo := backoff.Backoff{Min: p.BaseDelay, Max: p.MaxDelay}
	for attempt := 1; ; attempt++ {
		resp, retryAfter, err := c.call(ctx, s, http.MethodPost, "/v1/fetch_key", nil, body)
		if err == nil {
			return c.acceptKeys(s, resp, ek, fullIDs)
		}
		var se *ServerError
		limit := p.Attempts
		wait := bo.Wait(attempt)
		if errors.As(err, &se) {
			ok, n := se.retryable(p)
			if !ok {
				return err
			}
			limit = n
			if se.Kind == "InvalidParameter" {
				// Not a backoff: the server's full node has not indexed
				// a new object yet, which takes about as long whoever
				// asks; poll it at a fixed interval.
				wait = p.InvalidParameterDelay
			} else if retryAfter > 0 {
				wait = min(retryAfter, p.MaxDelay)
			}
		} else if ctx.Err() != nil {
			return err
		}
		if attempt >= limit {
			return err
		}
		c.log.Debug("seal key server retry", "server", s.ObjectID, "attempt", attempt, "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("key server %s (%s): %w (after: %w)", s.ObjectID, redactURL(s.URL), ctx.Err(), err)
		case <-t.C:
		}
	}
}

// post sends one fetch_key request and returns the bounded 200 body, or an
// error naming the server by object ID and redacted URL.
// call sends one request to key server s (body nil for a GET) and returns a 200 answer's body, bounded, or a *ServerError.
func (c *Client) call(ctx context.Context, s *KeyServer, method, path string, query url.Values, body []byte) ([]byte, time.Duration, error) {
	where := fmt.Sprintf("key server %s (%s)", s.ObjectID, redactURL(s.URL))
	endpoint, err := endpointURL(s.URL, path, query)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", where, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, rd)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: build request: %w", where, unwrapURLError(err))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Client-Sdk-Type", SDKType)
	req.Header.Set("Client-Sdk-Version", c.opts.SDKVersion)
	req.Header.Set("Request-Id", newRequestID())
	if s.APIKeyHeader != "" {
		req.Header.Set(s.APIKeyHeader, s.APIKey.Reveal())
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", where, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		b, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxResponseBytes+1))
		if err != nil {
			return nil, 0, fmt.Errorf("%s: read response: %w", where, unwrapURLError(err))
		}
		if int64(len(b)) > c.opts.MaxResponseBytes {
			return nil, 0, fmt.Errorf("%s: %w: response larger than %d bytes", where, ErrMalformed, c.opts.MaxResponseBytes)
		}
		return b, 0, nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	se := &ServerError{Server: s.ObjectID, URL: redactURL(s.URL), Status: resp.StatusCode}
	var eb struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &eb) == nil {
		se.Kind, se.Message = sanitize(eb.Error, 64), sanitize(eb.Message, maxServerMessage)
	} else {
		se.Message = sanitize(string(b), maxServerMessage)
	}
	var retryAfter time.Duration
	if v, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && v > 0 && v < 3600 {
		retryAfter = time.Duration(v) * time.Second
	}
	return nil, retryAfter, se
}

// endpointURL appends an API path to a base URL's path, keeping its query
// and adding query's parameters.
func endpointURL(base, path string, query url.Values) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%w: bad key-server URL", ErrInvalidConfig)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	if len(query) > 0 {
		q := u.Query()
		for k, vs := range query {
			q[k] = append(q[k], vs...)
		}
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// unwrapURLError drops *url.Error's wrapping, whose message repeats the full
// URL (path and query included).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// sanitize keeps a hostile server string printable and short.
func sanitize(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, s)
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func newRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// jsonBytes decodes a JSON array of byte values, serde's encoding of Vec<u8>.
type jsonBytes []byte

func (b *jsonBytes) UnmarshalJSON(data []byte) error {
	var nums []json.Number
	if err := json.Unmarshal(data, &nums); err != nil {
		return fmt.Errorf("want an array of bytes")
	}
	v := make([]byte, len(nums))
	for i, n := range nums {
		x, err := strconv.ParseUint(n.String(), 10, 8)
		if err != nil {
			return fmt.Errorf("byte %d out of range", i)
		}
		v[i] = uint8(x)
	}
	*b = v
	return nil
}

type fetchKeyResponse struct {
	DecryptionKeys []struct {
		ID           jsonBytes `json:"id"`
		EncryptedKey []string  `json:"encrypted_key"`
	} `json:"decryption_keys"`
}

// acceptKeys decrypts and verifies the keys of a 200 answer and caches them.
func (c *Client) acceptKeys(s *KeyServer, body []byte, ek *elgamalKey, fullIDs [][]byte) error {
	where := fmt.Sprintf("key server %s (%s)", s.ObjectID, redactURL(s.URL))
	var resp fetchKeyResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("%s: %w: response: %v", where, ErrMalformed, err)
	}
	got := map[string]*UserSecretKey{}
	for _, dk := range resp.DecryptionKeys {
		if len(dk.EncryptedKey) != 2 {
			return fmt.Errorf("%s: %w: encrypted key has %d parts, want 2", where, ErrMalformed, len(dk.EncryptedKey))
		}
		var pts [2][]byte
		for i, p := range dk.EncryptedKey {
			b, err := base64.StdEncoding.DecodeString(p)
			if err != nil {
				return fmt.Errorf("%s: %w: encrypted key is not base64", where, ErrMalformed)
			}
			pts[i] = b
		}
		c1, err := decodeG1(pts[0])
		if err != nil {
			return fmt.Errorf("%s: %w: encrypted key: %w", where, ErrMalformed, err)
		}
		c2, err := decodeG1(pts[1])
		if err != nil {
			return fmt.Errorf("%s: %w: encrypted key: %w", where, ErrMalformed, err)
		}
		got[string(dk.ID)] = &UserSecretKey{p: ek.decrypt(&c1, &c2)}
	}
	for _, fid := range fullIDs {
		k, ok := got[string(fid)]
		if !ok {
			return fmt.Errorf("%s: %w: no key for a requested identity", where, ErrMalformed)
		}
		if err := k.Verify(fid, s.PublicKey); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	for _, fid := range fullIDs {
		c.store(fid, s.ObjectID, got[string(fid)])
	}
	return nil
}

func cacheKey(fullID []byte, server Address) string { return string(server[:]) + string(fullID) }

func (c *Client) cached(fullID []byte, server Address) *UserSecretKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cache[cacheKey(fullID, server)]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*cacheEntry).usk
	}
	return nil
}

func (c *Client) cachedAll(fullIDs [][]byte, server Address) bool {
	for _, fid := range fullIDs {
		if c.cached(fid, server) == nil {
			return false
		}
	}
	return true
}

func (c *Client) store(fullID []byte, server Address, k *UserSecretKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := cacheKey(fullID, server)
	if e, ok := c.cache[key]; ok {
		e.Value.(*cacheEntry).usk = k
		c.lru.MoveToFront(e)
		return
	}
	c.cache[key] = c.lru.PushFront(&cacheEntry{key: key, usk: k})
	for c.lru.Len() > c.opts.CacheEntries {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.cache, old.Value.(*cacheEntry).key)
	}
}

// ForgetKeys empties the key cache.
func (c *Client) ForgetKeys() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cache = map[string]*list.Element{}
	c.lru.Init()
}

// Answered returns the configured key servers of o that hold a cached key
// for its identity: after a decryption, those whose keys it used (a
// report of which servers answered).
func (c *Client) Answered(o *EncryptedObject) []KeyServer {
	var out []KeyServer
	for i := range c.cfg.Servers {
		if _, ok := o.Weights()[c.cfg.Servers[i].ObjectID]; ok && c.cached(o.FullID(), c.cfg.Servers[i].ObjectID) != nil {
			out = append(out, c.cfg.Servers[i])
		}
	}
	return out
}
