package walrus

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/redact"
	"github.com/hermesd/hermesd/internal/redstuff"
)

// ReadOption adjusts one Read, ReadRange, ReadToFile or Verify call.
type ReadOption func(*readOptions)

type readOptions struct {
	notFoundRetries int
	expected        int64 // the blob's size, -1 when unknown
	expectedSet     bool
	max             int64  // bound on the blob's size, 0 for Config.MaxReadSize
	identifier      string // a patch's X-Quilt-Patch-Identifier (WithIdentifier)
	// spaceDir, when set, is the directory whose filesystem must have room
	// for the download (WithFreeSpace).
	spaceDir string
	// start is the aggregator the read starts at (readChecked).
	start int
}

// WithNotFoundRetries retries up to n 404 answers with backoff. Use it only
// right after storing a blob: a CDN in front of a public aggregator may
// still serve a 404 it cached before the blob became visible. Otherwise a
// 404 is final.
func WithNotFoundRetries(n int) ReadOption {
	return func(o *readOptions) { o.notFoundRetries = n }
}

// WithExpectedSize says the blob is exactly n bytes (Verify passes the
// stored size). An answer whose Content-Length, Content-Range total or
// body differs fails at once with ErrMismatch (and ErrBodyTooLarge when
// it is larger), before any byte of a wrong size is written when the
// headers tell. For ReadRange it checks the blob's total size.
func WithExpectedSize(n int64) ReadOption {
	return func(o *readOptions) { o.expected, o.expectedSet = n, true }
}

// WithMaxSize bounds the blob's size at n bytes instead of
// Config.MaxReadSize: a larger answer fails at once with ErrBodyTooLarge,
// before its body is read when Content-Length or Content-Range tells.
func WithMaxSize(n int64) ReadOption {
	return func(o *readOptions) { o.max = n }
}

// WithFreeSpace makes a read that writes to a file in dir check, before
// its first byte, that dir's filesystem has room for the bytes still to
// come (once an answer or WithExpectedSize tells their number) plus a
// margin, and again every 64 MiB (a download of unknown size, or a disk
// someone else fills meanwhile): ErrNoSpace, with the numbers. ReadToFile
// always checks its file's directory.
func WithFreeSpace(dir string) ReadOption {
	return func(o *readOptions) { o.spaceDir = dir }
}

// ReadResult describes a finished read.
type ReadResult struct {
	BlobID     string
	Size       int64  // bytes written to the destination
	Total      int64  // the blob's size; for ReadRange from Content-Range
	Aggregator string // scheme://host[:port] of the last attempt's aggregator
	Attempts   int
	Resumes    int // attempts that continued a cut-off body with Range
	Duration   time.Duration
}

// copyBufs are the buffers bodies are read with: a read(2) per 256 KiB
// rather than per 32 KiB (io.Copy's) is a visible share of a download's
// CPU where system calls are dear (virtual machines).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// maxIgnoredRange is the largest whole-blob answer ReadRange accepts from
// an aggregator that ignored its Range header: it skips to the range
// instead of failing. Larger ones would cost a download per range.
const maxIgnoredRange = 1 << 20

// Read writes the blob's bytes into dst, once its blob id was checked
// (verify.go): the blob is read whole (memory up to 16 MiB, a temporary
// file beyond), its Walrus blob id computed and compared with blobID, and
// only then copied to dst; bytes of another blob fail the read with
// ErrBlobID (after every aggregator was tried) and dst sees none of them.
// A body cut off midway is resumed with a Range request from the first
// missing byte, possibly on another aggregator. The blob's size is
// bounded (WithExpectedSize, WithMaxSize, Config.MaxReadSize). On error,
// dst may hold a prefix of the blob only if writing to it failed.
//
// blobID may also be a quilt patch id (IsPatchID): the patch is read with
// GET /v1/blobs/by-quilt-patch-id/{id}, whole (ranges of a patch are not
// part of the documented API: a cut-off read starts again and skips what
// dst already has), and streamed into dst unchecked: a patch id commits
// to its whole quilt, which the patch alone cannot be checked against.
func (c *Client) Read(ctx context.Context, blobID string, dst io.Writer, opts ...ReadOption) (ReadResult, error) {
	t, err := readTarget(blobID)
	if err != nil {
		return ReadResult{}, err
	}
	if t.patch {
		return c.read(ctx, t, dst, nil, opts)
	}
	s := newSpool(opts)
	defer s.close()
	res, err := c.readChecked(ctx, t, s, opts)
	if err != nil {
		return res, err
	}
	if err := s.writeTo(dst); err != nil {
		return res, &writeError{err}
	}
	return res, nil
}

// ReadBack streams the blob into dst as it arrives, unchecked against
// its id: for an uploader that compares every byte read back with the
// bytes it stored (dst refuses the first that differs) and uses none of
// them. Read would check the id over the bytes served, holding them (up
// to 16 MiB in memory) while it encodes them. Resumes, bounds and options are Read's; a quilt patch id
// is read as Read reads one.
func (c *Client) ReadBack(ctx context.Context, blobID string, dst io.Writer, opts ...ReadOption) (ReadResult, error) {
	t, err := readTarget(blobID)
	if err != nil {
		return ReadResult{}, err
	}
	return c.read(ctx, t, dst, nil, opts)
}

// target is what a read asks for: a blob, a quilt patch, or another
// aggregator document.
type target struct {
	id   string // for results and errors
	path string // below the aggregator's base URL
	// whole: the answer is read whole, never with Range (a quilt patch,
	// a list of patches); a resumed read skips what it already wrote.
	whole bool
	// patch: a quilt patch of quilt, read by its id (id) or by quilt and
	// identifier: the answer's ETag, when present, must name the patch or
	// its quilt, and its X-Quilt-Patch-Identifier be the identifier asked
	// for (identifier, else WithIdentifier's).
	patch      bool
	quilt      string
	identifier string
}

// readTarget is the target of Read: a blob id or a quilt patch id.
func readTarget(id string) (target, error) {
	if IsPatchID(id) {
		if err := ValidatePatchID(id); err != nil {
			return target{}, err
		}
		quilt, _ := PatchQuilt(id)
		return target{id: id, path: "/v1/blobs/by-quilt-patch-id/" + url.PathEscape(id), whole: true, patch: true, quilt: quilt}, nil
	}
	if err := ValidateBlobID(id); err != nil {
		return target{}, err
	}
	return target{id: id, path: "/v1/blobs/" + url.PathEscape(id)}, nil
}

// ReadRange writes the length bytes of the blob starting at off into dst,
// with closed range requests (Range: bytes=off-(off+length-1), the only
// form aggregators accept) that must be answered with 206 and the matching
// Content-Range. A cut-off body resumes from its first missing byte; dst
// sees exactly length bytes, each once, or an error. An aggregator that
// ignores Range is tolerated for blobs of at most 1 MiB (the range is cut
// out of the whole blob). Result.Total is the blob's size. A range that is
// not inside the blob fails with ErrInvalidRange. A range that turns out
// to be the whole blob is checked against its blob id, as Read checks,
// before dst sees it (ErrBlobID); a part of a blob cannot be.
func (c *Client) ReadRange(ctx context.Context, blobID string, off, length int64, dst io.Writer, opts ...ReadOption) (ReadResult, error) {
	if off < 0 || length <= 0 || off > math.MaxInt64-length {
		return ReadResult{}, fmt.Errorf("%w: offset %d, length %d", ErrInvalidRange, off, length)
	}
	if IsPatchID(blobID) {
		return ReadResult{}, fmt.Errorf("%w: %s is a quilt patch, which aggregators serve whole only: Read it", ErrInvalidRange, sanitize(blobID, 96))
	}
	if err := ValidateBlobID(blobID); err != nil {
		return ReadResult{}, err
	}
	t := target{id: blobID, path: "/v1/blobs/" + url.PathEscape(blobID)}
	if off > 0 {
		return c.read(ctx, t, dst, &span{off: off, n: length}, opts)
	}
	// From the first byte: held until the answer tells whether the range
	// is the whole blob, which is then checked against its id.
	s := newSpool(opts)
	defer s.close()
	res, err := c.read(ctx, t, s, &span{off: off, n: length}, opts)
	if err != nil {
		return res, err
	}
	if res.Total == length {
		want, _ := redstuff.ParseID(blobID)
		got, err := c.blobID(ctx, s, length)
		if err != nil || got != want {
			what := "bytes of blob " + got.String()
			if err != nil {
				what = err.Error()
			}
			return ReadResult{}, fmt.Errorf("%w: blob %s (ids over %d shards): %s served %d %s", ErrBlobID, blobID, c.cfg.Shards, res.Aggregator, length, what)
		}
	}
	if err := s.writeTo(dst); err != nil {
		return res, &writeError{err}
	}
	return res, nil
}

// span is the part of a blob a ranged read wants: bytes [off, off+n).
type span struct{ off, n int64 }

func (c *Client) read(ctx context.Context, t target, dst io.Writer, rng *span, opts []ReadOption) (ReadResult, error) {
	ro := readOptions{expected: -1}
	for _, opt := range opts {
		opt(&ro)
	}
	blobID := t.id
	if len(c.aggregators) == 0 {
		return ReadResult{}, fmt.Errorf("%w: no aggregators configured", ErrConfig)
	}
	bound := ro.max
	switch {
	case ro.expectedSet && ro.expected < 0:
		return ReadResult{}, fmt.Errorf("%w: expected size %d is negative", ErrConfig, ro.expected)
	case ro.max < 0:
		return ReadResult{}, fmt.Errorf("%w: maximum read size %d is negative", ErrConfig, ro.max)
	case ro.max == 0:
		bound = c.cfg.MaxReadSize
	}
	if ro.expected >= 0 {
		if ro.expected > bound {
			return ReadResult{}, fmt.Errorf("%w: expected size %s is over the read limit of %s", ErrBodyTooLarge, FormatSize(ro.expected), FormatSize(bound))
		}
		bound = ro.expected
	}
	if rng != nil && rng.off+rng.n > bound {
		return ReadResult{}, fmt.Errorf("%w: bytes %d-%d are beyond the blob's size or size limit of %d bytes", ErrInvalidRange, rng.off, rng.off+rng.n-1, bound)
	}

	if ro.spaceDir != "" {
		dst = &spaceGuard{w: dst, dir: ro.spaceDir}
	}

	ctx, cancel := c.opContext(ctx)
	defer cancel()
	aggs := c.aggregators
	if k := ro.start % len(aggs); k > 0 {
		aggs = append(append([]string(nil), aggs[k:]...), aggs[:k]...)
	}
	op := c.newOperation(ctx, "read", aggs)
	op.notFoundLeft = ro.notFoundRetries
	rd := &reader{op: op, ro: &ro, t: t, rng: rng, bound: bound, total: -1, w: &countingWriter{w: dst}}
	path := t.path
	var attemptBase int64
	op.onStart = func() { attemptBase = rd.w.n }
	op.attemptBytes = func() int64 { return rd.w.n - attemptBase }
	resumes := 0
	op.prepare = func(r *http.Request) error {
		u, err := url.Parse(op.endpoint() + path)
		if err != nil {
			return permanent(c.scrub.Error(err))
		}
		r.URL, r.Host = u, u.Host
		r.Header.Del("Range")
		h, err := rd.rangeHeader()
		if err != nil {
			return err
		}
		if h != "" {
			r.Header.Set("Range", h)
		}
		if rd.w.n > 0 {
			resumes++
		}
		return nil
	}

	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, op.endpoint()+path, nil)
	if err != nil {
		return ReadResult{}, fmt.Errorf("walrus read: %w", c.scrub.Error(err))
	}
	req.Header.Set("Accept", "application/octet-stream")
	if h, _ := rd.rangeHeader(); h != "" {
		req.Header.Set("Range", h)
	}
	req.SetResponseHandler(rd.handle)

	start := time.Now()
	resp, err := op.retryClient().Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	if err := op.finish(ctx, blobID, err); err != nil {
		return ReadResult{}, err
	}
	total := rd.total
	if total < 0 {
		total = rd.w.n // a whole body without Content-Length ended cleanly
	}
	res := ReadResult{BlobID: blobID, Size: rd.w.n, Total: total, Aggregator: redact.URL(op.endpoint()),
		Attempts: op.attempts, Resumes: resumes, Duration: time.Since(start)}
	c.log.Debug("walrus: read blob", "blob_id", blobID, "size", res.Size, "total", res.Total, "aggregator", res.Aggregator,
		"attempts", res.Attempts, "resumes", res.Resumes, "duration", res.Duration)
	return res, nil
}

// reader is the state of one read across its attempts.
type reader struct {
	op    *operation
	ro    *readOptions
	t     target
	rng   *span // nil for the whole blob
	bound int64 // the blob may not be larger
	total int64 // the blob's size once an answer told it, else -1
	w     *countingWriter
	// checked is set once the free-space check approved the bytes to come.
	checked bool
}

// size is the blob's size as far as known: from an answer, else the
// caller's expectation, else -1.
func (rd *reader) size() int64 {
	if rd.total >= 0 {
		return rd.total
	}
	return rd.ro.expected
}

// want is how many bytes the read delivers in all: the range, or the
// whole blob when its size is known (-1 if not).
func (rd *reader) want() int64 {
	if rd.rng != nil {
		return rd.rng.n
	}
	return rd.size()
}

// rangeHeader is the Range of the next attempt: the rest of the span, or
// the rest of the blob after a cut; "" for a fresh whole-blob read.
func (rd *reader) rangeHeader() (string, error) {
	if rd.t.whole {
		return "", nil
	}
	if rd.rng != nil {
		return fmt.Sprintf("bytes=%d-%d", rd.rng.off+rd.w.n, rd.rng.off+rd.rng.n-1), nil
	}
	if rd.w.n == 0 {
		return "", nil
	}
	if rd.size() < 0 {
		return "", permanent(fmt.Errorf("walrus read: cannot resume after %d bytes: the aggregator sent no Content-Length", rd.w.n))
	}
	// Aggregators accept only the closed form bytes=a-b.
	return fmt.Sprintf("bytes=%d-%d", rd.w.n, rd.size()-1), nil
}

// learnTotal checks a size an answer gave for the blob against what is
// known and allowed, before any of its body is read.
func (rd *reader) learnTotal(size int64, from string) error {
	switch {
	case rd.total >= 0 && size != rd.total:
		return protocolErrorf("blob size changed from %d to %d bytes between answers", rd.total, size)
	case rd.ro.expected >= 0 && size > rd.ro.expected:
		return permanent(fmt.Errorf("%w: %w: %s says the blob is %d bytes, %d expected", ErrBodyTooLarge, ErrMismatch, from, size, rd.ro.expected))
	case rd.ro.expected >= 0 && size != rd.ro.expected:
		return permanent(fmt.Errorf("%w: %s says the blob is %d bytes, %d expected", ErrMismatch, from, size, rd.ro.expected))
	case size > rd.bound:
		return permanent(fmt.Errorf("%w: %s says the blob is %s, over the read limit of %s", ErrBodyTooLarge, from, FormatSize(size), FormatSize(rd.bound)))
	case rd.rng != nil && rd.rng.off+rd.rng.n > size:
		return permanent(fmt.Errorf("%w: bytes %d-%d are beyond the end of the %d-byte blob", ErrInvalidRange, rd.rng.off, rd.rng.off+rd.rng.n-1, size))
	}
	rd.total = size
	return nil
}

// handle consumes one 2xx answer (anything else becomes a *StatusError).
// Errors it returns are retried (a cut-off body resumes) unless
// permanent.
func (rd *reader) handle(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		return rd.op.statusError(resp)
	}
	defer resp.Body.Close()
	if rd.t.whole && resp.StatusCode != http.StatusOK {
		return protocolErrorf("%d answer to a request without Range", resp.StatusCode)
	}
	if rd.t.patch {
		if err := rd.checkPatch(resp.Header); err != nil {
			return err
		}
	}
	// Where the body starts in the blob, and what the read needs of it.
	var skip int64
	first := rd.w.n
	if rd.rng != nil {
		first += rd.rng.off
	}
	if resp.StatusCode == http.StatusPartialContent {
		a, b, size, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil {
			return protocolErrorf("206 answer: %v", err)
		}
		if err := rd.learnTotal(size, "Content-Range"); err != nil {
			return err
		}
		last := size - 1
		if rd.rng != nil {
			last = rd.rng.off + rd.rng.n - 1
		}
		if a != first || b != last {
			return protocolErrorf("206 answer covers bytes %d-%d/%d, asked for %d-%d", a, b, size, first, last)
		}
		if resp.ContentLength >= 0 && resp.ContentLength != b-a+1 {
			return protocolErrorf("206 answer for %d bytes has Content-Length %d", b-a+1, resp.ContentLength)
		}
	} else {
		if resp.ContentLength >= 0 {
			if err := rd.learnTotal(resp.ContentLength, "Content-Length"); err != nil {
				return err
			}
		}
		if rd.rng != nil && (resp.ContentLength < 0 || resp.ContentLength > maxIgnoredRange) {
			// Not permanent: another aggregator may honour Range.
			what := "of unknown size"
			if resp.ContentLength >= 0 {
				what = "of " + FormatSize(resp.ContentLength)
			}
			return fmt.Errorf("%w: the aggregator ignored Range and sent the whole blob %s; that is accepted only up to %s",
				ErrBodyTooLarge, what, FormatSize(maxIgnoredRange))
		}
		// The server ignored Range (or none was sent): skip what is
		// already written, or what precedes the span.
		skip = first
	}
	need := int64(-1) // bytes still to come, when known
	if want := rd.want(); want >= 0 {
		need = want - rd.w.n
	}
	if rd.ro.spaceDir != "" && need >= 0 && !rd.checked {
		if err := CheckFreeSpace(rd.ro.spaceDir, need); err != nil {
			return permanent(err)
		}
		rd.checked = true
	}
	if skip > 0 {
		if _, err := io.CopyN(io.Discard, resp.Body, skip); err != nil {
			return fmt.Errorf("skip %d bytes already read: %w", skip, err)
		}
	}
	limit := need
	if limit < 0 {
		// Size unknown (no Content-Length): the bound, and not a byte more.
		limit = rd.bound - rd.w.n
	}
	bp := copyBufs.Get().(*[]byte)
	_, err := io.CopyBuffer(rd.w, io.LimitReader(resp.Body, limit), *bp)
	copyBufs.Put(bp)
	if err != nil {
		var we *writeError
		if errors.As(err, &we) {
			return permanent(we)
		}
		return fmt.Errorf("body cut off after %d bytes: %w", rd.w.n, err)
	}
	// Only the caller's expectation says how long a body without
	// Content-Length should be; a clean end before it is a wrong size.
	onlyExpected := rd.rng == nil && rd.total < 0 && rd.ro.expected >= 0
	if need >= 0 && rd.w.n < rd.want() {
		if onlyExpected {
			return permanent(fmt.Errorf("%w: the body ended after %d bytes, %d expected", ErrMismatch, rd.w.n, rd.ro.expected))
		}
		// net/http reports a body short of its Content-Length as an
		// error above; this one was chunked and ended early.
		return fmt.Errorf("body ended after %d of %d bytes: %w", rd.w.n, rd.want(), io.ErrUnexpectedEOF)
	}
	if resp.ContentLength >= 0 {
		return nil // net/http delivers no byte past Content-Length
	}
	// No Content-Length: the body must end exactly here.
	var one [1]byte
	n, err := io.ReadFull(resp.Body, one[:])
	switch {
	case n > 0 && onlyExpected:
		return permanent(fmt.Errorf("%w: %w: the body goes on past the %d bytes expected", ErrBodyTooLarge, ErrMismatch, rd.ro.expected))
	case n > 0 && need < 0:
		return permanent(fmt.Errorf("%w: the body goes on past the read limit of %s", ErrBodyTooLarge, FormatSize(rd.bound)))
	case n > 0:
		return protocolErrorf("the body goes on past the %d bytes announced", rd.want())
	case err != io.EOF:
		return fmt.Errorf("body cut off after %d bytes: %w", rd.w.n, err)
	}
	return nil
}

// ReadToFile reads the blob into path atomically: into a temporary file
// beside it, fsynced and renamed over path only when the whole blob
// arrived and its blob id was checked (as Read's; a quilt patch is not). An existing file at path is replaced. The file gets mode 0600.
// Before writing a byte it checks that the directory's filesystem has
// room for the blob (its expected size, else its Content-Length) plus a
// margin, failing with ErrNoSpace; a download of unknown size is checked
// every 64 MiB.
func (c *Client) ReadToFile(ctx context.Context, blobID, path string, opts ...ReadOption) (ReadResult, error) {
	if _, err := readTarget(blobID); err != nil {
		return ReadResult{}, err
	}
	dir := filepath.Dir(path)
	opts = append(opts[:len(opts):len(opts)], WithFreeSpace(dir))
	ro := readOptions{expected: -1}
	for _, opt := range opts {
		opt(&ro)
	}
	if ro.expected >= 0 {
		// Before the temporary file exists, so a refusal leaves nothing.
		if err := CheckFreeSpace(dir, ro.expected); err != nil {
			return ReadResult{}, err
		}
	}
	f, err := atomicfile.Create(path, 0o600)
	if err != nil {
		return ReadResult{}, err
	}
	defer f.Abort()
	t, _ := readTarget(blobID)
	var res ReadResult
	if t.patch {
		res, err = c.read(ctx, t, f.File, nil, opts)
	} else {
		res, err = c.readChecked(ctx, t, fileSink{f.File}, opts)
	}
	if err != nil {
		return ReadResult{}, err
	}
	if err := f.Commit(); err != nil {
		return ReadResult{}, err
	}
	return res, nil
}

// spaceGuardEvery is how many bytes spaceGuard lets pass between checks.
const spaceGuardEvery = 64 << 20

// spaceGuard stops a download of unknown size (or a disk filled by
// someone else meanwhile) before it eats the free-space margin.
type spaceGuard struct {
	w     io.Writer
	dir   string
	since int64
}

func (g *spaceGuard) Write(p []byte) (int, error) {
	if g.since += int64(len(p)); g.since >= spaceGuardEvery {
		g.since = 0
		if err := CheckFreeSpace(g.dir, int64(len(p))); err != nil {
			return 0, err
		}
	}
	return g.w.Write(p)
}

// Verify reads the blob back (into a hash, not to disk) and checks that it
// is size bytes with SHA-256 want. A difference is ErrMismatch; an answer
// announcing a different size fails before its body is read.
func (c *Client) Verify(ctx context.Context, blobID string, want [32]byte, size int64, opts ...ReadOption) (ReadResult, error) {
	h := sha256.New()
	opts = append(opts[:len(opts):len(opts)], WithExpectedSize(size))
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

// parseContentRange parses "bytes first-last/size" with a known size: the
// only form a 206 answer to a closed range may take.
func parseContentRange(v string) (first, last, size int64, err error) {
	bad := func(what string) (int64, int64, int64, error) {
		return 0, 0, 0, fmt.Errorf("Content-Range %q %s", sanitize(v, 80), what)
	}
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return bad("is not a byte range")
	}
	rng, sz, ok := strings.Cut(rest, "/")
	if !ok {
		return bad("has no size")
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return bad("has no range")
	}
	first, ok1 := parseDecimal(a)
	last, ok2 := parseDecimal(b)
	size, ok3 := parseDecimal(sz)
	if !ok1 || !ok2 || !ok3 || last < first || size <= last {
		return bad("is malformed")
	}
	return first, last, size, nil
}

// parseDecimal accepts plain ASCII digits only (no sign, no spaces, at
// most 18 of them, so no overflow): strconv alone takes "+5".
func parseDecimal(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
