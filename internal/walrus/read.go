package walrus

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/hermesd/hermesd/internal/atomicfile"
)

// ReadOption adjusts one Read call.
type ReadOption func(*readOptions)

type readOptions struct {
	notFoundRetries int
}

// WithNotFoundRetries retries up to n 404 answers with backoff. Use it only
// right after storing a blob: a CDN in front of a public aggregator may
// still serve a 404 it cached before the blob became visible. Otherwise a
// 404 is final.
func WithNotFoundRetries(n int) ReadOption {
	return func(o *readOptions) { o.notFoundRetries = n }
}

// ReadResult describes a finished read.
type ReadResult struct {
	BlobID     string
	Size       int64  // bytes written to the destination
	Aggregator string // base URL of the last attempt, redacted
	Attempts   int
	Resumes    int // attempts that continued a cut-off body with Range
	Duration   time.Duration
}

// Read streams the blob's bytes into dst. A body cut off midway is resumed
// with a Range request from the first missing byte, possibly on another
// aggregator, so dst sees every byte exactly once and in order. On error,
// dst may hold a prefix of the blob.
func (c *Client) Read(ctx context.Context, blobID string, dst io.Writer, opts ...ReadOption) (ReadResult, error) {
	var ro readOptions
	for _, opt := range opts {
		opt(&ro)
	}
	if err := ValidateBlobID(blobID); err != nil {
		return ReadResult{}, err
	}
	if len(c.aggregators) == 0 {
		return ReadResult{}, fmt.Errorf("%w: no aggregators configured", ErrConfig)
	}
	ctx, cancel := c.opContext(ctx)
	defer cancel()

	op := c.newOperation("read", c.aggregators)
	op.notFoundLeft = ro.notFoundRetries
	path := "/v1/blobs/" + url.PathEscape(blobID)
	w := &countingWriter{w: dst}
	total := int64(-1) // the blob's size, once an answer told it
	var attemptBase int64
	op.onStart = func() { attemptBase = w.n }
	op.attemptBytes = func() int64 { return w.n - attemptBase }
	resumes := 0
	op.prepare = func(r *http.Request) error {
		u, err := url.Parse(op.endpoint() + path)
		if err != nil {
			return permanent(err)
		}
		r.URL, r.Host = u, u.Host
		r.Header.Del("Range")
		if w.n > 0 {
			if total < 0 {
				return permanent(fmt.Errorf("walrus read: cannot resume after %d bytes: the aggregator sent no Content-Length", w.n))
			}
			// Aggregators accept only the closed form bytes=a-b.
			r.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", w.n, total-1))
			resumes++
		}
		return nil
	}

	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, op.endpoint()+path, nil)
	if err != nil {
		return ReadResult{}, fmt.Errorf("walrus read: %w", err)
	}
	req.Header.Set("Accept", "application/octet-stream")
	req.SetResponseHandler(func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
			return op.statusError(resp)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusPartialContent {
			first, last, size, err := parseContentRange(resp.Header.Get("Content-Range"))
			switch {
			case err != nil:
				return protocolErrorf("206 answer: %v", err)
			case first != w.n || last != size-1:
				return protocolErrorf("206 answer covers bytes %d-%d/%d, asked for %d-%d", first, last, size, w.n, size-1)
			case total >= 0 && size != total:
				return protocolErrorf("blob size changed from %d to %d bytes between answers", total, size)
			}
			total = size
		} else {
			if resp.ContentLength >= 0 {
				if total >= 0 && resp.ContentLength != total {
					return protocolErrorf("blob size changed from %d to %d bytes between answers", total, resp.ContentLength)
				}
				total = resp.ContentLength
			}
			if w.n > 0 {
				// The server ignored Range and sent everything: skip what
				// dst already has.
				if _, err := io.CopyN(io.Discard, resp.Body, w.n); err != nil {
					return fmt.Errorf("skip %d bytes already read: %w", w.n, err)
				}
			}
		}
		if _, err := io.Copy(w, resp.Body); err != nil {
			var we *writeError
			if errors.As(err, &we) {
				return permanent(we)
			}
			if total < 0 || w.n < total {
				return fmt.Errorf("body cut off after %d bytes: %w", w.n, err)
			}
		}
		if total >= 0 && w.n != total {
			return fmt.Errorf("body ended after %d of %d bytes: %w", w.n, total, io.ErrUnexpectedEOF)
		}
		return nil
	})

	start := time.Now()
	resp, err := op.retryClient().Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	if err := op.finish(ctx, blobID, err); err != nil {
		return ReadResult{}, err
	}
	res := ReadResult{BlobID: blobID, Size: w.n, Aggregator: redact(op.endpoint()),
		Attempts: op.attempts, Resumes: resumes, Duration: time.Since(start)}
	c.log.Debug("walrus: read blob", "blob_id", blobID, "size", res.Size, "aggregator", res.Aggregator,
		"attempts", res.Attempts, "resumes", res.Resumes, "duration", res.Duration)
	return res, nil
}

// ReadToFile reads the blob into path atomically: into a temporary file
// beside it, fsynced and renamed over path only when the whole blob
// arrived. An existing file at path is replaced. The file gets mode 0600.
func (c *Client) ReadToFile(ctx context.Context, blobID, path string, opts ...ReadOption) (ReadResult, error) {
	if err := ValidateBlobID(blobID); err != nil {
		return ReadResult{}, err
	}
	f, err := atomicfile.Create(path, 0o600)
	if err != nil {
		return ReadResult{}, err
	}
	defer f.Abort()
	res, err := c.Read(ctx, blobID, f.File, opts...)
	if err != nil {
		return ReadResult{}, err
	}
	if err := f.Commit(); err != nil {
		return ReadResult{}, err
	}
	return res, nil
}

// Verify reads the blob back (into a hash, not to disk) and checks that it
// is size bytes with SHA-256 want. A difference is ErrMismatch.
func (c *Client) Verify(ctx context.Context, blobID string, want [32]byte, size int64, opts ...ReadOption) (ReadResult, error) {
	h := sha256.New()
	res, err := c.Read(ctx, blobID, h, opts...)
	if err != nil {
		return res, err
	}
	var got [32]byte
	h.Sum(got[:0])
	if res.Size != size || got != want {
		return res, fmt.Errorf("%w: blob %s reads back as %d bytes with sha256 %x, but %d bytes with sha256 %x were stored",
			ErrMismatch, blobID, res.Size, got, size, want)
	}
	return res, nil
}

// countingWriter counts what dst accepted and marks dst's own failures,
// which retrying cannot fix.
type countingWriter struct {
	w io.Writer
	n int64
}

type writeError struct{ err error }

func (e *writeError) Error() string { return "write blob: " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil {
		return n, &writeError{err}
	}
	return n, nil
}

// parseContentRange parses "bytes first-last/size" with a known size.
func parseContentRange(v string) (first, last, size int64, err error) {
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, 0, 0, fmt.Errorf("Content-Range %q is not a byte range", sanitize(v, 80))
	}
	rng, sz, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, fmt.Errorf("Content-Range %q has no size", sanitize(v, 80))
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, fmt.Errorf("Content-Range %q has no range", sanitize(v, 80))
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	size, err3 := strconv.ParseInt(sz, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || first < 0 || last < first || size <= last {
		return 0, 0, 0, fmt.Errorf("Content-Range %q is malformed", sanitize(v, 80))
	}
	return first, last, size, nil
}
