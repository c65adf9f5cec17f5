package localwalrus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The domains of the daemon's JSON errors: its own, and the global one
// of internal errors.
const (
	errorDomain  = "daemon.walrus.space"
	globalDomain = "global"
)

type ctxKey struct{}

// reqState follows one request through ServeHTTP and the handlers.
type reqState struct {
	info  RequestInfo
	fault Fault
	rec   *recorder
}

func stateOf(r *http.Request) *reqState { return r.Context().Value(ctxKey{}).(*reqState) }

// ServeHTTP routes a request, applying any injected fault and recording
// the outcome.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.inflight.enter()
	defer s.inflight.leave() // after OnRequest below
	route := routeOf(r)
	fault, latency, replaced := s.faults.pick(route)
	rec := &recorder{ResponseWriter: w}
	st := &reqState{fault: fault, rec: rec, info: RequestInfo{
		Route: route, Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Range: r.Header.Get("Range"), Start: time.Now(),
	}}
	defer func() {
		st.info.End = time.Now()
		st.info.Status = rec.status
		if rec.status == 0 && !rec.hijacked {
			st.info.Status = http.StatusOK // net/http's implicit 200
		}
		st.info.BytesOut = rec.n
		s.stats.add(&st.info)
		s.log.Debug("localwalrus: request", "method", r.Method, "path", r.URL.Path, "status", st.info.Status,
			"fault", st.info.Fault, "bytes_in", st.info.BytesIn, "bytes_out", st.info.BytesOut,
			"duration", st.info.End.Sub(st.info.Start))
		if s.cfg.OnRequest != nil {
			s.cfg.OnRequest(st.info)
		}
	}()
	if latency > 0 {
		s.held.Add(1)
		defer s.held.Add(-1)
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-replaced:
			t.Stop()
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	switch fault.Kind {
	case FaultStatus:
		st.info.Fault = FaultStatus
		writeFaultStatus(rec, route, fault)
		return
	case FaultRedirect:
		st.info.Fault = FaultRedirect
		writeRedirect(rec, r, fault)
		return
	case FaultEndless:
		st.info.Fault = FaultEndless
		if route == RoutePublisher {
			// Take the upload first, as a publisher would, bounded as ever.
			limit := s.cfg.MaxBodySize
			if r.URL.Path == "/v1/quilts" {
				limit = s.cfg.MaxQuiltBodySize
			}
			n, _ := io.Copy(io.Discard, http.MaxBytesReader(rec, r.Body, limit))
			st.info.BytesIn = n
		}
		writeEndless(r.Context(), rec, route, fault.Length)
		return
	}
	s.mux.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), ctxKey{}, st)))
}

// recorder notes the status and body size a handler sends.
type recorder struct {
	http.ResponseWriter
	status   int
	n        int64
	hijacked bool
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.n += int64(n)
	return n, err
}

// ReadFrom passes a body copied from a file to the connection's own
// ReadFrom (sendfile(2) for a blob read), counting it like Write.
func (r *recorder) ReadFrom(src io.Reader) (int64, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := r.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(writerOnly{r.ResponseWriter}, src)
	}
	r.n += n
	return n, err
}

// writerOnly hides everything but Write (io.Copy would call ReadFrom).
type writerOnly struct{ io.Writer }

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// cut ends the connection without completing the response: with a TCP
// reset, or with an orderly close that leaves the body short.
func cut(w *recorder, reset bool) {
	rc := http.NewResponseController(w)
	if w.status != 0 {
		rc.Flush()
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): let net/http abort the stream.
		panic(http.ErrAbortHandler)
	}
	w.hijacked = true
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		tc.SetLinger(0)
	}
	conn.Close()
}

func writeFaultStatus(w http.ResponseWriter, route Route, f Fault) {
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	switch f.Status {
	case http.StatusTooManyRequests:
		who := "publisher"
		if route == RouteAggregator {
			who = "aggregator"
		}
		writeText(w, f.Status, "the "+who+" is receiving too many requests; please try again later")
	case http.StatusInternalServerError:
		writeInternalError(w, "injected fault")
	case http.StatusServiceUnavailable:
		writeAPIError(w, f.Status, "UNAVAILABLE", "BLOB_UNAVAILABLE", "the requested blob is currently not retrievable from Walrus; this may be transient — retry with backoff")
	case http.StatusGatewayTimeout:
		writeAPIError(w, f.Status, "DEADLINE_EXCEEDED", "INSUFFICIENT_CONFIRMATIONS", "the service timed-out while waiting for confirmations, please try again")
	case http.StatusUnavailableForLegalReasons:
		writeAPIError(w, f.Status, "UNAVAILABLE_FOR_LEGAL_REASONS", "FORBIDDEN_BLOB", "the requested metadata is blocked")
	default:
		writeText(w, f.Status, http.StatusText(f.Status))
	}
}

// endlessCap ends even an endless body whose client never hangs up.
const endlessCap = 1 << 40

// endlessChunk is what endless bodies repeat: blob-like bytes for reads,
// digits that keep a JSON string open for stores.
var endlessChunk, endlessJSON = func() ([]byte, []byte) {
	b := make([]byte, 32<<10)
	for i := range b {
		b[i] = byte(i*131 + i>>8)
	}
	return b, bytes.Repeat([]byte("0"), 32<<10)
}()

// writeEndless answers 200 with a body that goes on until the client
// leaves, or for length bytes (the announced Content-Length) when
// length > 0.
func writeEndless(ctx context.Context, w http.ResponseWriter, route Route, length int64) {
	limit := int64(endlessCap)
	if length > 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(length, 10))
		limit = length
	}
	chunk := endlessChunk
	var head []byte
	if route == RoutePublisher {
		w.Header().Set("Content-Type", "application/json")
		head, chunk = []byte(`{"newlyCreated":{"blobObject":{"id":"0x`), endlessJSON
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	w.WriteHeader(http.StatusOK)
	var sent int64
	p := head
	for sent < limit && ctx.Err() == nil {
		if len(p) == 0 {
			p = chunk
		}
		n, err := w.Write(p[:min(int64(len(p)), limit-sent)])
		sent += int64(n)
		if err != nil {
			return
		}
		p = p[n:]
	}
}

// writeRedirect sends the client to another origin with the same path
// and query.
func writeRedirect(w http.ResponseWriter, r *http.Request, f Fault) {
	code := f.Status
	if code < 300 || code > 399 {
		code = http.StatusTemporaryRedirect
	}
	target := f.Location
	if target == "" {
		target = otherLoopback(r.Host)
	}
	w.Header().Set("Location", strings.TrimRight(target, "/")+r.URL.RequestURI())
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(code)
}

// otherLoopback names this server's origin differently: 127.0.0.1 and
// localhost are different origins on the same listener.
func otherLoopback(host string) string {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = host, ""
	}
	if h == "localhost" {
		h = "127.0.0.1"
	} else {
		h = "localhost"
	}
	if port == "" {
		return "http://" + h
	}
	return "http://" + net.JoinHostPort(h, port)
}

// claimedLength is FaultLyingLength's Content-Length for a body of n
// bytes: the fault's, else half the truth (never the truth).
func claimedLength(f Fault, n int64) int64 {
	switch {
	case f.Length > 0:
		return f.Length
	case n == 0:
		return 1
	}
	return n / 2
}

// writeText answers with a plain-text body, as axum's rejections do.
func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
	w.WriteHeader(status)
	io.WriteString(w, msg)
}

// errorInfo is one entry of an error's details: an ErrorInfo (reason,
// domain, metadata), which every error carries, or a DebugInfo
// (stackEntries, detail), which internal errors add.
type errorInfo struct {
	Type         string          `json:"@type"`
	Reason       string          `json:"reason,omitempty"`
	Domain       string          `json:"domain,omitempty"`
	Metadata     *map[string]any `json:"metadata,omitempty"`
	StackEntries *[]string       `json:"stackEntries,omitempty"`
	Detail       string          `json:"detail,omitempty"`
}

// statusBody is the AIP-193 error body, fields in the daemon's order.
type statusBody struct {
	Error struct {
		Status  string      `json:"status"`
		Code    int         `json:"code"`
		Message string      `json:"message"`
		Details []errorInfo `json:"details"`
	} `json:"error"`
}

func writeAPIError(w http.ResponseWriter, code int, status, reason, message string) {
	writeStatus(w, code, status, message, errorInfo{Type: "ErrorInfo", Reason: reason, Domain: errorDomain, Metadata: &map[string]any{}})
}

func writeStatus(w http.ResponseWriter, code int, status, message string, details ...errorInfo) {
	var b statusBody
	b.Error.Status, b.Error.Code, b.Error.Message, b.Error.Details = status, code, message, details
	writeJSON(w, code, b)
}

// writeInternalError answers 500 as the daemon does for an internal
// error: a fixed message, reason INTERNAL_ERROR in the global domain,
// and a DebugInfo, whose detail (a trace id there) says here what went
// wrong.
func writeInternalError(w http.ResponseWriter, detail string) {
	writeStatus(w, http.StatusInternalServerError, "INTERNAL", "an internal error has occurred, please report it",
		errorInfo{Type: "ErrorInfo", Reason: "INTERNAL_ERROR", Domain: globalDomain, Metadata: &map[string]any{}},
		errorInfo{Type: "DebugInfo", StackEntries: &[]string{}, Detail: "localwalrus: " + detail})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		writeText(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(code)
	w.Write(data)
}

// The axum body-limit rejection.
func writeTooLarge(w http.ResponseWriter) {
	writeText(w, http.StatusRequestEntityTooLarge, "Failed to buffer the request body: length limit exceeded")
}

func writeInternal(w http.ResponseWriter, err error) { writeInternalError(w, err.Error()) }

// Store responses, camelCase and in the daemon's field order.
type storageJSON struct {
	ID          string `json:"id"`
	StartEpoch  uint32 `json:"startEpoch"`
	EndEpoch    uint32 `json:"endEpoch"`
	StorageSize uint64 `json:"storageSize"`
}

type blobObjectJSON struct {
	ID              string      `json:"id"`
	RegisteredEpoch uint32      `json:"registeredEpoch"`
	BlobID          string      `json:"blobId"`
	Size            uint64      `json:"size"`
	EncodingType    string      `json:"encodingType"`
	CertifiedEpoch  *uint32     `json:"certifiedEpoch"`
	Storage         storageJSON `json:"storage"`
	Deletable       bool        `json:"deletable"`
}

type registerFromScratchJSON struct {
	EncodedLength uint64 `json:"encodedLength"`
	EpochsAhead   uint32 `json:"epochsAhead"`
}

type newlyCreatedJSON struct {
	BlobObject        blobObjectJSON `json:"blobObject"`
	ResourceOperation struct {
		RegisterFromScratch registerFromScratchJSON `json:"registerFromScratch"`
	} `json:"resourceOperation"`
	Cost             uint64 `json:"cost"`
	SharedBlobObject string `json:"sharedBlobObject,omitempty"`
}

type eventJSON struct {
	TxDigest string `json:"txDigest"`
	EventSeq string `json:"eventSeq"`
}

type alreadyCertifiedJSON struct {
	BlobID   string     `json:"blobId"`
	Event    *eventJSON `json:"event,omitempty"`
	Object   string     `json:"object,omitempty"`
	EndEpoch uint32     `json:"endEpoch"`
}

func (s *Server) putBlob(w http.ResponseWriter, r *http.Request) {
	st := stateOf(r)
	q, ok := storeQuery(w, r)
	if !ok {
		return
	}
	if r.ContentLength > s.cfg.MaxBodySize {
		writeTooLarge(w)
		return
	}
	f, err := s.store.newUpload()
	if err != nil {
		writeInternal(w, err)
		return
	}
	defer os.Remove(f.Name()) // a no-op once the upload was renamed into place
	defer f.Close()
	h := newContentHasher()
	n, err := copyFull(io.MultiWriter(f, h), http.MaxBytesReader(w, r.Body, s.cfg.MaxBodySize))
	st.info.BytesIn = n
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeTooLarge(w)
			return
		}
		writeText(w, http.StatusBadRequest, "Failed to buffer the request body: "+err.Error())
		return
	}
	if st.fault.Kind == FaultReset {
		st.info.Fault = FaultReset
		cut(st.rec, true)
		return
	}
	if !s.checkStoreQuery(w, q) {
		return
	}
	if err := f.Sync(); err != nil {
		writeInternal(w, err)
		return
	}
	encoded, price, err := s.charge(n, q.epochs)
	if err != nil { // ruled out by the body limit New checks
		writeInternal(w, err)
		return
	}
	id, err := computeID(r.Context(), &s.ids, h.key(s.cfg.Shards), f)
	if err != nil {
		writeInternal(w, err)
		return
	}
	blobID := encodeBlobID(id)
	st.info.BlobID = blobID
	if networkFault(w, st, blobID, nil) {
		return
	}
	now := s.Epoch()
	out, err := s.store.commit(f.Name(), id, blobID, n, s.cfg.Shards, now, q.putParams)
	if err != nil {
		writeInternal(w, err)
		return
	}

	s.writeStored(w, st, storeAnswer(out, blobID, n, q.epochs, encoded, price))
}

// networkFault answers a store of blobID (a quilt's when quilt is set:
// the answer's wrapper) as the publisher does when the request's fault is
// the network's (FaultMarkedInvalid, FaultStoreFailed), and reports
// whether it did.
func networkFault(w http.ResponseWriter, st *reqState, blobID string, quilt func(result any) any) bool {
	var result any
	switch st.fault.Kind {
	case FaultMarkedInvalid:
		if quilt == nil {
			writeInternalError(w, "the blob was marked invalid, which is likely a system error, please report it")
			st.info.Fault = FaultMarkedInvalid
			return true
		}
		result = map[string]any{"markedInvalid": map[string]any{
			"blobId": blobID, "event": eventJSON{TxDigest: randomDigest(), EventSeq: "0"}}}
	case FaultStoreFailed:
		result = map[string]any{"error": map[string]any{
			"blobId": blobID, "failurePhase": "with_certify_and_extend_result",
			"errorMsg": "could not certify the blob (injected fault)"}}
	default:
		return false
	}
	st.info.Fault = st.fault.Kind
	if quilt != nil {
		result = quilt(result)
	}
	writeJSON(w, http.StatusOK, result)
	return true
}

// storeQuery parses a store's query (a blob's or a quilt's), or answers
// 400 as axum's extractor does and reports false.
func storeQuery(w http.ResponseWriter, r *http.Request) (publisherQuery, bool) {
	q, err := parsePublisherQuery(r.URL.RawQuery)
	if err != nil {
		writeText(w, http.StatusBadRequest, "Failed to deserialize query string: "+err.Error())
		return q, false
	}
	return q, true
}

// checkStoreQuery checks what the daemon checks after taking a store's
// body; it answers 400 and reports false for a request it refuses.
func (s *Server) checkStoreQuery(w http.ResponseWriter, q publisherQuery) bool {
	if q.deletable && q.permanent {
		writeAPIError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "INVALID_BLOB_PERSISTENCE", "the blob cannot be defined as both deletable and permanent")
		return false
	}
	if q.epochs == 0 || q.epochs > s.cfg.MaxEpochsAhead {
		writeAPIError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "MALFORMED_REQUEST",
			fmt.Sprintf("the request is malformed: epochs must be between 1 and %d, got %d", s.cfg.MaxEpochsAhead, q.epochs))
		return false
	}
	return true
}

// storeAnswer is a store's answer, a blob's or a quilt's (the
// blobStoreResult of a quilt answer): newlyCreated for a new
// registration of the n bytes stored, with its encoded length and cost
// (Server.charge), else alreadyCertified.
func storeAnswer(out putOutcome, blobID string, n int64, epochs uint32, encoded, price uint64) any {
	if out.already {
		ac := alreadyCertifiedJSON{BlobID: blobID, EndEpoch: out.reg.EndEpoch}
		if out.reg.Permanent {
			ac.Event = &eventJSON{TxDigest: out.reg.TxDigest, EventSeq: "0"}
		} else {
			ac.Object = out.reg.ObjectID
		}
		return map[string]any{"alreadyCertified": ac}
	}
	certified := out.reg.CertifiedEpoch
	nc := newlyCreatedJSON{
		BlobObject: blobObjectJSON{
			ID:              out.reg.ObjectID,
			RegisteredEpoch: out.reg.RegisteredEpoch,
			BlobID:          blobID,
			Size:            uint64(n),
			EncodingType:    "RS2",
			CertifiedEpoch:  &certified,
			Storage: storageJSON{
				ID:          out.reg.StorageID,
				StartEpoch:  out.reg.RegisteredEpoch,
				EndEpoch:    out.reg.EndEpoch,
				StorageSize: encoded,
			},
			Deletable: !out.reg.Permanent,
		},
		Cost:             price,
		SharedBlobObject: out.reg.SharedObjectID,
	}
	nc.ResourceOperation.RegisterFromScratch = registerFromScratchJSON{EncodedLength: encoded, EpochsAhead: epochs}
	return map[string]any{"newlyCreated": nc}
}

// writeStored sends a store's answer, as the request's fault has it:
// whole, under a lying Content-Length, or cut off halfway (the store
// itself happened).
func (s *Server) writeStored(w http.ResponseWriter, st *reqState, resp any) {
	if st.fault.Kind == FaultLyingLength {
		// Stored, but the answer's Content-Length lies.
		data, _ := json.Marshal(resp)
		claim := claimedLength(st.fault, int64(len(data)))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.FormatInt(claim, 10))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:min(claim, int64(len(data)))])
		st.info.Fault = FaultLyingLength
		return
	}
	if st.fault.Kind == FaultTruncate {
		// Stored, but the answer is lost halfway.
		data, _ := json.Marshal(resp)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:cutPoint(st.fault.CutAt, int64(len(data)))])
		st.info.Fault = FaultTruncate
		cut(st.rec, false)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// uploadBuf is the unit in which an upload goes to its file and hash: a
// write(2) and a hash call per MiB rather than per network read.
const uploadBuf = 1 << 20

var uploadBufs = sync.Pool{New: func() any { b := make([]byte, uploadBuf); return &b }}

// copyFull copies src to dst in full uploadBuf units (the last one short).
func copyFull(dst io.Writer, src io.Reader) (int64, error) {
	bp := uploadBufs.Get().(*[]byte)
	defer uploadBufs.Put(bp)
	var n int64
	for {
		k, rerr := io.ReadFull(src, *bp)
		if k > 0 {
			w, err := dst.Write((*bp)[:k])
			n += int64(w)
			if err != nil {
				return n, err
			}
		}
		switch rerr {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			return n, nil
		default:
			return n, rerr
		}
	}
}

// cutPoint is where a fault cuts a body of n bytes.
func cutPoint(at, n int64) int64 {
	if at < 0 || at >= n {
		return n / 2
	}
	return at
}

func (s *Server) getBlob(w http.ResponseWriter, r *http.Request) {
	st := stateOf(r)
	// Extractor order of the daemon: path, query, then the handler's checks.
	id, ok := decodeBlobID(r.PathValue("id"))
	if !ok {
		writeText(w, http.StatusBadRequest, "Invalid URL: failed to parse "+strconv.Quote(r.PathValue("id"))+" as a blob ID")
		return
	}
	blobID := encodeBlobID(id)
	st.info.BlobID = blobID
	strict, skip, err := parseReadQuery(r.URL.RawQuery)
	if err != nil {
		writeText(w, http.StatusBadRequest, "Failed to deserialize query string: "+err.Error())
		return
	}
	if strict && skip {
		writeAPIError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "INVALID_CONSISTENCY_CHECK", "cannot set both strict and skip consistency check options")
		return
	}
	var rng *byteRange
	if hv, present := r.Header["Range"]; present {
		br, err := parseRange(hv[0])
		if err != nil {
			writeAPIError(w, http.StatusRequestedRangeNotSatisfiable, "RANGE_NOT_SATISFIABLE", "INVALID_BYTE_RANGE", "invalid byte range parameters: "+err.Error())
			return
		}
		rng = &br
	}
	var body io.ReadSeeker
	var size int64
	if b, ok := s.forged.get(blobID); ok {
		body, size = bytes.NewReader(b), int64(len(b))
	} else {
		m, f, ok := s.openBlob(w, id)
		if !ok {
			return
		}
		defer f.Close()
		body, size = f, m.Size
	}

	start, length, status := int64(0), size, http.StatusOK
	if rng != nil {
		if rng.last >= size {
			writeAPIError(w, http.StatusRequestedRangeNotSatisfiable, "RANGE_NOT_SATISFIABLE", "INVALID_BYTE_RANGE",
				fmt.Sprintf("invalid byte range parameters: range %d-%d is outside the blob of %d bytes", rng.first, rng.last, size))
			return
		}
		start, length, status = rng.first, rng.last-rng.first+1, http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", rng.first, rng.last, size))
	}
	if _, err := body.Seek(start, io.SeekStart); err != nil {
		writeInternal(w, err)
		return
	}
	readHeaders(w.Header(), r, blobID)
	s.sendBody(w, r, st, body, length, status)
}

// openBlob opens a blob readable now, or answers the request with 404
// (or 500) and reports false.
func (s *Server) openBlob(w http.ResponseWriter, id [32]byte) (*blobMeta, *os.File, bool) {
	m, path, err := s.store.lookup(id, s.Epoch())
	if err != nil {
		writeInternal(w, err)
		return nil, nil, false
	}
	var f *os.File
	if m != nil {
		// A concurrent request may have collected the blob at its expiry.
		if f, err = os.Open(path); errors.Is(err, os.ErrNotExist) {
			m = nil
		} else if err != nil {
			writeInternal(w, err)
			return nil, nil, false
		}
	}
	if m == nil {
		writeAPIError(w, http.StatusNotFound, "NOT_FOUND", "BLOB_NOT_FOUND", "the requested blob ID does not exist on Walrus, ensure that it was entered correctly")
		return nil, nil, false
	}
	return m, f, true
}

// readHeaders sets the headers the daemon gives every read: no sniffing,
// a day's caching, the ETag (the blob id; a quilt's id for its patches),
// and a Content-Type only where the request asks for one: an Accept
// without wildcards, else a GET's own Content-Type, else none (not even
// one net/http would sniff).
func readHeaders(h http.Header, r *http.Request, etag string) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "public, max-age=86400, stale-while-revalidate=3600")
	h.Set("ETag", etag)
	if ct := contentType(r); ct != "" {
		h.Set("Content-Type", ct)
	} else {
		h["Content-Type"] = nil
	}
}

// sendBody answers a read with length bytes of f (a blob file seeked to
// its start, which lets net/http use sendfile, or a quilt patch's reader),
// as the request's fault has it: whole, cut off, or under a lying
// Content-Length.
func (s *Server) sendBody(w http.ResponseWriter, r *http.Request, st *reqState, f io.Reader, length int64, status int) {
	h := w.Header()
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	if (st.fault.Kind == FaultReset || st.fault.Kind == FaultTruncate) && length > 0 && r.Method == http.MethodGet {
		st.info.Fault = st.fault.Kind
		w.WriteHeader(status)
		io.CopyN(st.rec, f, cutPoint(st.fault.CutAt, length))
		cut(st.rec, st.fault.Kind == FaultReset)
		return
	}
	if st.fault.Kind == FaultLyingLength && r.Method == http.MethodGet {
		st.info.Fault = FaultLyingLength
		claim := claimedLength(st.fault, length)
		h.Set("Content-Length", strconv.FormatInt(claim, 10))
		w.WriteHeader(status)
		// Past its claim net/http would refuse to write; short of it, it
		// closes the connection after the handler.
		io.CopyN(w, f, min(claim, length))
		return
	}
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	io.CopyN(w, f, length)
}

// contentType mirrors the request as the daemon does: an Accept without
// wildcards, else a GET's Content-Type, else nothing.
func contentType(r *http.Request) string {
	if a := r.Header.Get("Accept"); a != "" && !strings.Contains(a, "*") {
		return a
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && r.Method == http.MethodGet {
		return ct
	}
	return ""
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	writeText(w, http.StatusOK, "OK")
}

const apiPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>localwalrus</title></head>
<body>
<h1>localwalrus</h1>
<p>A Walrus-compatible publisher and aggregator for tests and local development.
Blob ids are Walrus's own (RS2 over the configured shards); quilts are laid out as QuiltV1.</p>
<ul>
<li><code>PUT /v1/blobs?epochs=N[&amp;permanent=true][&amp;deletable=true][&amp;force=true][&amp;send_object_to=0x…|&amp;share=true][&amp;encoding_type=RS2]</code> — store the raw body</li>
<li><code>GET /v1/blobs/{blobId}[?strict_consistency_check=true|skip_consistency_check=true]</code> — read; <code>Range: bytes=a-b</code> only</li>
<li><code>PUT /v1/quilts?epochs=N[&amp;…as for blobs]</code> — store a quilt: multipart/form-data, one part per blob (field name = identifier), optional <code>_metadata</code> part</li>
<li><code>GET /v1/blobs/by-quilt-patch-id/{patchId}</code>, <code>GET /v1/blobs/by-quilt-id/{quiltId}/{identifier}</code> — read one patch, whole</li>
<li><code>GET /v1/quilts/{quiltId}/patches</code> — list a quilt's patches</li>
<li><code>GET /status</code></li>
</ul>
</body></html>
`

func (s *Server) apiDocs(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, apiPage)
}

type publisherQuery struct {
	putParams
	deletable bool
}

var publisherFields = []string{"encoding_type", "epochs", "deletable", "permanent", "force", "quilt_version", "send_object_to", "share", "reuse_resources"}

// parsePublisherQuery decodes the PUT query as serde_urlencoded with
// deny_unknown_fields would: unknown or repeated keys and bad values are
// errors.
func parsePublisherQuery(raw string) (publisherQuery, error) {
	q := publisherQuery{putParams: putParams{epochs: 1}}
	params, err := splitQuery(raw, publisherFields)
	if err != nil {
		return q, err
	}
	sendOrShare := 0
	for _, p := range params {
		var err error
		switch p.key {
		case "epochs":
			var n uint64
			n, err = strconv.ParseUint(p.value, 10, 32)
			if err != nil {
				err = fmt.Errorf("epochs: invalid value %q, expected u32", p.value)
			}
			q.epochs = uint32(n)
		case "deletable":
			q.deletable, err = parseBool(p.value)
		case "permanent":
			q.permanent, err = parseBool(p.value)
		case "force":
			q.force, err = parseBool(p.value)
		case "reuse_resources":
			_, err = parseBool(p.value)
		case "share":
			sendOrShare++
			q.share, err = parseBool(p.value)
		case "send_object_to":
			sendOrShare++
			if !validSuiAddress(p.value) {
				err = fmt.Errorf("send_object_to: %q is not a Sui address", p.value)
			}
			q.sendObjectTo = p.value
		case "encoding_type":
			if p.value != "RS2" {
				err = fmt.Errorf("unknown variant `%s`, expected `RS2`", p.value)
			}
		case "quilt_version":
			if p.value != "v1" && p.value != "V1" && p.value != "1" {
				err = fmt.Errorf("unknown quilt version %q", p.value)
			}
		}
		if err != nil {
			return q, err
		}
	}
	if sendOrShare > 1 {
		return q, errors.New("send_object_to and share are mutually exclusive")
	}
	return q, nil
}

// parseReadQuery decodes the aggregator's read options.
func parseReadQuery(raw string) (strict, skip bool, err error) {
	params, err := splitQuery(raw, []string{"strict_consistency_check", "skip_consistency_check"})
	if err != nil {
		return false, false, err
	}
	for _, p := range params {
		v, err := parseBool(p.value)
		if err != nil {
			return false, false, err
		}
		if p.key == "strict_consistency_check" {
			strict = v
		} else {
			skip = v
		}
	}
	return strict, skip, nil
}

type queryParam struct{ key, value string }

func splitQuery(raw string, allowed []string) ([]queryParam, error) {
	var out []queryParam
	seen := map[string]bool{}
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		key, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("invalid percent-encoding in %q", part)
		}
		known := false
		for _, a := range allowed {
			known = known || a == key
		}
		if !known {
			return nil, fmt.Errorf("unknown field `%s`, expected one of `%s`", key, strings.Join(allowed, "`, `"))
		}
		if seen[key] {
			return nil, fmt.Errorf("duplicate field `%s`", key)
		}
		seen[key] = true
		out = append(out, queryParam{key, value})
	}
	return out, nil
}

func parseBool(s string) (bool, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("provided string was not `true` or `false`")
}

// byteRange is an inclusive range first..last.
type byteRange struct{ first, last int64 }

// parseRange accepts exactly one closed range "bytes=first-last", as the
// real aggregator does; open ranges ("bytes=a-"), suffix ranges
// ("bytes=-n") and multiple ranges are errors (416). Surrounding spaces are
// allowed.
func parseRange(v string) (byteRange, error) {
	v = strings.TrimSpace(v)
	spec, ok := strings.CutPrefix(v, "bytes=")
	if !ok {
		return byteRange{}, errors.New("invalid range header format: expected bytes=start-end")
	}
	if strings.Contains(spec, ",") {
		return byteRange{}, errors.New("only support one range per request")
	}
	a, b, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return byteRange{}, errors.New("invalid range header format: expected bytes=start-end")
	}
	if a == "" {
		return byteRange{}, errors.New("must provide start index")
	}
	if b == "" {
		return byteRange{}, errors.New("must provide end index")
	}
	first, err1 := parseIndex(a)
	last, err2 := parseIndex(b)
	if err1 != nil || err2 != nil {
		return byteRange{}, errors.New("invalid range header format: not a number")
	}
	if first > last {
		return byteRange{}, errors.New("start index must be less than end index")
	}
	return byteRange{first, last}, nil
}

func parseIndex(s string) (int64, error) {
	if s == "" || len(s) > 18 {
		return 0, errors.New("bad index")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("bad index")
		}
	}
	return strconv.ParseInt(s, 10, 64)
}
