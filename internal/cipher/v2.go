package cipher

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/tink-crypto/tink-go/v2/streamingaead/subtle"
)

// Tink AES256_GCM_HKDF_1MB parameters (docs/design.md §5).
const (
	v2HKDFHash     = "SHA256"
	v2DerivedKey   = 32
	v2SegmentSize  = 1 << 20 // ciphertext bytes per segment, the header included in the first
	v2TagSize      = subtle.AESGCMHKDFTagSizeInBytes
	v2HeaderLen    = 1 + v2DerivedKey + subtle.AESGCMHKDFNoncePrefixSizeInBytes // length byte, salt, nonce prefix
	v2FirstSegment = v2SegmentSize - v2HeaderLen                                // ciphertext bytes of segment 0

	// v2FirstPlaintext and v2Plaintext are the plaintext bytes that segment 0
	// and every later full segment hold.
	v2FirstPlaintext = v2FirstSegment - v2TagSize
	v2Plaintext      = v2SegmentSize - v2TagSize
)

// identityPrefix starts the associated data of every v2 blob.
const identityPrefix = "hermesd/v2:"

func v2AEAD(key Key) *subtle.AESGCMHKDF {
	a, err := subtle.NewAESGCMHKDF(key[:], v2HKDFHash, v2DerivedKey, v2SegmentSize, 0)
	if err != nil {
		panic("cipher: internal error: " + err.Error()) // fixed, valid parameters
	}
	if a.HeaderLength() != v2HeaderLen {
		panic("cipher: internal error: unexpected Tink header length")
	}
	return a
}

func associatedData(identity string) ([]byte, error) {
	// The identity is hashed into the derived key as UTF-8 by every Tink
	// implementation, so it has to be valid UTF-8 to mean the same thing
	// everywhere; an empty one would bind the blob to no agent.
	if identity == "" {
		return nil, errors.New("cipher: empty agent identity")
	}
	if !utf8.ValidString(identity) {
		return nil, errors.New("cipher: agent identity is not valid UTF-8")
	}
	return []byte(identityPrefix + identity), nil
}

// Encrypt returns a writer that encrypts what is written to it into a v2 blob
// on dst, bound to the agent identity (the agent's normalized ENS name or its
// configured id).
//
// The caller must call Close: the final segment, which authenticates the end
// of the blob, is only written then. Full 1 MiB segments are written as they
// fill, so memory stays bounded and small writes cost a copy each. Errors are
// sticky; Close does not close dst, and a second Close returns an error.
func Encrypt(dst io.Writer, key Key, identity string) (io.WriteCloser, error) {
	aad, err := associatedData(identity)
	if err != nil {
		return nil, err
	}
	if _, err := dst.Write(v2Prefix); err != nil {
		return nil, fmt.Errorf("write blob prefix: %w", err)
	}
	w, err := v2AEAD(key).NewEncryptingWriter(dst, aad)
	if err != nil {
		return nil, fmt.Errorf("cipher: start v2 stream: %w", err)
	}
	return &v2Writer{w: w}, nil
}

type v2Writer struct {
	w   io.WriteCloser
	err error
}

func (w *v2Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.w.Write(p)
	if err != nil {
		w.err = fmt.Errorf("cipher: write v2 blob: %w", err)
		return n, w.err
	}
	return n, nil
}

func (w *v2Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if err := w.w.Close(); err != nil {
		w.err = fmt.Errorf("cipher: write v2 blob: %w", err)
		return w.err
	}
	w.err = errClosed
	return nil
}

// DecryptOption configures [Decrypt].
type DecryptOption func(*decryptConfig)

type decryptConfig struct {
	maxV1 int64
}

// WithMaxV1Size sets the plaintext cap for v1 envelopes (default
// [DefaultMaxV1Size]). It does not affect v2, which streams.
func WithMaxV1Size(n int64) DecryptOption {
	return func(c *decryptConfig) { c.maxV1 = max(n, 0) }
}

// Decrypt returns a reader of the plaintext of the blob read from src,
// detecting its envelope from the first bytes:
//
//   - v2 blobs are decrypted as a stream and must be bound to identity. The
//     first segment is authenticated before Decrypt returns, so a wrong key
//     or identity is reported here (ErrAuthFirstSegment). Each later segment
//     is authenticated before any of its bytes is returned, and io.EOF comes
//     only after the final segment authenticated as final.
//   - v1 envelopes are read whole (up to the v1 cap; ErrTooLarge beyond it)
//     and authenticated before Decrypt returns. v1 has no identity binding:
//     identity is ignored.
//   - Anything else is ErrUnknownFormat or ErrUnsupportedVersion, never
//     plaintext.
//
// Errors are sticky. When src also implements io.ReaderAt and io.Seeker (a
// file, a bytes.Reader), a failure at the end of the blob is confirmed by
// re-reading it, which tells truncation at a segment boundary and appended
// data apart from corruption.
func Decrypt(src io.Reader, key Key, identity string, opts ...DecryptOption) (io.Reader, error) {
	cfg := decryptConfig{maxV1: DefaultMaxV1Size}
	for _, o := range opts {
		o(&cfg)
	}
	var start int64 = -1
	if rs, ok := src.(interface {
		io.ReaderAt
		io.Seeker
	}); ok {
		if off, err := rs.Seek(0, io.SeekCurrent); err == nil {
			start = off
		}
	}
	var prefix [v2PrefixLen]byte
	n, err := io.ReadFull(src, prefix[:4])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fmt.Errorf("read blob: %w", err)
	}
	if n == 4 && bytes.Equal(prefix[:4], v2Magic) {
		m, err := io.ReadFull(src, prefix[4:])
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return nil, fmt.Errorf("read blob: %w", err)
		}
		n += m
	}
	format, err := Detect(prefix[:n])
	if errors.Is(err, ErrUnknownFormat) {
		// Read a little more so the error can say what the data looks like.
		more := make([]byte, 512)
		copy(more, prefix[:n])
		m, _ := io.ReadFull(src, more[n:])
		return nil, unknownFormatError(more[:n+m])
	}
	if err != nil {
		return nil, err
	}
	if format == FormatV1 {
		pt, err := readV1(src, prefix[:n], key, cfg.maxV1)
		if err != nil {
			return nil, err
		}
		return bytes.NewReader(pt), nil
	}
	return newV2Reader(src, start, key, identity)
}

// v2Reader wraps Tink's decrypting reader. Tink authenticates each segment
// before returning any of its plaintext and finds the final segment by EOF;
// v2Reader adds sticky errors and turns Tink's failures into errors that say
// which segment failed and what can be known about why.
type v2Reader struct {
	src       *tracker
	tink      io.Reader
	aead      *subtle.AESGCMHKDF // never a Key value (see Format in format.go)
	aad       []byte
	delivered int64 // plaintext bytes Tink has returned
	peek      [1]byte
	hasPeek   bool
	err       error

	// ra and start allow re-reading the blob to confirm a diagnosis; ra is
	// nil when src cannot be re-read.
	ra    io.ReaderAt
	start int64
}

// tracker counts the stream bytes (after the 8-byte prefix) read from the
// source and remembers whether it reached EOF or failed.
type tracker struct {
	r     io.Reader
	n     int64
	first byte // the stream's first byte: Tink's header length
	eof   bool
	err   error
}

func (t *tracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if t.n == 0 && n > 0 {
		t.first = p[0]
	}
	t.n += int64(n)
	if err == io.EOF {
		t.eof = true
	} else if err != nil && t.err == nil {
		t.err = err
	}
	return n, err
}

func newV2Reader(src io.Reader, start int64, key Key, identity string) (*v2Reader, error) {
	aad, err := associatedData(identity)
	if err != nil {
		return nil, err
	}
	r := &v2Reader{src: &tracker{r: src}, aead: v2AEAD(key), aad: aad}
	if start >= 0 {
		r.ra, r.start = src.(io.ReaderAt), start
	}
	r.tink, err = r.aead.NewDecryptingReader(r.src, aad)
	if err != nil {
		switch {
		case r.src.err != nil:
			return nil, fmt.Errorf("read blob: %w", r.src.err)
		case r.src.eof:
			return nil, fmt.Errorf("%w: it ends %d bytes into the %d-byte stream header", ErrTruncated, r.src.n, v2HeaderLen)
		}
		// Tink checks only the header's length byte.
		return nil, fmt.Errorf("%w: stream header length byte is %d, want %d", ErrCorrupted, r.src.first, v2HeaderLen)
	}
	// Authenticate the first segment now, keeping its first byte back.
	n, err := r.readTink(r.peek[:])
	if err != nil && err != io.EOF {
		return nil, err
	}
	r.hasPeek = n == 1
	return r, nil
}

func (r *v2Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.err != nil && !r.hasPeek {
		return 0, r.err
	}
	n := 0
	if r.hasPeek {
		p[0] = r.peek[0]
		r.hasPeek = false
		n = 1
		if len(p) == 1 {
			return 1, nil
		}
	}
	m, err := r.readTink(p[n:])
	return n + m, err
}

// readTink reads from Tink, classifying and keeping any error.
func (r *v2Reader) readTink(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	// Tink returns (0, nil) once, for an empty final segment.
	for range 2 {
		n, err := r.tink.Read(p)
		r.delivered += int64(n)
		if err == io.EOF {
			r.err = io.EOF
			return n, io.EOF
		}
		if err != nil {
			r.err = r.classify()
			return n, r.err
		}
		if n > 0 {
			return n, nil
		}
	}
	return 0, nil
}

// segmentStart returns the offset of segment k in the Tink stream (after the
// 8-byte prefix), and segmentLen its ciphertext size when full.
func segmentStart(k int64) int64 {
	if k == 0 {
		return v2HeaderLen
	}
	return k * v2SegmentSize
}

func segmentLen(k int64) int64 {
	if k == 0 {
		return v2FirstSegment
	}
	return v2SegmentSize
}

// plaintextEnd returns the plaintext offset where full segment k ends.
func plaintextEnd(k int64) int64 { return v2FirstPlaintext + k*v2Plaintext }

// classify explains a Tink read failure. Tink fails only after handing out
// all plaintext of earlier segments, so the plaintext delivered so far says
// which segment failed, and whether the source hit EOF says whether Tink
// treated it as the final segment.
func (r *v2Reader) classify() error {
	t := r.src
	if t.err != nil {
		return fmt.Errorf("read blob: %w", t.err)
	}
	var k int64
	if r.delivered > 0 {
		k = 1 + (r.delivered-v2FirstPlaintext)/v2Plaintext
	}
	segStart := segmentStart(k)
	blobOff := int64(v2PrefixLen) + segStart
	e := &AuthError{Format: FormatV2, Segment: k, Offset: blobOff, Final: t.eof}
	set := func(reason error, format string, args ...any) error {
		e.Reason = reason
		e.msg = reason.Error() + ": " + fmt.Sprintf(format, args...)
		return e
	}

	if t.eof {
		l := t.n - segStart // ciphertext bytes of the last segment
		switch {
		case l < v2TagSize:
			// A genuine segment holds at least a tag, and segment k-1
			// authenticated as non-final, so segment k must exist.
			if l == 0 {
				return set(ErrTruncated, "nothing follows the %d-byte stream header", v2HeaderLen)
			}
			return set(ErrTruncated, "it ends %d bytes into segment %d (blob offset %d), too short for a segment", l, k, blobOff)
		case l == segmentLen(k):
			// A full last segment that fails as the final one is what a cut
			// exactly at a segment boundary looks like.
			if r.reauthenticates(k, t.n, true) {
				return set(ErrTruncated, "it ends at a segment boundary (blob offset %d) after segment %d, which authenticates as a non-final segment; the rest of the blob is missing", t.n+v2PrefixLen, k)
			}
			if k == 0 {
				return set(ErrAuthFirstSegment, "wrong key, wrong agent identity, or the blob is corrupted or truncated after its first segment (indistinguishable by design)")
			}
			if r.ra != nil {
				return set(ErrCorrupted, "its last segment %d (blob offset %d) does not authenticate", k, blobOff)
			}
			return set(ErrTruncated, "it ends exactly at a segment boundary (blob offset %d) and its last segment %d does not authenticate as the final one; most likely the rest of the blob is missing (or that segment is corrupted)", t.n+v2PrefixLen, k)
		case k == 0:
			return set(ErrAuthFirstSegment, "wrong key, wrong agent identity, or the blob is corrupted, truncated or has data appended (indistinguishable by design)")
		default:
			return set(ErrCorrupted, "its last segment %d (blob offset %d, %d bytes) does not authenticate: the blob was truncated, has data appended, or its end is corrupted", k, blobOff, l)
		}
	}

	// A segment failed as non-final. Either it is damaged, or it is the
	// blob's real final segment with data appended after it: look at what
	// follows it (Tink has read one byte beyond it).
	segEnd := segStart + segmentLen(k)
	var probe [v2TagSize]byte
	io.ReadFull(t, probe[:])
	follow := t.n - segEnd
	if r.reauthenticates(k, segEnd, false) {
		if t.eof {
			return set(ErrTrailingData, "the blob ends after segment %d (blob offset %d) and %d more bytes follow", k, blobOff+segmentLen(k), follow)
		}
		return set(ErrTrailingData, "the blob ends after segment %d (blob offset %d) and more data follows", k, blobOff+segmentLen(k))
	}
	if t.eof && follow < v2TagSize && r.ra == nil {
		return set(ErrTrailingData, "segment %d (blob offset %d) does not authenticate and only %d bytes follow it, too few for a segment; most likely they were appended to the blob (or it is corrupted)", k, blobOff, follow)
	}
	if k == 0 {
		return set(ErrAuthFirstSegment, "wrong key, wrong agent identity, or a corrupted blob (indistinguishable by design)")
	}
	return set(ErrCorrupted, "segment %d (blob offset %d) does not authenticate", k, blobOff)
}

// reauthenticates reports whether, re-reading the first end bytes of the Tink
// stream from the start, segment k (full-size) authenticates as a non-final
// segment (nonFinal: one dummy byte is appended so Tink does not take it for
// the last) or as the final segment (end is then the end of segment k). It
// uses the library reader over a section of the source and keeps only segment
// buffers; it returns false when the source cannot be re-read.
func (r *v2Reader) reauthenticates(k, end int64, nonFinal bool) bool {
	if r.ra == nil {
		return false
	}
	var src io.Reader = io.NewSectionReader(r.ra, r.start+v2PrefixLen, end)
	if nonFinal {
		src = io.MultiReader(src, bytes.NewReader([]byte{0}))
	}
	tr, err := r.aead.NewDecryptingReader(src, r.aad)
	if err != nil {
		return false
	}
	n, err := io.Copy(io.Discard, tr)
	if nonFinal {
		return n >= plaintextEnd(k)
	}
	return err == nil && n == plaintextEnd(k)
}

// ProbeIdentity reports which of the candidate agent identities a v2 blob is
// bound to, authenticating only its first segment under each. It reads at
// most the 8-byte prefix, the stream header, one segment and one more byte.
// If none authenticates, the error wraps ErrAuthFirstSegment: the key is
// wrong, the blob belongs to an agent not among the candidates, or its start
// is corrupted. A v1 envelope gives ErrNoIdentity.
func ProbeIdentity(src io.Reader, key Key, candidates []string) (string, error) {
	if len(candidates) == 0 {
		return "", errors.New("cipher: probe identity: no candidate identities")
	}
	aads := make([][]byte, len(candidates))
	for i, id := range candidates {
		aad, err := associatedData(id)
		if err != nil {
			return "", fmt.Errorf("probe identity %q: %w", id, err)
		}
		aads[i] = aad
	}
	buf := make([]byte, v2PrefixLen+v2SegmentSize+1)
	n, err := io.ReadFull(src, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", fmt.Errorf("read blob: %w", err)
	}
	buf = buf[:n]
	format, err := Detect(buf[:min(n, DetectSize)])
	switch {
	case errors.Is(err, ErrUnknownFormat):
		return "", unknownFormatError(buf[:min(n, 512)])
	case err != nil:
		return "", err
	case format == FormatV1:
		return "", ErrNoIdentity
	}
	body := buf[v2PrefixLen:]
	switch {
	case len(body) < v2HeaderLen:
		return "", fmt.Errorf("%w: it ends %d bytes into the %d-byte stream header", ErrTruncated, len(body), v2HeaderLen)
	case body[0] != v2HeaderLen:
		return "", fmt.Errorf("%w: stream header length byte is %d, want %d", ErrCorrupted, body[0], v2HeaderLen)
	case len(body) < v2HeaderLen+v2TagSize:
		return "", fmt.Errorf("%w: it ends %d bytes into segment 0 (blob offset %d), too short for a segment", ErrTruncated, len(body)-v2HeaderLen, v2PrefixLen+v2HeaderLen)
	}
	aead := v2AEAD(key)
	for i, aad := range aads {
		// body holds all of segment 0 plus one byte when more follows, so
		// Tink decides final or not exactly as it would on the whole blob.
		tr, err := aead.NewDecryptingReader(bytes.NewReader(body), aad)
		if err != nil {
			return "", fmt.Errorf("cipher: probe identity: %w", err)
		}
		var one [1]byte
		if _, err := tr.Read(one[:]); err == nil || err == io.EOF {
			return candidates[i], nil
		}
	}
	return "", &AuthError{Format: FormatV2, Reason: ErrAuthFirstSegment, Offset: v2PrefixLen + v2HeaderLen, Final: n < len(buf),
		msg: fmt.Sprintf("%v: not under any of the %d candidate identities: wrong key, an agent not among them, or a corrupted blob", ErrAuthFirstSegment, len(candidates))}
}
