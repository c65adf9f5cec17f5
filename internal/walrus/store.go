package walrus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/hermesd/hermesd/internal/redact"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// maxStoreResponse caps how much of a publisher's answer is read.
const maxStoreResponse = 1 << 20

// Body is the content of a blob to store. Open is called once per attempt
// and must return the same Size bytes every time.
type Body interface {
	Open() (io.ReadCloser, error)
	Size() int64
}

// FileBody is the content of the file at path, typically a spool file.
// Open fails if the file's size changed since FileBody was called.
func FileBody(path string) (Body, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("stat blob file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("blob file %s is not a regular file", path)
	}
	return &fileBody{path: path, size: st.Size()}, nil
}

type fileBody struct {
	path string
	size int64
}

func (f *fileBody) Size() int64 { return f.size }

func (f *fileBody) Open() (io.ReadCloser, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	if st.Size() != f.size {
		fh.Close()
		return nil, fmt.Errorf("blob file %s changed size from %d to %d bytes", f.path, f.size, st.Size())
	}
	return fh, nil
}

// BytesBody is an in-memory body, for small blobs and tests.
func BytesBody(b []byte) Body { return bytesBody(b) }

type bytesBody []byte

func (b bytesBody) Size() int64                  { return int64(len(b)) }
func (b bytesBody) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }

// StoreOption adjusts one Store call.
type StoreOption func(*storeOptions)

type storeOptions struct {
	epochs    int
	permanent bool
}

// WithEpochs stores the blob for n epochs ahead instead of Config.Epochs.
func WithEpochs(n int) StoreOption { return func(o *storeOptions) { o.epochs = n } }

// WithPermanent overrides Config.Permanent.
func WithPermanent(p bool) StoreOption { return func(o *storeOptions) { o.permanent = p } }

// StoreResult is what a publisher reported for a stored blob, from either a
// newlyCreated or an alreadyCertified answer.
type StoreResult struct {
	BlobID string
	Size   int64 // bytes sent; for newlyCreated also what the publisher reported
	// EndEpoch is exclusive: the blob expires when this epoch begins.
	EndEpoch uint32
	// AlreadyCertified is true when the publisher found the same content
	// certified long enough and registered nothing new.
	AlreadyCertified bool
	// ObjectID is the Sui Blob object (newlyCreated, or alreadyCertified
	// when the publisher owns a deletable copy); SharedObjectID is the
	// SharedBlob (share=true).
	ObjectID        string
	SharedObjectID  string
	RegisteredEpoch uint32 // newlyCreated only
	Deletable       bool   // newlyCreated only
	Cost            uint64 // FROST, newlyCreated only
	TxDigest        string // certification event (alreadyCertified)
	// EncodedLength is the blob's encoded length as the publisher
	// reported it (storage.storageSize, or the resource operation's
	// encodedLength): what storage is paid for. newlyCreated only.
	EncodedLength uint64
	// StartEpoch is the first epoch of the blob's storage (newlyCreated).
	StartEpoch uint32
	// ResourceOperation is how the publisher got the storage:
	// registerFromScratch, reuseStorage, reuseRegistration, reuseAndExtend
	// or reuseAndExtendNonCertified ("" when the answer did not say).
	ResourceOperation string
	// EpochsPaid is the epochs of storage this store bought: epochsAhead
	// (registerFromScratch), epochsExtended (the extensions), 0 for reused
	// storage; without a resource operation, the storage's span.
	EpochsPaid uint32
	// Clamped says what the answer reported beyond Walrus's formula for
	// the bytes sent (the epochs asked for, Config.Shards and Price), ""
	// when nothing: those figures above are the formula's bound instead
	// (checkCharge).
	Clamped string

	Publisher string // scheme://host[:port] of the publisher that answered
	Attempts  int
	Duration  time.Duration
}

// Store uploads body to a publisher and returns the blob's id and lifetime.
// The body is streamed from body.Open on each attempt, never buffered.
func (c *Client) Store(ctx context.Context, body Body, opts ...StoreOption) (StoreResult, error) {
	size := body.Size()
	if size < 0 {
		return StoreResult{}, fmt.Errorf("walrus: body size %d is negative", size)
	}
	if size > c.cfg.MaxBlobSize {
		return StoreResult{}, fmt.Errorf("%w: blob is %s, over the publisher limit of %s: use a publisher that accepts larger bodies and raise walrus.max_blob_size, or shrink the brain",
			ErrTooLarge, FormatSize(size), FormatSize(c.cfg.MaxBlobSize))
	}
	var result StoreResult
	res, err := c.put(ctx, "/v1/blobs", "application/octet-stream", size, body.Open, func(data []byte) error {
		r, err := c.parseStore(data)
		if err != nil {
			return err
		}
		if !r.AlreadyCertified && r.Size != size {
			return protocolErrorf("publisher reports %d bytes stored, %d were sent", r.Size, size)
		}
		r.Size = size
		result = r
		return nil
	}, opts)
	if err != nil {
		return StoreResult{}, err
	}
	result.Publisher, result.Attempts, result.Duration = res.Publisher, res.Attempts, res.Duration
	// A body the shards cannot encode has no honest charge: 0 holds all.
	enc, _ := walruscost.EncodedLength(uint64(size), c.cfg.Shards)
	c.checkCharge(&result, enc, c.storeEpochs(opts))
	c.log.Debug("walrus: stored blob", "blob_id", result.BlobID, "size", size, "end_epoch", result.EndEpoch,
		"already_certified", result.AlreadyCertified, "publisher", result.Publisher,
		"attempts", result.Attempts, "duration", result.Duration)
	return result, nil
}

// putResult is what put tells about the request that succeeded.
type putResult struct {
	Publisher string
	Attempts  int
	Duration  time.Duration
}

// put sends a store request (PUT path, with the store query of opts) to
// the publishers, retried and failed over, its body of size bytes opened
// anew for each attempt, and hands a 200 answer (bounded) to handle,
// whose error fails the attempt: retried unless permanent.
func (c *Client) put(ctx context.Context, path, contentType string, size int64, open func() (io.ReadCloser, error),
	handle func(data []byte) error, opts []StoreOption) (putResult, error) {
	so := storeOptions{epochs: c.cfg.Epochs, permanent: c.cfg.Permanent}
	for _, opt := range opts {
		opt(&so)
	}
	if err := checkEpochs(so.epochs); err != nil {
		return putResult{}, fmt.Errorf("%w: epochs: %v", ErrConfig, err)
	}
	if len(c.publishers) == 0 {
		return putResult{}, fmt.Errorf("%w: no publishers configured", ErrConfig)
	}
	if err := c.gate(); err != nil {
		return putResult{}, err
	}
	ctx, cancel := c.opContext(ctx)
	defer cancel()

	q := url.Values{}
	q.Set("epochs", strconv.Itoa(so.epochs))
	if so.permanent {
		q.Set("permanent", "true")
	}
	if c.cfg.SendObjectTo != "" {
		q.Set("send_object_to", c.cfg.SendObjectTo)
	}
	if c.cfg.Share {
		q.Set("share", "true")
	}
	query := q.Encode()

	op := c.newOperation(ctx, "store", c.publishers)
	var sent atomic.Int64
	op.attemptBytes = sent.Load
	body := retryablehttp.ReaderFunc(func() (io.Reader, error) {
		sent.Store(0)
		if err := c.gate(); err != nil {
			return nil, err
		}
		if size == 0 {
			return http.NoBody, nil
		}
		rc, err := open()
		if err != nil {
			return nil, fmt.Errorf("open blob body: %w", err)
		}
		if c.cfg.WriteGate != nil {
			// Checked per chunk (no sendfile then): a store stopped mid-body
			// is not completed.
			rc = &gatedBody{rc: rc, gate: c.gate}
		}
		return countBody(rc, &sent), nil
	})
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPut, op.endpoint()+path+"?"+query, body)
	if err != nil {
		return putResult{}, fmt.Errorf("walrus store: %w", c.scrub.Error(err))
	}
	// retryablehttp only learns lengths from in-memory readers; without this
	// the upload would go out chunked.
	req.ContentLength = size
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	if err := c.authorize(ctx, req.Request); err != nil {
		return putResult{}, err
	}
	op.prepare = func(r *http.Request) error {
		u, err := url.Parse(op.endpoint() + path + "?" + query)
		if err != nil {
			return permanent(c.scrub.Error(err))
		}
		r.URL, r.Host = u, u.Host
		return c.authorize(r.Context(), r)
	}

	req.SetResponseHandler(func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK {
			return op.statusError(resp)
		}
		defer resp.Body.Close()
		if resp.ContentLength > maxStoreResponse {
			return permanent(fmt.Errorf("%w: %w: store response of %d bytes, more than the %d allowed",
				ErrProtocol, ErrBodyTooLarge, resp.ContentLength, maxStoreResponse))
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxStoreResponse+1))
		if err != nil {
			// The blob may well be stored; retrying costs at most another
			// registration, and losing the id would lose the blob.
			return fmt.Errorf("read store response: %w", err)
		}
		if len(data) > maxStoreResponse {
			return permanent(fmt.Errorf("%w: %w: store response goes on past the %d bytes allowed",
				ErrProtocol, ErrBodyTooLarge, maxStoreResponse))
		}
		return handle(data)
	})

	start := time.Now()
	resp, err := op.retryClient().Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	if err := op.finish(ctx, "", err); err != nil {
		return putResult{}, err
	}
	return putResult{Publisher: redact.URL(op.endpoint()), Attempts: op.attempts, Duration: time.Since(start)}, nil
}

// parseStore parses a publisher's store result (the whole answer of a
// blob store, the blobStoreResult of a quilt store), its errors redacted:
// a failed store (the error variant) is retried, anything else not.
func (c *Client) parseStore(data []byte) (StoreResult, error) {
	r, err := parseStoreResponse(data)
	if err != nil {
		err = c.redactStoreError(err, data)
	}
	if errors.Is(err, errStoreFailed) {
		return StoreResult{}, err
	}
	if err != nil {
		return StoreResult{}, permanent(err)
	}
	return r, nil
}

// redactStoreError gives a parse error of a publisher's answer a text
// without the endpoints' secrets. The text quotes the answer, cut to a
// bound, and a cut could split a secret the scrubber then misses: so the
// text comes from parsing the redacted answer, while the error itself
// (for errors.Is) stays the one of the real answer, which alone decides.
func (c *Client) redactStoreError(err error, data []byte) error {
	if c.scrub == nil {
		return err
	}
	red := c.scrub.String(string(data))
	if red == string(data) {
		return c.scrub.Error(err)
	}
	_, err2 := parseStoreResponse([]byte(red))
	if err2 == nil {
		return c.scrub.Error(err)
	}
	return redact.WithText(err, c.scrub.String(err2.Error()))
}

// authorize sets the bearer token, if any, on a store request.
func (c *Client) authorize(ctx context.Context, r *http.Request) error {
	tok := c.cfg.BearerToken
	if c.cfg.TokenSource != nil {
		t, err := c.cfg.TokenSource(ctx)
		if err != nil {
			return permanent(fmt.Errorf("walrus: publisher token: %w", err))
		}
		tok = t
	}
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return nil
}

// countBody counts the bytes the transport takes from rc. A body that is
// a file (a syscall.Conn, like *os.File) stays one, so that the transport
// can send it with sendfile(2) over plain TCP; those bytes are counted
// from the file's offset (countingFile, on unix).
func countBody(rc io.ReadCloser, n *atomic.Int64) io.ReadCloser {
	if f, ok := rc.(fileReadCloser); ok && canCountFile {
		return &countingFile{countingReader{rc: f, n: n}, f}
	}
	return &countingReader{rc: rc, n: n}
}

type fileReadCloser interface {
	io.ReadCloser
	syscall.Conn
}

// countingFile is a counted body that passes its file to sendfile(2).
type countingFile struct {
	countingReader
	f fileReadCloser
}

func (c *countingFile) SyscallConn() (syscall.RawConn, error) {
	return aroundFile(c.f, func(fd uintptr, send func() bool) bool {
		before, err1 := fileOffset(fd)
		done := send()
		if after, err2 := fileOffset(fd); err1 == nil && err2 == nil && after > before {
			c.n.Add(after - before)
			if testHookFileSent != nil {
				testHookFileSent(after - before)
			}
		}
		return done
	})
}

// aroundFile returns f's RawConn with around wrapped about each Read
// callback: sendfile(2) moves a file body inside one, with no Read of
// ours to count or watch it.
func aroundFile(f syscall.Conn, around func(fd uintptr, send func() bool) bool) (syscall.RawConn, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	return fileRawConn{rc, around}, nil
}

type fileRawConn struct {
	syscall.RawConn
	around func(fd uintptr, send func() bool) bool
}

func (c fileRawConn) Read(f func(fd uintptr) bool) error {
	return c.RawConn.Read(func(fd uintptr) bool { return c.around(fd, func() bool { return f(fd) }) })
}

// testHookFileSent, when set (tests), sees what the transport took from a
// file body without reading it (sendfile).
var testHookFileSent func(n int64)

// countingReader counts the bytes the transport has read from a body.
type countingReader struct {
	rc io.ReadCloser
	n  *atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.n.Add(int64(n))
	return n, err
}

func (r *countingReader) Close() error { return r.rc.Close() }

// The publisher's answer is exactly one of four variants. The service
// sends every field camelCase (serde rename_all_fields); the OpenAPI
// description spells the variants' own fields snake_case (blob_object,
// end_epoch, encoded_length, ...). Both spellings are accepted, one per
// field: an answer naming a field both ways is refused.
type storeResponse struct {
	NewlyCreated     json.RawMessage `json:"newlyCreated"`
	AlreadyCertified json.RawMessage `json:"alreadyCertified"`
	MarkedInvalid    json.RawMessage `json:"markedInvalid"`
	// Error is either the BlobStoreResult error variant
	// ({blobId, failurePhase, errorMsg}) or an API error body
	// ({code, status, message}) that arrived with status 200.
	Error json.RawMessage `json:"error"`
}

// variant is one result variant's fields by their names on the wire.
type variant map[string]json.RawMessage

// decodeVariant reads a variant's object; null or anything not an object
// is a protocol error.
func decodeVariant(name string, raw json.RawMessage) (variant, error) {
	var v variant
	if err := json.Unmarshal(raw, &v); err != nil || v == nil {
		return nil, fmt.Errorf("%w: %s is not an object", ErrProtocol, name)
	}
	return v, nil
}

// field decodes the field named camel (the service's spelling) or snake
// (the OpenAPI description's) into dst; ok is false when neither is
// there (or it is null).
func (v variant) field(camel, snake string, dst any) (ok bool, err error) {
	raw, hasCamel := v[camel]
	if alt, hasSnake := v[snake]; hasSnake && snake != camel {
		if hasCamel {
			return false, fmt.Errorf("%w: both %s and %s in one answer", ErrProtocol, camel, snake)
		}
		raw = alt
	}
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return false, fmt.Errorf("%w: %s: %v", ErrProtocol, camel, err)
	}
	return true, nil
}

// blobObject is the Sui Blob object of a newlyCreated answer: camelCase
// in the service and in the OpenAPI description alike.
type blobObject struct {
	ID              string  `json:"id"`
	RegisteredEpoch uint32  `json:"registeredEpoch"`
	BlobID          string  `json:"blobId"`
	Size            *uint64 `json:"size"`
	EncodingType    string  `json:"encodingType"`
	CertifiedEpoch  *uint32 `json:"certifiedEpoch"`
	Storage         *struct {
		ID          string `json:"id"`
		StartEpoch  uint32 `json:"startEpoch"`
		EndEpoch    uint32 `json:"endEpoch"`
		StorageSize uint64 `json:"storageSize"`
	} `json:"storage"`
	Deletable bool `json:"deletable"`
}

// eventID is a Sui event id. Its txDigest is a base58 string on the wire
// (the OpenAPI schema says an array of bytes); anything but a string is
// not kept.
type eventID struct {
	TxDigest json.RawMessage `json:"txDigest"`
}

func (e *eventID) digest() string {
	var s string
	if e == nil || json.Unmarshal(e.TxDigest, &s) != nil {
		return ""
	}
	return sanitize(s, 96)
}

// ErrMarkedInvalid means the publisher reports the blob marked invalid
// on chain: no store of the same bytes will ever be certified. The real
// publisher answers a blob store so with 500 (an internal error); a
// quilt store's answer carries the markedInvalid variant with status 200.
var ErrMarkedInvalid = errors.New("walrus: blob marked invalid")

// parseStoreResponse turns a publisher's 200 answer into a StoreResult.
// Size is what the publisher reported (0 for alreadyCertified).
func parseStoreResponse(data []byte) (StoreResult, error) {
	var sr storeResponse
	if err := json.Unmarshal(data, &sr); err != nil {
		return StoreResult{}, fmt.Errorf("%w: store response is not JSON: %v", ErrProtocol, err)
	}
	n := 0
	for _, raw := range []json.RawMessage{sr.NewlyCreated, sr.AlreadyCertified, sr.MarkedInvalid, sr.Error} {
		if len(raw) > 0 {
			n++
		}
	}
	if n != 1 {
		return StoreResult{}, fmt.Errorf("%w: store response has %d known results, want exactly one of newlyCreated, alreadyCertified, markedInvalid, error: %s",
			ErrProtocol, n, sanitize(string(data), 200))
	}
	switch {
	case len(sr.NewlyCreated) > 0:
		return parseNewlyCreated(sr.NewlyCreated)
	case len(sr.AlreadyCertified) > 0:
		return parseAlreadyCertified(sr.AlreadyCertified)
	case len(sr.MarkedInvalid) > 0:
		v, err := decodeVariant("markedInvalid", sr.MarkedInvalid)
		if err != nil {
			return StoreResult{}, err
		}
		var id string
		if _, err := v.field("blobId", "blob_id", &id); err != nil {
			return StoreResult{}, err
		}
		return StoreResult{}, fmt.Errorf("%w: the publisher reports blob %s marked invalid on chain (a fault of the network or the publisher; storing the same bytes again will not help)",
			ErrMarkedInvalid, sanitize(id, 64))
	default:
		v, err := decodeVariant("error", sr.Error)
		if err != nil {
			return StoreResult{}, err
		}
		var phase, msg, status, message string
		for _, f := range []struct {
			camel, snake string
			dst          *string
		}{{"failurePhase", "failure_phase", &phase}, {"errorMsg", "error_msg", &msg}, {"status", "status", &status}, {"message", "message", &message}} {
			if _, err := v.field(f.camel, f.snake, f.dst); err != nil {
				return StoreResult{}, err
			}
		}
		if msg == "" {
			msg = message
		}
		if phase == "" {
			phase = status
		}
		return StoreResult{}, fmt.Errorf("%w (%s): %s", errStoreFailed, sanitize(phase, 64), sanitize(msg, maxErrorExcerpt))
	}
}

func parseNewlyCreated(raw json.RawMessage) (StoreResult, error) {
	v, err := decodeVariant("newlyCreated", raw)
	if err != nil {
		return StoreResult{}, err
	}
	var (
		bo     blobObject
		op     json.RawMessage
		cost   uint64
		shared string
	)
	okBO, err := v.field("blobObject", "blob_object", &bo)
	if err != nil {
		return StoreResult{}, err
	}
	for _, f := range []struct {
		camel, snake string
		dst          any
	}{{"resourceOperation", "resource_operation", &op}, {"cost", "cost", &cost}, {"sharedBlobObject", "shared_blob_object", &shared}} {
		if _, err := v.field(f.camel, f.snake, f.dst); err != nil {
			return StoreResult{}, err
		}
	}
	if !okBO || bo.Storage == nil || bo.Size == nil {
		return StoreResult{}, fmt.Errorf("%w: newlyCreated lacks blobObject, its storage or its size", ErrProtocol)
	}
	if err := ValidateBlobID(bo.BlobID); err != nil {
		return StoreResult{}, fmt.Errorf("%w: newlyCreated: %v", ErrProtocol, err)
	}
	if *bo.Size > 1<<62 {
		return StoreResult{}, fmt.Errorf("%w: newlyCreated size %d is out of range", ErrProtocol, *bo.Size)
	}
	r := StoreResult{
		BlobID:          bo.BlobID,
		Size:            int64(*bo.Size),
		EndEpoch:        bo.Storage.EndEpoch,
		ObjectID:        bo.ID,
		SharedObjectID:  shared,
		RegisteredEpoch: bo.RegisteredEpoch,
		Deletable:       bo.Deletable,
		Cost:            cost,
		EncodedLength:   bo.Storage.StorageSize,
		StartEpoch:      bo.Storage.StartEpoch,
	}
	if bo.Storage.EndEpoch > bo.Storage.StartEpoch {
		r.EpochsPaid = bo.Storage.EndEpoch - bo.Storage.StartEpoch
	}
	resourceOp(&r, op)
	return r, nil
}

func parseAlreadyCertified(raw json.RawMessage) (StoreResult, error) {
	v, err := decodeVariant("alreadyCertified", raw)
	if err != nil {
		return StoreResult{}, err
	}
	var (
		id       string
		end      uint32
		event    eventID
		object   string
		hasEvent bool
	)
	if _, err := v.field("blobId", "blob_id", &id); err != nil {
		return StoreResult{}, err
	}
	if err := ValidateBlobID(id); err != nil {
		return StoreResult{}, fmt.Errorf("%w: alreadyCertified: %v", ErrProtocol, err)
	}
	hasEnd, err := v.field("endEpoch", "end_epoch", &end)
	if err != nil {
		return StoreResult{}, err
	}
	if !hasEnd {
		return StoreResult{}, fmt.Errorf("%w: alreadyCertified lacks endEpoch", ErrProtocol)
	}
	if hasEvent, err = v.field("event", "event", &event); err != nil {
		return StoreResult{}, err
	}
	if _, err := v.field("object", "object", &object); err != nil {
		return StoreResult{}, err
	}
	r := StoreResult{BlobID: id, EndEpoch: end, AlreadyCertified: true, ObjectID: object}
	if hasEvent {
		r.TxDigest = event.digest()
	}
	return r, nil
}

// resourceOp reads a newlyCreated answer's resource operation, one of
// {"registerFromScratch": {encodedLength, epochsAhead}},
// {"reuseStorage"|"reuseRegistration": {encodedLength}} and
// {"reuseAndExtend"|"reuseAndExtendNonCertified": {encodedLength,
// epochsExtended}} (the inner names snake_case in the OpenAPI
// description), into r. Any other shape leaves r as it is: the storage's
// span then counts as the epochs paid.
func resourceOp(r *StoreResult, raw json.RawMessage) {
	var ops map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &ops) != nil || len(ops) != 1 {
		return
	}
	for name, body := range ops {
		var v variant
		if json.Unmarshal(body, &v) != nil || v == nil {
			return
		}
		var (
			encoded        uint64
			ahead, extends uint32
		)
		if _, err := v.field("encodedLength", "encoded_length", &encoded); err != nil {
			return
		}
		hasAhead, err1 := v.field("epochsAhead", "epochs_ahead", &ahead)
		hasExtends, err2 := v.field("epochsExtended", "epochs_extended", &extends)
		if err1 != nil || err2 != nil {
			return
		}
		r.ResourceOperation = sanitize(name, 64)
		if r.EncodedLength == 0 {
			r.EncodedLength = encoded
		}
		switch {
		case hasAhead:
			r.EpochsPaid = ahead
		case hasExtends:
			r.EpochsPaid = extends
		default:
			r.EpochsPaid = 0 // storage or registration reused: paid before
		}
	}
}

// Charge is what this store cost, for the cost ledger: a newly created
// blob's encoded length, that length times the epochs paid for, the
// publisher's cost and walruscost.SuiTxPerBlob Sui transactions; an
// alreadyCertified answer costs nothing.
func (r StoreResult) Charge() walruscost.Charge {
	if r.AlreadyCertified {
		return walruscost.Charge{}
	}
	c := walruscost.NewBlob(r.EncodedLength, uint64(r.EpochsPaid), r.Cost)
	c.Clamped = r.Clamped != ""
	return c
}

// errStoreFailed marks the "error" result variant: the publisher tried
// and failed (in some phase), which another attempt may not repeat.
var errStoreFailed = errors.New("walrus: publisher reports a failed store")

// FormatSize renders a byte count for people: "14.2 MiB", "512 B".
func FormatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// gate is Config.WriteGate's answer (nil without one).
func (c *Client) gate() error {
	if c.cfg.WriteGate == nil {
		return nil
	}
	if err := c.cfg.WriteGate(); err != nil {
		return fmt.Errorf("walrus store refused: %w", err)
	}
	return nil
}

// gatedBody asks the write gate before every chunk it hands on.
type gatedBody struct {
	rc   io.ReadCloser
	gate func() error
}

func (g *gatedBody) Read(p []byte) (int, error) {
	if err := g.gate(); err != nil {
		return 0, err
	}
	return g.rc.Read(p)
}

func (g *gatedBody) Close() error { return g.rc.Close() }
