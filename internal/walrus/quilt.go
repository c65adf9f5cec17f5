package walrus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
)

// Quilt limits (QuiltV1, as documented).
const (
	// MaxQuiltPatches is the most blobs one quilt holds.
	MaxQuiltPatches = 666
	// MaxIdentifierLen bounds a patch identifier, in bytes.
	MaxIdentifierLen = 64 << 10
	// maxPatchIDBytes bounds a patch id's bytes: the quilt's blob id and
	// a short internal id (5 bytes in QuiltV1).
	maxPatchIDBytes = 32 + 32
	// maxPatchList bounds the answer listing a quilt's patches.
	maxPatchList = 8 << 20
)

// IsPatchID reports whether id names a quilt patch rather than a blob:
// a blob id is exactly BlobIDLen (43) characters, a patch id longer (the
// quilt's 32-byte blob id and at least one more byte). The length alone
// decides; ValidatePatchID checks the rest.
func IsPatchID(id string) bool { return len(id) > BlobIDLen }

// ValidatePatchID checks that id is a quilt patch id: URL-safe base64
// without padding of the quilt's 32-byte blob id followed by 1 to 32
// bytes of patch id, whose first byte is the quilt version.
func ValidatePatchID(id string) error {
	if len(id) <= BlobIDLen || len(id) > (maxPatchIDBytes*8+5)/6 {
		return fmt.Errorf("%w: %q is not a quilt patch id (%d characters)", ErrInvalidBlobID, sanitize(id, 96), len(id))
	}
	b, err := blobIDEncoding.DecodeString(id)
	if err != nil || len(b) <= 32 {
		return fmt.Errorf("%w: %q is not URL-safe base64 of a quilt patch id", ErrInvalidBlobID, sanitize(id, 96))
	}
	return nil
}

// PatchQuilt returns the blob id of the quilt patch id belongs to.
func PatchQuilt(id string) (string, error) {
	if err := ValidatePatchID(id); err != nil {
		return "", err
	}
	b, _ := blobIDEncoding.DecodeString(id)
	return blobIDEncoding.EncodeToString(b[:32]), nil
}

// ValidateRef checks that id is a blob id or a quilt patch id.
func ValidateRef(id string) error {
	if IsPatchID(id) {
		return ValidatePatchID(id)
	}
	return ValidateBlobID(id)
}

// QuiltPart is one blob of a quilt to store.
type QuiltPart struct {
	// Identifier names the blob in the quilt: unique in it, starting with
	// a letter or digit, at most 64 KiB. Identifiers are public.
	Identifier string
	Body       Body
}

// StoredPatch is where one part of a stored quilt went.
type StoredPatch struct {
	Identifier string
	PatchID    string
}

// QuiltResult is a stored quilt: the quilt blob's store result and its
// patches, in the order of the parts.
type QuiltResult struct {
	StoreResult // Size: the quilt blob's, as the publisher reported it (0 when alreadyCertified)
	Patches     []StoredPatch
	Bytes       int64 // the parts' bytes sent
}

// StoreQuilt stores parts as one quilt (PUT /v1/quilts, one
// multipart/form-data part per blob, its field name the identifier),
// streamed from each part's Body (opened once per attempt) under a
// Content-Length computed in advance, retried and failed over like Store.
// The answer is checked before anything is returned: exactly one patch
// per part, under the identifiers sent, each patch id of the quilt the
// answer names (its first 32 bytes are the quilt's blob id) and no two
// alike; anything else is ErrProtocol. The body is bounded by
// Config.MaxBlobSize, the parts by the quilt limits.
func (c *Client) StoreQuilt(ctx context.Context, parts []QuiltPart, opts ...StoreOption) (QuiltResult, error) {
	mp, err := newMultipartBody(parts)
	if err != nil {
		return QuiltResult{}, err
	}
	if mp.size > c.cfg.MaxBlobSize {
		return QuiltResult{}, fmt.Errorf("%w: quilt body of %s is over the publisher limit of %s", ErrTooLarge, FormatSize(mp.size), FormatSize(c.cfg.MaxBlobSize))
	}
	var result QuiltResult
	res, err := c.put(ctx, "/v1/quilts", mp.contentType, mp.size, mp.open, func(data []byte) error {
		r, err := c.parseQuilt(data, parts, mp.payload)
		if err != nil {
			return err
		}
		result = r
		return nil
	}, opts)
	if err != nil {
		return QuiltResult{}, err
	}
	result.Bytes = mp.payload
	result.Publisher, result.Attempts, result.Duration = res.Publisher, res.Attempts, res.Duration
	c.checkCharge(&result.StoreResult, quiltEncodedBound(parts, c.cfg.Shards), c.storeEpochs(opts))
	c.log.Debug("walrus: stored quilt", "blob_id", result.BlobID, "patches", len(parts), "bytes", mp.payload,
		"end_epoch", result.EndEpoch, "already_certified", result.AlreadyCertified, "publisher", result.Publisher,
		"attempts", result.Attempts, "duration", result.Duration)
	return result, nil
}

// quiltResponse is a quilt store's answer.
type quiltResponse struct {
	BlobStoreResult  json.RawMessage `json:"blobStoreResult"`
	StoredQuiltBlobs *[]struct {
		Identifier   *string `json:"identifier"`
		QuiltPatchID *string `json:"quiltPatchId"`
	} `json:"storedQuiltBlobs"`
}

// parseQuilt checks a quilt store's answer against the parts sent
// (payload bytes in all). Its errors are permanent: a publisher that
// answers so does not store this quilt.
func (c *Client) parseQuilt(data []byte, parts []QuiltPart, payload int64) (QuiltResult, error) {
	var qr quiltResponse
	if err := json.Unmarshal(data, &qr); err != nil {
		return QuiltResult{}, protocolErrorf("quilt store response is not JSON: %v", err)
	}
	if qr.BlobStoreResult == nil || qr.StoredQuiltBlobs == nil {
		return QuiltResult{}, protocolErrorf("quilt store response lacks blobStoreResult or storedQuiltBlobs: %s", sanitize(c.scrub.String(string(data)), 200))
	}
	r, err := c.parseStore(qr.BlobStoreResult)
	if err != nil {
		return QuiltResult{}, err
	}
	if !r.AlreadyCertified && r.Size < payload {
		return QuiltResult{}, protocolErrorf("publisher reports a quilt of %d bytes for %d bytes of patches", r.Size, payload)
	}
	quilt, _ := blobIDEncoding.DecodeString(r.BlobID)
	stored := *qr.StoredQuiltBlobs
	if len(stored) != len(parts) {
		return QuiltResult{}, protocolErrorf("publisher reports %d stored patches, %d were sent", len(stored), len(parts))
	}
	at := make(map[string]int, len(parts))
	for i, p := range parts {
		at[p.Identifier] = i
	}
	out := QuiltResult{StoreResult: r, Patches: make([]StoredPatch, len(parts))}
	seen := make(map[string]bool, len(parts))
	for _, sp := range stored {
		if sp.Identifier == nil || sp.QuiltPatchID == nil {
			return QuiltResult{}, protocolErrorf("a stored patch lacks identifier or quiltPatchId")
		}
		i, ok := at[*sp.Identifier]
		switch {
		case !ok:
			return QuiltResult{}, protocolErrorf("publisher reports a patch %q that was not sent", sanitize(*sp.Identifier, 64))
		case out.Patches[i].PatchID != "":
			return QuiltResult{}, protocolErrorf("publisher reports patch %q twice", sanitize(*sp.Identifier, 64))
		}
		pid := *sp.QuiltPatchID
		if err := ValidatePatchID(pid); err != nil {
			return QuiltResult{}, protocolErrorf("patch %q: %v", sanitize(*sp.Identifier, 64), err)
		}
		b, _ := blobIDEncoding.DecodeString(pid)
		if !bytes.Equal(b[:32], quilt) {
			return QuiltResult{}, protocolErrorf("patch id %s of %q is not of quilt %s", sanitize(pid, 96), sanitize(*sp.Identifier, 64), r.BlobID)
		}
		if seen[pid] {
			return QuiltResult{}, protocolErrorf("publisher reports patch id %s twice", sanitize(pid, 96))
		}
		seen[pid] = true
		out.Patches[i] = StoredPatch{Identifier: *sp.Identifier, PatchID: pid}
	}
	return out, nil
}

// multipartBody is a quilt store's body: precomputed part headers around
// the parts' bodies, opened one at a time as the transport reads.
type multipartBody struct {
	contentType string
	heads       [][]byte // before each part; the last one closes the body
	parts       []QuiltPart
	size        int64 // the whole body
	payload     int64 // the parts' bytes
}

func newMultipartBody(parts []QuiltPart) (*multipartBody, error) {
	switch {
	case len(parts) == 0:
		return nil, errors.New("walrus: a quilt needs at least one part")
	case len(parts) > MaxQuiltPatches:
		return nil, fmt.Errorf("%w: %d parts, a quilt holds at most %d", ErrTooLarge, len(parts), MaxQuiltPatches)
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mb := &multipartBody{contentType: mw.FormDataContentType(), parts: parts}
	seen := make(map[string]bool, len(parts))
	for _, p := range parts {
		if err := checkIdentifier(p.Identifier); err != nil {
			return nil, err
		}
		if seen[p.Identifier] {
			return nil, fmt.Errorf("walrus: quilt identifier %q appears twice", sanitize(p.Identifier, 64))
		}
		seen[p.Identifier] = true
		if p.Body.Size() < 0 {
			return nil, fmt.Errorf("walrus: part %q has a negative size", sanitize(p.Identifier, 64))
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="`+quoteEscaper.Replace(p.Identifier)+`"; filename="`+quoteEscaper.Replace(p.Identifier)+`"`)
		h.Set("Content-Type", "application/octet-stream")
		if _, err := mw.CreatePart(h); err != nil {
			return nil, err
		}
		mb.heads = append(mb.heads, bytes.Clone(buf.Bytes()))
		buf.Reset()
		mb.size += int64(len(mb.heads[len(mb.heads)-1])) + p.Body.Size()
		mb.payload += p.Body.Size()
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	mb.heads = append(mb.heads, bytes.Clone(buf.Bytes()))
	mb.size += int64(buf.Len())
	return mb, nil
}

// quoteEscaper escapes a form field name as mime/multipart does.
var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

// checkIdentifier applies the publisher's identifier rules before
// anything is sent.
func checkIdentifier(id string) error {
	switch {
	case id == "" || id == "_metadata":
		return fmt.Errorf("walrus: %q is not a quilt identifier", id)
	case len(id) > MaxIdentifierLen:
		return fmt.Errorf("walrus: quilt identifier of %d bytes is over the %d allowed", len(id), MaxIdentifierLen)
	}
	c := id[0]
	if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
		return fmt.Errorf("walrus: quilt identifier %q must start with an ASCII letter or digit", sanitize(id, 64))
	}
	return nil
}

// open returns the body for one attempt.
func (mb *multipartBody) open() (io.ReadCloser, error) { return &multipartReader{mb: mb}, nil }

// multipartReader reads one attempt's body: heads[0], part 0, heads[1],
// part 1, …, the closing head. Each part must give exactly its size.
type multipartReader struct {
	mb   *multipartBody
	i    int           // the next head; parts[i-1] is the part after heads[i-1]
	cur  []byte        // the rest of the head being read
	rc   io.ReadCloser // the open part
	left int64         // of the open part
}

func (r *multipartReader) Read(p []byte) (int, error) {
	for {
		if len(r.cur) > 0 {
			n := copy(p, r.cur)
			r.cur = r.cur[n:]
			return n, nil
		}
		if r.rc != nil {
			if r.left == 0 {
				var one [1]byte
				if n, _ := r.rc.Read(one[:]); n > 0 {
					return 0, fmt.Errorf("walrus: quilt part %q is longer than its %d bytes", r.mb.parts[r.i-1].Identifier, r.mb.parts[r.i-1].Body.Size())
				}
				r.rc.Close()
				r.rc = nil
				continue
			}
			n, err := r.rc.Read(p[:min(int64(len(p)), r.left)])
			r.left -= int64(n)
			if err == io.EOF && r.left > 0 {
				return n, fmt.Errorf("walrus: quilt part %q ended %d bytes short", r.mb.parts[r.i-1].Identifier, r.left)
			}
			if err != nil && err != io.EOF {
				return n, err
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
		if r.i >= len(r.mb.heads) {
			return 0, io.EOF
		}
		r.cur = r.mb.heads[r.i]
		if r.i < len(r.mb.parts) {
			p := r.mb.parts[r.i]
			if p.Body.Size() > 0 {
				rc, err := p.Body.Open()
				if err != nil {
					return 0, fmt.Errorf("walrus: open quilt part %q: %w", p.Identifier, err)
				}
				r.rc, r.left = rc, p.Body.Size()
			}
		}
		r.i++
	}
}

func (r *multipartReader) Close() error {
	if r.rc != nil {
		err := r.rc.Close()
		r.rc = nil
		return err
	}
	return nil
}

// WithIdentifier makes a patch read require the answer's
// X-Quilt-Patch-Identifier to be id.
func WithIdentifier(id string) ReadOption { return func(o *readOptions) { o.identifier = id } }

// ReadPatch reads the quilt patch patchID, whole, into dst (Read with a
// patch id).
func (c *Client) ReadPatch(ctx context.Context, patchID string, dst io.Writer, opts ...ReadOption) (ReadResult, error) {
	if err := ValidatePatchID(patchID); err != nil {
		return ReadResult{}, err
	}
	return c.Read(ctx, patchID, dst, opts...)
}

// ReadPatchByIdentifier reads the patch identifier of quilt quiltID,
// whole, into dst (GET /v1/blobs/by-quilt-id/{quilt}/{identifier}): the
// answer must name that identifier in X-Quilt-Patch-Identifier. The
// result's BlobID is the quilt's.
func (c *Client) ReadPatchByIdentifier(ctx context.Context, quiltID, identifier string, dst io.Writer, opts ...ReadOption) (ReadResult, error) {
	if err := ValidateBlobID(quiltID); err != nil {
		return ReadResult{}, err
	}
	if err := checkIdentifier(identifier); err != nil {
		return ReadResult{}, err
	}
	t := target{id: quiltID, path: "/v1/blobs/by-quilt-id/" + url.PathEscape(quiltID) + "/" + url.PathEscape(identifier),
		whole: true, patch: true, quilt: quiltID, identifier: identifier}
	return c.read(ctx, t, dst, nil, opts)
}

// checkPatch checks a patch answer's headers. Its ETag, when present, is
// the quilt's id (what the aggregator sends), the patch's id (what its
// OpenAPI example shows), or, for a read by identifier, the id of a patch
// of that quilt; bare or quoted. Its identifier is the one asked for.
func (rd *reader) checkPatch(h http.Header) error {
	if e := h.Get("ETag"); e != "" {
		tag := strings.TrimSuffix(strings.TrimPrefix(e, `"`), `"`)
		ok := tag == rd.t.quilt || tag == rd.t.id
		if !ok && rd.t.identifier != "" && IsPatchID(tag) {
			q, err := PatchQuilt(tag)
			ok = err == nil && q == rd.t.quilt
		}
		if !ok {
			return protocolErrorf("patch %s answered with ETag %q, which names neither it nor its quilt", rd.t.id, sanitize(e, 96))
		}
	}
	want := rd.ro.identifier
	if rd.t.identifier != "" {
		want = rd.t.identifier
	}
	if want != "" {
		if got := h.Get("X-Quilt-Patch-Identifier"); got != want {
			return protocolErrorf("patch %s answered as %q, not %q", rd.t.id, sanitize(got, 64), sanitize(want, 64))
		}
	}
	return nil
}

// PatchInfo is one patch of a quilt's list.
type PatchInfo struct {
	Identifier string
	PatchID    string
	Tags       map[string]string
}

// ListPatches lists the patches of quilt quiltID (GET
// /v1/quilts/{id}/patches), checking that every patch id is of that quilt.
func (c *Client) ListPatches(ctx context.Context, quiltID string) ([]PatchInfo, error) {
	if err := ValidateBlobID(quiltID); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	t := target{id: quiltID, path: "/v1/quilts/" + url.PathEscape(quiltID) + "/patches", whole: true}
	if _, err := c.read(ctx, t, &b, nil, []ReadOption{WithMaxSize(maxPatchList)}); err != nil {
		return nil, err
	}
	var list []struct {
		Identifier *string           `json:"identifier"`
		PatchID    *string           `json:"patch_id"`
		Tags       map[string]string `json:"tags"`
	}
	if err := json.Unmarshal(b.Bytes(), &list); err != nil {
		return nil, fmt.Errorf("%w: list of quilt %s is not JSON: %v", ErrProtocol, quiltID, err)
	}
	if len(list) > MaxQuiltPatches {
		return nil, fmt.Errorf("%w: quilt %s lists %d patches, more than a quilt holds", ErrProtocol, quiltID, len(list))
	}
	quilt, _ := blobIDEncoding.DecodeString(quiltID)
	out := make([]PatchInfo, 0, len(list))
	for _, p := range list {
		if p.Identifier == nil || p.PatchID == nil {
			return nil, fmt.Errorf("%w: a patch of quilt %s lacks identifier or patch_id", ErrProtocol, quiltID)
		}
		if err := ValidatePatchID(*p.PatchID); err != nil {
			return nil, fmt.Errorf("%w: quilt %s: %v", ErrProtocol, quiltID, err)
		}
		raw, _ := blobIDEncoding.DecodeString(*p.PatchID)
		if !bytes.Equal(raw[:32], quilt) {
			return nil, fmt.Errorf("%w: patch id %s listed for quilt %s is another quilt's", ErrProtocol, sanitize(*p.PatchID, 96), quiltID)
		}
		out = append(out, PatchInfo{Identifier: *p.Identifier, PatchID: *p.PatchID, Tags: p.Tags})
	}
	return out, nil
}
