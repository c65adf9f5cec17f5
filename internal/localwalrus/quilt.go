package localwalrus

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/hermesd/hermesd/internal/redstuff"
)

// The quilt geometry of QuiltV1 at 1000 shards: the quilt blob is a
// matrix of quiltRows × quiltColumns symbols, and every patch (and the
// index) takes whole columns. See the package doc for the local layout.
const (
	quiltRows    = 334 // primary source symbols
	quiltColumns = 667 // secondary source symbols
	quiltVersion = 1

	// MaxQuiltPatches is the most patches one quilt holds (QuiltV1).
	MaxQuiltPatches = quiltColumns - 1
	// MaxIdentifierLen bounds a patch identifier, in bytes.
	MaxIdentifierLen = 64 << 10
	// MaxQuiltTags bounds the bytes of all tags of a quilt (keys and
	// values together).
	MaxQuiltTags = 64_000

	// DefaultMaxQuiltBodySize is the real publisher's default
	// --max-quilt-body-size.
	DefaultMaxQuiltBodySize int64 = 100 << 20
	// DefaultMaxQuiltSize bounds the laid-out quilt blob: padding can
	// make it far larger than the body (one large patch among hundreds
	// of tiny ones widens every column).
	DefaultMaxQuiltSize int64 = 1 << 30

	// maxMetadataPart bounds the _metadata part: identifiers and tags.
	maxMetadataPart = 4 << 20
	// patchIDBytes is a patch id's length: the quilt's blob id, the
	// version, the first and the end column (u16 little-endian each).
	patchIDBytes = 32 + 1 + 2 + 2
	// quiltHeaderLen is the version byte and the index length.
	quiltHeaderLen = 1 + 4
	// indexEntryFixed is an index entry without identifier and tags.
	indexEntryFixed = 2 + 2 + 8 + 4 + 4
)

// quiltPatch is one patch of a quilt being stored or read.
type quiltPatch struct {
	identifier string
	tags       map[string]string
	off, size  int64 // where the bytes are: in the upload spool, or in a legacy quilt
	start, end int   // columns [start, end)
	// quilt is the QuiltV1 quilt it was read from (nil for a legacy
	// quilt), idx its index there.
	quilt *redstuff.Quilt
	idx   int
}

// open returns the patch's bytes in the quilt blob f, and their number.
func (p *quiltPatch) open(f io.ReaderAt) (io.Reader, int64, error) {
	if p.quilt == nil {
		return io.NewSectionReader(f, p.off, p.size), p.size, nil
	}
	rd, err := p.quilt.OpenPatch(f, p.idx)
	if err != nil {
		return nil, 0, err
	}
	return rd, p.quilt.Patches[p.idx].Size, nil
}

// quiltLayout is where a quilt's index and patches go, in the local
// layout of earlier versions (read only).
type quiltLayout struct {
	col       int64 // bytes per column: quiltRows × the symbol size
	indexCols int
}

// parseLegacyQuilt reads the index of a quilt stored by an earlier
// version in its own layout (package doc); an error means the blob is
// not such a quilt. Its blobs keep their simulated ids, and their quilts
// stay readable.
func parseLegacyQuilt(f io.ReaderAt, size int64) (quiltLayout, []*quiltPatch, error) {
	bad := func(what string) (quiltLayout, []*quiltPatch, error) {
		return quiltLayout{}, nil, errors.New("not a quilt: " + what)
	}
	if size <= 0 || size%(quiltColumns*2*quiltRows) != 0 {
		return bad("size")
	}
	l := quiltLayout{col: size / quiltColumns}
	var h [quiltHeaderLen]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		return quiltLayout{}, nil, err
	}
	n := int64(binary.LittleEndian.Uint32(h[1:]))
	if h[0] != quiltVersion || n < 2 || n > size-quiltHeaderLen {
		return bad("header")
	}
	idx := make([]byte, n)
	if _, err := f.ReadAt(idx, quiltHeaderLen); err != nil {
		return quiltLayout{}, nil, err
	}
	l.indexCols = int((quiltHeaderLen + n + l.col - 1) / l.col)
	count := int(binary.LittleEndian.Uint16(idx))
	idx = idx[2:]
	if count == 0 || count > MaxQuiltPatches {
		return bad("patch count")
	}
	ps := make([]*quiltPatch, 0, count)
	next := l.indexCols
	for range count {
		if len(idx) < indexEntryFixed {
			return bad("index entry")
		}
		p := &quiltPatch{start: int(binary.LittleEndian.Uint16(idx)), end: int(binary.LittleEndian.Uint16(idx[2:]))}
		sz := binary.LittleEndian.Uint64(idx[4:])
		idLen := int(binary.LittleEndian.Uint32(idx[12:]))
		idx = idx[16:]
		if idLen == 0 || idLen > MaxIdentifierLen || len(idx) < idLen+4 {
			return bad("identifier")
		}
		p.identifier = string(idx[:idLen])
		tagLen := int(binary.LittleEndian.Uint32(idx[idLen:]))
		idx = idx[idLen+4:]
		if tagLen > MaxQuiltTags+maxMetadataPart || len(idx) < tagLen {
			return bad("tags")
		}
		if tagLen > 0 {
			if err := json.Unmarshal(idx[:tagLen], &p.tags); err != nil {
				return bad("tags")
			}
		}
		idx = idx[tagLen:]
		if p.start != next || p.end <= p.start || p.end > quiltColumns || sz > uint64(int64(p.end-p.start)*l.col) {
			return bad("patch columns")
		}
		next = p.end
		p.off, p.size = int64(p.start)*l.col, int64(sz)
		ps = append(ps, p)
	}
	if len(idx) != 0 {
		return bad("trailing index bytes")
	}
	return l, ps, nil
}

// encodePatchID is a patch's id: URL-safe base64 without padding of the
// quilt's blob id, the quilt version and the patch's first and end
// column, u16 little-endian each (QuiltPatchInternalIdV1).
func encodePatchID(quilt [32]byte, start, end int) string {
	b := make([]byte, 0, patchIDBytes)
	b = append(b, quilt[:]...)
	b = append(b, quiltVersion)
	b = binary.LittleEndian.AppendUint16(b, uint16(start))
	b = binary.LittleEndian.AppendUint16(b, uint16(end))
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodePatchID parses a patch id; ok is false for anything else.
func decodePatchID(s string) (quilt [32]byte, start, end int, ok bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != patchIDBytes || b[32] != quiltVersion {
		return quilt, 0, 0, false
	}
	copy(quilt[:], b)
	return quilt, int(binary.LittleEndian.Uint16(b[33:])), int(binary.LittleEndian.Uint16(b[35:])), true
}

// checkIdentifier applies the publisher's identifier rules.
func checkIdentifier(id string) error {
	switch {
	case id == "":
		return errors.New("a quilt patch needs an identifier (the part's field name)")
	case len(id) > MaxIdentifierLen:
		return fmt.Errorf("identifier of %d bytes is over the %d allowed", len(id), MaxIdentifierLen)
	case !utf8.ValidString(id):
		return errors.New("identifier is not valid UTF-8")
	}
	r, _ := utf8.DecodeRuneInString(id)
	if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
		return fmt.Errorf("identifier %s must start with an alphanumeric character", strconv.Quote(clipText(id)))
	}
	return nil
}

func clipText(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// quiltMetadata is one entry of the _metadata part.
type quiltMetadata struct {
	Identifier string            `json:"identifier"`
	Tags       map[string]string `json:"tags"`
}

// storedQuiltBlob is one entry of a quilt store's answer. Range is the
// patch's columns [first, end), as the daemon reports its sliver range.
type storedQuiltBlob struct {
	Identifier   string   `json:"identifier"`
	QuiltPatchID string   `json:"quiltPatchId"`
	Range        [2]int64 `json:"range"`
}

// quiltPatchJSON is one entry of the list of a quilt's patches.
type quiltPatchJSON struct {
	Identifier string            `json:"identifier"`
	PatchID    string            `json:"patch_id"`
	Tags       map[string]string `json:"tags"`
}

// badQuilt answers 400 for a quilt store the publisher refuses.
func badQuilt(w http.ResponseWriter, format string, args ...any) {
	writeAPIError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "the request is malformed: "+fmt.Sprintf(format, args...))
}

// putQuilt stores the parts of a multipart/form-data body as one quilt.
// The parts stream to a spool file (memory holds the identifiers and
// tags only); the quilt is then laid out into the upload file, hashed on
// the way, and registered like any blob.
func (s *Server) putQuilt(w http.ResponseWriter, r *http.Request) {
	st := stateOf(r)
	q, ok := storeQuery(w, r)
	if !ok {
		return
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		writeText(w, http.StatusBadRequest, "Invalid `boundary` for `multipart/form-data` request")
		return
	}
	if r.ContentLength > s.cfg.MaxQuiltBodySize {
		writeTooLarge(w)
		return
	}
	spool, err := s.store.newUpload()
	if err != nil {
		writeInternal(w, err)
		return
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	body := &countingBody{r: http.MaxBytesReader(w, r.Body, s.cfg.MaxQuiltBodySize)}
	ps, meta, status, err := readQuiltParts(multipart.NewReader(body, params["boundary"]), spool)
	st.info.BytesIn = body.n
	switch {
	case status == http.StatusRequestEntityTooLarge:
		writeTooLarge(w)
		return
	case err != nil:
		badQuilt(w, "%v", err)
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
	if err := applyQuiltMetadata(ps, meta); err != nil {
		badQuilt(w, "%v", err)
		return
	}
	blobs := make([]redstuff.QuiltBlob, len(ps))
	for i, p := range ps {
		blobs[i] = redstuff.QuiltBlob{Identifier: p.identifier, Tags: p.tags, Size: p.size}
	}
	l, err := redstuff.LayoutQuilt(s.cfg.Shards, blobs)
	if err != nil {
		badQuilt(w, "%v", err)
		return
	}
	if l.Params.Size > s.cfg.MaxQuiltSize {
		badQuilt(w, "the quilt would be %d bytes laid out (the patches' sizes differ too much), over this server's %d", l.Params.Size, s.cfg.MaxQuiltSize)
		return
	}
	// A quilt is charged as the one blob it is stored as: its laid-out
	// size, by the same formula and price as any blob's.
	encoded, price, err := s.charge(l.Params.Size, q.epochs)
	if err != nil { // ruled out: MaxQuiltSize is at most what the shards encode
		writeInternal(w, err)
		return
	}
	f, err := s.store.newUpload()
	if err != nil {
		writeInternal(w, err)
		return
	}
	defer os.Remove(f.Name()) // a no-op once the upload was renamed into place
	defer f.Close()
	open := func(i int) (io.Reader, error) { return io.NewSectionReader(spool, ps[i].off, ps[i].size), nil }
	if err := l.Write(f, open); err != nil {
		writeInternal(w, err)
		return
	}
	if err := f.Sync(); err != nil {
		writeInternal(w, err)
		return
	}
	h := newContentHasher()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, l.Params.Size)); err != nil {
		writeInternal(w, err)
		return
	}
	id, err := computeID(r.Context(), &s.ids, h.key(s.cfg.Shards), f)
	if err != nil {
		writeInternal(w, err)
		return
	}
	quiltID := encodeBlobID(id)
	st.info.BlobID = quiltID
	if networkFault(w, st, quiltID, func(result any) any {
		return map[string]any{"blobStoreResult": result, "storedQuiltBlobs": []storedQuiltBlob{}}
	}) {
		return
	}
	out, err := s.store.commit(f.Name(), id, quiltID, l.Params.Size, s.cfg.Shards, s.Epoch(), q.putParams)
	if err != nil {
		writeInternal(w, err)
		return
	}
	stored := make([]storedQuiltBlob, len(l.Patches))
	for i, p := range l.Patches {
		stored[i] = storedQuiltBlob{Identifier: p.Identifier, QuiltPatchID: l.PatchID(id, i).String(), Range: [2]int64{int64(p.Start), int64(p.End)}}
	}
	s.writeStored(w, st, map[string]any{
		"blobStoreResult":  storeAnswer(out, quiltID, l.Params.Size, q.epochs, encoded, price),
		"storedQuiltBlobs": stored,
	})
}

// countingBody counts the request body bytes read.
type countingBody struct {
	r io.Reader
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// readQuiltParts reads every part of a quilt store: the patches into
// spool, the _metadata part into memory (bounded). status is 413 when the
// body went over the limit.
func readQuiltParts(mr *multipart.Reader, spool io.Writer) (ps []*quiltPatch, meta []byte, status int, err error) {
	seen := map[string]bool{}
	var off int64
	fail := func(err error) ([]*quiltPatch, []byte, int, error) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, nil, http.StatusRequestEntityTooLarge, err
		}
		return nil, nil, http.StatusBadRequest, err
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(fmt.Errorf("multipart body: %w", err))
		}
		name := part.FormName()
		if name == "_metadata" {
			if meta != nil {
				return fail(errors.New("more than one _metadata part"))
			}
			meta, err = io.ReadAll(io.LimitReader(part, maxMetadataPart+1))
			if err != nil {
				return fail(fmt.Errorf("_metadata part: %w", err))
			}
			if len(meta) > maxMetadataPart {
				return fail(fmt.Errorf("_metadata part is over %d bytes", maxMetadataPart))
			}
			continue
		}
		if err := checkIdentifier(name); err != nil {
			return fail(err)
		}
		if seen[name] {
			return fail(fmt.Errorf("identifier %s appears twice", strconv.Quote(clipText(name))))
		}
		if len(ps) == MaxQuiltPatches {
			return fail(fmt.Errorf("a quilt holds at most %d blobs", MaxQuiltPatches))
		}
		seen[name] = true
		n, err := copyFull(spool, part)
		if err != nil {
			return fail(fmt.Errorf("part %s: %w", strconv.Quote(clipText(name)), err))
		}
		ps = append(ps, &quiltPatch{identifier: name, off: off, size: n})
		off += n
	}
	if len(ps) == 0 {
		return fail(errors.New("a quilt needs at least one blob"))
	}
	return ps, meta, 0, nil
}

// applyQuiltMetadata gives the patches the tags the _metadata part names.
func applyQuiltMetadata(ps []*quiltPatch, meta []byte) error {
	if meta == nil {
		return nil
	}
	var ms []quiltMetadata
	if err := json.Unmarshal(meta, &ms); err != nil {
		return fmt.Errorf("_metadata is not a JSON array of {identifier, tags}: %v", err)
	}
	byID := map[string]*quiltPatch{}
	for _, p := range ps {
		byID[p.identifier] = p
	}
	total := 0
	for _, m := range ms {
		p := byID[m.Identifier]
		switch {
		case p == nil:
			return fmt.Errorf("_metadata names identifier %s, which no part has", strconv.Quote(clipText(m.Identifier)))
		case p.tags != nil:
			return fmt.Errorf("_metadata names identifier %s twice", strconv.Quote(clipText(m.Identifier)))
		}
		for k, v := range m.Tags {
			total += len(k) + len(v)
		}
		if total > MaxQuiltTags {
			return fmt.Errorf("the tags are over the %d bytes a quilt allows", MaxQuiltTags)
		}
		p.tags = m.Tags
	}
	return nil
}

// openQuilt opens the quilt id and reads its index, or answers 404 (or
// 500) and reports false.
func (s *Server) openQuilt(w http.ResponseWriter, id [32]byte) (*os.File, []*quiltPatch, bool) {
	m, f, ok := s.openBlob(w, id)
	if !ok {
		return nil, nil, false
	}
	var ps []*quiltPatch
	var err error
	if m.Shards == 0 {
		_, ps, err = parseLegacyQuilt(f, m.Size)
	} else {
		var q *redstuff.Quilt
		if q, err = redstuff.ReadQuilt(f, m.Size, m.Shards); err == nil {
			for i, p := range q.Patches {
				ps = append(ps, &quiltPatch{identifier: p.Identifier, tags: p.Tags, start: p.Start, end: p.End, quilt: q, idx: i})
			}
		}
	}
	if err != nil {
		f.Close()
		writeAPIError(w, http.StatusNotFound, "NOT_FOUND", "QUILT_PATCH_NOT_FOUND", "the requested blob is not a quilt")
		return nil, nil, false
	}
	return f, ps, true
}

// quiltOfPath opens the quilt the request's path names ({quilt}), or
// answers 400 or 404 and reports false.
func (s *Server) quiltOfPath(w http.ResponseWriter, r *http.Request, st *reqState) ([32]byte, *os.File, []*quiltPatch, bool) {
	quilt, ok := decodeBlobID(r.PathValue("quilt"))
	if !ok {
		writeText(w, http.StatusBadRequest, "Invalid URL: failed to parse "+strconv.Quote(clipText(r.PathValue("quilt")))+" as a blob ID")
		return quilt, nil, nil, false
	}
	st.info.BlobID = encodeBlobID(quilt)
	f, ps, ok := s.openQuilt(w, quilt)
	return quilt, f, ps, ok
}

func patchNotFound(w http.ResponseWriter) {
	writeAPIError(w, http.StatusNotFound, "NOT_FOUND", "QUILT_PATCH_NOT_FOUND", "the requested quilt patch does not exist on Walrus")
}

// getPatchByID reads one patch by its patch id. Range is not part of the
// documented patch API: the whole patch is sent, whatever the request asks.
func (s *Server) getPatchByID(w http.ResponseWriter, r *http.Request) {
	st := stateOf(r)
	raw := r.PathValue("id")
	quilt, start, end, ok := decodePatchID(raw)
	if !ok {
		writeText(w, http.StatusBadRequest, "Invalid URL: failed to parse "+strconv.Quote(clipText(raw))+" as a quilt patch ID")
		return
	}
	st.info.BlobID, st.info.PatchID = encodeBlobID(quilt), raw
	f, ps, ok := s.openQuilt(w, quilt)
	if !ok {
		return
	}
	defer f.Close()
	i := slices.IndexFunc(ps, func(p *quiltPatch) bool { return p.start == start && p.end == end })
	if i < 0 {
		patchNotFound(w)
		return
	}
	s.sendPatch(w, r, st, f, quilt, ps[i])
}

// getPatchByIdentifier reads one patch by its quilt's id and its
// identifier.
func (s *Server) getPatchByIdentifier(w http.ResponseWriter, r *http.Request) {
	st := stateOf(r)
	quilt, f, ps, ok := s.quiltOfPath(w, r, st)
	if !ok {
		return
	}
	defer f.Close()
	id := r.PathValue("identifier")
	i := slices.IndexFunc(ps, func(p *quiltPatch) bool { return p.identifier == id })
	if i < 0 {
		patchNotFound(w)
		return
	}
	st.info.PatchID = encodePatchID(quilt, ps[i].start, ps[i].end)
	s.sendPatch(w, r, st, f, quilt, ps[i])
}

// patchTagHeaders are the tags a patch answer carries as headers: the
// aggregator's default allowed headers (its --allowed-headers; tags
// beyond them need --allow-quilt-patch-tags-in-response).
var patchTagHeaders = []string{"Content-Type", "Authorization", "Content-Disposition", "Content-Encoding",
	"Content-Language", "Content-Location", "Link"}

// sendPatch answers with a patch's bytes and the daemon's headers: those
// of every read with the quilt's id as ETag, then each allowed tag that
// no header has taken yet, then the patch's identifier.
func (s *Server) sendPatch(w http.ResponseWriter, r *http.Request, st *reqState, f *os.File, quilt [32]byte, p *quiltPatch) {
	h := w.Header()
	readHeaders(h, r, encodeBlobID(quilt))
	for k, v := range p.tags {
		name := http.CanonicalHeaderKey(k)
		if slices.Contains(patchTagHeaders, name) && len(h.Values(name)) == 0 && validHeaderValue(v) {
			h.Set(name, v)
		}
	}
	body, n, err := p.open(f)
	if err != nil {
		writeInternal(w, err)
		return
	}
	if validHeaderValue(p.identifier) {
		h.Set("X-Quilt-Patch-Identifier", p.identifier)
	}
	s.sendBody(w, r, st, body, n, http.StatusOK)
}

// listPatches lists a quilt's patches.
func (s *Server) listPatches(w http.ResponseWriter, r *http.Request) {
	quilt, f, ps, ok := s.quiltOfPath(w, r, stateOf(r))
	if !ok {
		return
	}
	f.Close()
	out := make([]quiltPatchJSON, len(ps))
	for i, p := range ps {
		tags := p.tags
		if tags == nil {
			tags = map[string]string{}
		}
		out[i] = quiltPatchJSON{Identifier: p.identifier, PatchID: encodePatchID(quilt, p.start, p.end), Tags: tags}
	}
	writeJSON(w, http.StatusOK, out)
}

func validHeaderValue(v string) bool {
	if len(v) > 4096 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// Span is a range of bytes of a file.
type Span = redstuff.Span

// Locate says where the bytes of a blob, or of a quilt patch, lie on
// this server's disk: the file, and the ranges of it that hold them, in
// order (one for a blob; one per symbol of a QuiltV1 patch, whose bytes
// run down its columns of the row-major quilt blob). For tests that
// damage stored bytes in place.
func (s *Server) Locate(id string) (file string, spans []Span, err error) {
	if quilt, start, end, ok := decodePatchID(id); ok {
		m, path, err := s.store.lookup(quilt, s.Epoch())
		if err != nil || m == nil {
			return "", nil, fmt.Errorf("localwalrus: quilt of patch %s: not found (%v)", id, err)
		}
		f, err := os.Open(path)
		if err != nil {
			return "", nil, err
		}
		defer f.Close()
		if m.Shards == 0 {
			_, ps, err := parseLegacyQuilt(f, m.Size)
			if err != nil {
				return "", nil, err
			}
			for _, p := range ps {
				if p.start == start && p.end == end {
					return path, []Span{{Off: p.off, Len: p.size}}, nil
				}
			}
		} else {
			q, err := redstuff.ReadQuilt(f, m.Size, m.Shards)
			if err != nil {
				return "", nil, err
			}
			for i, p := range q.Patches {
				if p.Start == start && p.End == end {
					if _, err := q.OpenPatch(f, i); err != nil {
						return "", nil, err
					}
					return path, q.Spans(i), nil
				}
			}
		}
		return "", nil, fmt.Errorf("localwalrus: patch %s: not in its quilt", id)
	}
	raw, ok := decodeBlobID(id)
	if !ok {
		return "", nil, fmt.Errorf("localwalrus: %q is neither a blob id nor a patch id", id)
	}
	m, path, err := s.store.lookup(raw, s.Epoch())
	if err != nil || m == nil {
		return "", nil, fmt.Errorf("localwalrus: blob %s: not found (%v)", id, err)
	}
	return path, []Span{{Off: 0, Len: m.Size}}, nil
}

// ReadStored returns the bytes of a blob or a quilt patch as this
// server's disk holds them (tests).
func (s *Server) ReadStored(id string) ([]byte, error) {
	file, spans, err := s.Locate(id)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, sp := range spans {
		out = append(out, b[sp.Off:sp.Off+sp.Len]...)
	}
	return out, nil
}

// FlipStoredByte inverts the bits mask of the middle byte of a blob's or
// a quilt patch's bytes on this server's disk (tests of damaged data).
func (s *Server) FlipStoredByte(id string, mask byte) error {
	file, spans, err := s.Locate(id)
	if err != nil {
		return err
	}
	var total int64
	for _, sp := range spans {
		total += sp.Len
	}
	if total == 0 {
		return fmt.Errorf("localwalrus: %s has no bytes to damage", id)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	mid := total / 2
	for _, sp := range spans {
		if mid < sp.Len {
			b[sp.Off+mid] ^= mask
			break
		}
		mid -= sp.Len
	}
	return os.WriteFile(file, b, 0o644)
}
