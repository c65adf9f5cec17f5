package walrus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/hermesd/hermesd/internal/backoff"
	"github.com/hermesd/hermesd/internal/redact"
)

// Client stores and reads blobs. It is safe for concurrent use.
type Client struct {
	cfg         Config
	publishers  []string
	aggregators []string
	storeHTTP   *http.Client     // follows no redirect
	readHTTP    *http.Client     // follows a few, dropping credentials off-origin
	scrub       *redact.Scrubber // nil: no endpoint has secrets
	log         *slog.Logger
	now         func() time.Time // Retry-After dates; replaced in tests
	jitter      func(n int64) int64
}

// New validates cfg and returns a client.
func New(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	base := cfg.Transport
	if base == nil {
		base = newTransport()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rt := &watchdogTransport{base: base, wait: cfg.AttemptTimeout, idle: cfg.IdleTimeout}
	c := &Client{
		cfg:       cfg,
		storeHTTP: &http.Client{Transport: rt, CheckRedirect: refuseRedirect},
		readHTTP:  &http.Client{Transport: rt, CheckRedirect: followRedirect},
		scrub:     redact.NewScrubber(append(append([]string(nil), cfg.Publishers...), cfg.Aggregators...)...),
		log:       log,
		now:       time.Now,
		jitter: func(n int64) int64 {
			if n <= 0 {
				return 0
			}
			return rand.Int64N(n)
		},
	}
	for _, p := range cfg.Publishers {
		c.publishers = append(c.publishers, normalizeBase(p))
	}
	for _, a := range cfg.Aggregators {
		c.aggregators = append(c.aggregators, normalizeBase(a))
	}
	return c, nil
}

// Publishers returns the configured publishers for display, as
// scheme://host[:port]: the rest of a URL may hold an API key.
func (c *Client) Publishers() []string { return redactAll(c.publishers) }

// Aggregators returns the configured aggregators for display, as
// scheme://host[:port].
func (c *Client) Aggregators() []string { return redactAll(c.aggregators) }

func redactAll(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = redact.URL(u)
	}
	return out
}

// operation is the state of one Store or Read across its attempts. The
// retryablehttp hooks are closures over it; retryablehttp runs attempts
// sequentially, so no locking is needed.
type operation struct {
	c         *Client
	ctx       context.Context // the operation's; ends a backoff early
	name      string          // "store" or "read"
	endpoints []string
	cur       int // index of the endpoint of the current attempt
	next      int // index chosen for the next attempt by backoff

	attempts     int
	emitted      int // attempts reported to OnAttempt
	attemptStart time.Time
	attemptBytes func() int64 // bytes moved by the current attempt
	onStart      func()       // called before each attempt
	lastStatus   int
	lastErr      error
	dialFails    int         // consecutive attempts that could not connect
	notBefore    []time.Time // per endpoint, from Retry-After
	notFoundLeft int         // 404s still retried ("just stored" reads)

	// prepare, when set, adjusts the request before a retry (Range).
	prepare func(r *http.Request) error
}

func (c *Client) newOperation(ctx context.Context, name string, endpoints []string) *operation {
	return &operation{
		c:         c,
		ctx:       ctx,
		name:      name,
		endpoints: endpoints,
		notBefore: make([]time.Time, len(endpoints)),
	}
}

func (o *operation) endpoint() string { return o.endpoints[o.cur] }

// retryClient builds the retryablehttp client for this operation: the
// shared http.Client plus hooks bound to o. Its own logger stays off;
// retries are logged here through the injected slog logger.
func (o *operation) retryClient() *retryablehttp.Client {
	hc := o.c.readHTTP
	if o.name == "store" {
		hc = o.c.storeHTTP
	}
	return &retryablehttp.Client{
		HTTPClient:     hc,
		Logger:         nil,
		RetryWaitMin:   o.c.cfg.RetryWaitMin,
		RetryWaitMax:   o.c.cfg.RetryWaitMax,
		RetryMax:       o.c.cfg.RetryMax,
		RequestLogHook: o.beforeAttempt,
		CheckRetry:     o.checkRetry,
		Backoff:        o.backoff,
		PrepareRetry:   o.prepareRetry,
		ErrorHandler:   o.giveUp,
	}
}

func (o *operation) beforeAttempt(_ retryablehttp.Logger, _ *http.Request, _ int) {
	o.attempts++
	o.attemptStart = time.Now()
	o.lastStatus, o.lastErr = 0, nil
	if o.onStart != nil {
		o.onStart()
	}
}

// checkRetry is the retry policy. It is called after each HTTP exchange
// and again after the response handler when the handler ran.
func (o *operation) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if resp != nil {
		o.lastStatus = resp.StatusCode
	}
	if err != nil {
		// Redact before anything formats the error: net/http's *url.Error
		// carries the full URL, API key and all.
		err = o.c.scrub.Error(err)
		o.lastErr = err
		var pe *permanentError
		if errors.As(err, &pe) {
			return false, nil
		}
		var se *StatusError
		if errors.As(err, &se) {
			return se.Temporary(), nil
		}
		// Reuse retryablehttp's classification of hopeless transport errors
		// (bad scheme, TLS certificate, redirect loops).
		retry, _ := retryablehttp.DefaultRetryPolicy(ctx, nil, err)
		return retry, nil
	}
	if resp.StatusCode == http.StatusNotFound && o.notFoundLeft > 0 {
		o.notFoundLeft--
		return true, nil
	}
	return retryableStatus(resp.StatusCode), nil
}

// backoff picks the endpoint of the next attempt (the next one in the
// list) and how long to wait for it: capped exponential backoff with
// jitter; nothing when the failed endpoint was unreachable and another one
// has not been tried yet; never less than that endpoint's Retry-After.
func (o *operation) backoff(min, max time.Duration, attemptNum int, resp *http.Response) time.Duration {
	// The channel that says the store is back is taken before anything
	// else (the report below included): a recovery seen from here on ends
	// the wait, instead of closing a channel the wait never looks at.
	var back <-chan struct{}
	if o.c.cfg.Recovered != nil {
		back = o.c.cfg.Recovered()
	}
	now := o.c.now()
	if resp != nil {
		if ra, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
			if ra > o.c.cfg.RetryAfterMax {
				ra = o.c.cfg.RetryAfterMax
			}
			o.notBefore[o.cur] = now.Add(ra)
		}
	}
	if o.lastErr != nil && isDialError(o.lastErr) {
		o.dialFails++
	} else {
		o.dialFails = 0
	}
	o.next = (o.cur + 1) % len(o.endpoints)

	wait := expBackoff(min, max, attemptNum, o.c.jitter)
	if o.dialFails > 0 && o.dialFails < len(o.endpoints) {
		wait = 0
	}
	asked := o.notBefore[o.next].Sub(now) // the server asked for at least this (Retry-After)
	if asked < 0 {
		asked = 0
	}
	if asked > wait {
		wait = asked
	}
	o.report(true, wait)
	o.c.log.Debug("walrus: retrying", "op", o.name, "endpoint", redact.URL(o.endpoint()),
		"attempt", o.attempts, "status", o.lastStatus, "error", o.lastErr,
		"backoff", wait, "next", redact.URL(o.endpoints[o.next]))
	if wait > asked {
		return o.sleep(back, wait, asked)
	}
	return wait
}

// sleep waits out a backoff here rather than in retryablehttp, so that
// the store coming back (back, from Config.Recovered) ends it early,
// though never before floor (what the server asked for); it returns what
// is left for retryablehttp to wait. Without Recovered the whole wait is
// left to retryablehttp.
func (o *operation) sleep(back <-chan struct{}, wait, floor time.Duration) time.Duration {
	if back == nil || o.ctx == nil {
		return wait
	}
	start := time.Now()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-o.ctx.Done(): // retryablehttp sees it before the next attempt
	case <-back:
		o.c.log.Debug("walrus: the store answers again; retrying now", "op", o.name,
			"endpoint", redact.URL(o.endpoints[o.next]), "backoff_left", (wait - time.Since(start)).Round(time.Millisecond))
		return max(floor-time.Since(start), 0)
	}
	return 0
}

// expBackoff is hermesd's one backoff (internal/backoff: min·2^attempt
// capped at max, the upper half jittered so that clients that failed
// together do not retry together) for retryablehttp's attempt numbers,
// which count retries from 0. jitter returns a number in [0, n).
func expBackoff(min, max time.Duration, attempt int, jitter func(n int64) int64) time.Duration {
	b := backoff.Backoff{Min: min, Max: max, Jitter: func(d time.Duration) time.Duration {
		return time.Duration(jitter(int64(d) + 1))
	}}
	return b.Wait(attempt + 1)
}

// prepareRetry points the request at the endpoint chosen by backoff.
func (o *operation) prepareRetry(r *http.Request) error {
	o.cur = o.next
	// The header map is shared with the previous attempt's request; copy
	// it before changing anything.
	r.Header = r.Header.Clone()
	if o.prepare != nil {
		if err := o.prepare(r); err != nil {
			return err
		}
	}
	return nil
}

// giveUp turns the last attempt's outcome into the operation's error.
func (o *operation) giveUp(resp *http.Response, err error, _ int) (*http.Response, error) {
	if resp != nil {
		if err == nil {
			// Retries ran out on a retryable status.
			err = o.statusError(resp)
		}
		drain(resp.Body)
	}
	return nil, err
}

// report sends the current attempt to OnAttempt, once.
func (o *operation) report(retry bool, wait time.Duration) {
	if o.c.cfg.OnAttempt == nil || o.emitted >= o.attempts {
		return
	}
	o.emitted = o.attempts
	var n int64
	if o.attemptBytes != nil {
		n = o.attemptBytes()
	}
	o.c.cfg.OnAttempt(Attempt{
		Op: o.name, Endpoint: redact.URL(o.endpoint()), N: o.attempts,
		Status: o.lastStatus, Err: o.lastErr, Bytes: n,
		Duration: time.Since(o.attemptStart), Retry: retry, Backoff: wait,
	})
}

// finish reports the last attempt and wraps a failure in *OpError.
func (o *operation) finish(ctx context.Context, blobID string, err error) error {
	if err != nil && o.lastErr == nil {
		o.lastErr = o.c.scrub.Error(err)
	}
	o.report(false, 0)
	if err == nil {
		return nil
	}
	var pe *permanentError
	if errors.As(err, &pe) {
		err = pe.err
	}
	if ctx.Err() != nil {
		if context.Cause(ctx) == ErrTimeout {
			err = fmt.Errorf("%w after %s (last error: %v)", ErrTimeout, o.c.cfg.Timeout, o.c.scrub.Error(o.lastErr))
		} else {
			err = ctx.Err()
		}
	}
	return &OpError{Op: o.name, BlobID: blobID, Endpoint: redact.URL(o.endpoint()), Attempts: o.attempts, Err: o.c.scrub.Error(err)}
}

// statusError reads (a bounded part of) an error response into a
// *StatusError and closes the body.
func (o *operation) statusError(resp *http.Response) error {
	defer drain(resp.Body)
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	// Redacted before the excerpt is cut, so no cut splits a secret.
	code, status, reason, msg := parseErrorBody([]byte(o.c.scrub.String(string(body))))
	u := ""
	if resp.Request != nil && resp.Request.URL != nil {
		u = redact.Origin(resp.Request.URL)
	}
	// The body is the server's: a gateway may echo the request path.
	r := o.c.scrub.String
	return &StatusError{Op: o.name, URL: u, StatusCode: resp.StatusCode,
		Code: code, Status: r(status), Reason: r(reason), Message: r(msg)}
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// drain reads a little of a body so the connection can be reused, then
// closes it.
func drain(rc io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(rc, maxErrorBody))
	rc.Close()
}

// opContext applies Config.Timeout to one operation.
func (c *Client) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, c.cfg.Timeout, ErrTimeout)
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	var secs int64
	digits := true
	for _, r := range v {
		if r < '0' || r > '9' {
			digits = false
			break
		}
		secs = secs*10 + int64(r-'0')
		if secs > 1<<31 {
			break
		}
	}
	if digits {
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}
