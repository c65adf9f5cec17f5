package localwalrus

import (
	"bytes"
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
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hermesd/hermesd/internal/quilt"
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
	tagsJSON   []byte
	off, size  int64 // where the bytes are: in the upload spool, or in the quilt
	start, end int   // columns [start, end)
}

// quiltLayout is where a quilt's index and patches go.
type quiltLayout struct {
	col       int64 // bytes per column: quiltRows × the symbol size
	index     []byte
	indexCols int
}

// size is the quilt blob's size.
func (l quiltLayout) size() int64 { return quiltColumns * l.col }

// layoutQuilt sorts ps by identifier, gives each its columns and encodes
// the index: the smallest even symbol size with which the index and every
// patch, each in whole columns of its own, fit the matrix.
func layoutQuilt(ps []*quiltPatch) quiltLayout {
	slices.SortFunc(ps, func(a, b *quiltPatch) int { return strings.Compare(a.identifier, b.identifier) })
	hdr := int64(quiltHeaderLen + 2)
	sizes := make([]int64, len(ps))
	for i, p := range ps {
		hdr += indexEntryFixed + int64(len(p.identifier)) + int64(len(p.tagsJSON))
		sizes[i] = p.size
	}
	l := quiltLayout{col: quilt.Column(hdr, sizes)}
	l.indexCols = int((hdr + l.col - 1) / l.col)
	next := l.indexCols
	idx := make([]byte, 0, hdr)
	idx = append(idx, quiltVersion, 0, 0, 0, 0)
	idx = binary.LittleEndian.AppendUint16(idx, uint16(len(ps)))
	for _, p := range ps {
		p.start = next
		p.end = next + int(max(1, (p.size+l.col-1)/l.col))
		next = p.end
		idx = binary.LittleEndian.AppendUint16(idx, uint16(p.start))
		idx = binary.LittleEndian.AppendUint16(idx, uint16(p.end))
		idx = binary.LittleEndian.AppendUint64(idx, uint64(p.size))
		idx = binary.LittleEndian.AppendUint32(idx, uint32(len(p.identifier)))
		idx = append(idx, p.identifier...)
		idx = binary.LittleEndian.AppendUint32(idx, uint32(len(p.tagsJSON)))
		idx = append(idx, p.tagsJSON...)
	}
	binary.LittleEndian.PutUint32(idx[1:5], uint32(len(idx)-quiltHeaderLen))
	l.index = idx
	return l
}

// parseQuiltIndex reads the index of the quilt blob f of size bytes; an
// error means the blob is not a quilt (of this server's layout).
func parseQuiltIndex(f io.ReaderAt, size int64) (quiltLayout, []*quiltPatch, error) {
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
			p.tagsJSON = idx[:tagLen]
			if err := json.Unmarshal(p.tagsJSON, &p.tags); err != nil {
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
	l := layoutQuilt(ps)
	if l.size() > s.cfg.MaxQuiltSize {
		badQuilt(w, "the quilt would be %d bytes laid out (the patches' sizes differ too much), over this server's %d", l.size(), s.cfg.MaxQuiltSize)
		return
	}
	// A quilt is charged as the one blob it is stored as: its laid-out
	// size, by the same formula and price as any blob's.
	encoded, price, err := s.charge(l.size(), q.epochs)
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
	h := newBlobIDHasher()
	if err := writeQuilt(io.MultiWriter(f, h), spool, l, ps); err != nil {
		writeInternal(w, err)
		return
	}
	if err := f.Sync(); err != nil {
		writeInternal(w, err)
		return
	}
	id := h.Sum()
	quiltID := encodeBlobID(id)
	st.info.BlobID = quiltID
	if networkFault(w, st, quiltID, func(result any) any {
		return map[string]any{"blobStoreResult": result, "storedQuiltBlobs": []storedQuiltBlob{}}
	}) {
		return
	}
	out, err := s.store.commit(f.Name(), id, quiltID, l.size(), s.Epoch(), q.putParams)
	if err != nil {
		writeInternal(w, err)
		return
	}
	stored := make([]storedQuiltBlob, len(ps))
	for i, p := range ps {
		stored[i] = storedQuiltBlob{Identifier: p.identifier, QuiltPatchID: encodePatchID(id, p.start, p.end), Range: [2]int64{int64(p.start), int64(p.end)}}
	}
	s.writeStored(w, st, map[string]any{
		"blobStoreResult":  storeAnswer(out, quiltID, l.size(), q.epochs, encoded, price),
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
		if p.tags == nil {
			p.tags = map[string]string{}
		}
		p.tagsJSON, _ = json.Marshal(p.tags) // sorted keys: deterministic
	}
	return nil
}

// zeros pads columns.
var zeros = make([]byte, 64<<10)

func pad(w io.Writer, n int64) error {
	for n > 0 {
		k, err := w.Write(zeros[:min(n, int64(len(zeros)))])
		if err != nil {
			return err
		}
		n -= int64(k)
	}
	return nil
}

// writeQuilt writes the quilt blob: the index in the first columns, then
// every patch from its first column, each padded with zeros to its last.
func writeQuilt(w io.Writer, spool io.ReaderAt, l quiltLayout, ps []*quiltPatch) error {
	if _, err := w.Write(l.index); err != nil {
		return err
	}
	if err := pad(w, int64(l.indexCols)*l.col-int64(len(l.index))); err != nil {
		return err
	}
	for _, p := range ps {
		if _, err := copyFull(w, io.NewSectionReader(spool, p.off, p.size)); err != nil {
			return err
		}
		if err := pad(w, int64(p.end-p.start)*l.col-p.size); err != nil {
			return err
		}
	}
	last := l.indexCols
	if len(ps) > 0 {
		last = ps[len(ps)-1].end
	}
	return pad(w, int64(quiltColumns-last)*l.col)
}

// openQuilt opens the quilt id and reads its index, or answers 404 (or
// 500) and reports false.
func (s *Server) openQuilt(w http.ResponseWriter, id [32]byte) (*os.File, []*quiltPatch, bool) {
	m, f, ok := s.openBlob(w, id)
	if !ok {
		return nil, nil, false
	}
	_, ps, err := parseQuiltIndex(f, m.Size)
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
	if b, ok := s.forged.get(raw); ok {
		readHeaders(w.Header(), r, encodeBlobID(quilt))
		s.sendBody(w, r, st, bytes.NewReader(b), 0, int64(len(b)), http.StatusOK)
		return
	}
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
	if validHeaderValue(p.identifier) {
		h.Set("X-Quilt-Patch-Identifier", p.identifier)
	}
	s.sendBody(w, r, st, f, p.off, p.size, http.StatusOK)
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

// Locate says where the bytes of a blob, or of a quilt patch, lie on
// this server's disk: the file, and the offset and length in it (the
// whole blob file, or the patch's range of its quilt's file). For tests
// that damage stored bytes in place.
func (s *Server) Locate(id string) (file string, off, n int64, err error) {
	if quilt, start, end, ok := decodePatchID(id); ok {
		m, path, err := s.store.lookup(quilt, s.Epoch())
		if err != nil || m == nil {
			return "", 0, 0, fmt.Errorf("localwalrus: quilt of patch %s: not found (%v)", id, err)
		}
		f, err := os.Open(path)
		if err != nil {
			return "", 0, 0, err
		}
		defer f.Close()
		_, ps, err := parseQuiltIndex(f, m.Size)
		if err != nil {
			return "", 0, 0, err
		}
		for _, p := range ps {
			if p.start == start && p.end == end {
				return path, p.off, p.size, nil
			}
		}
		return "", 0, 0, fmt.Errorf("localwalrus: patch %s: not in its quilt", id)
	}
	raw, ok := decodeBlobID(id)
	if !ok {
		return "", 0, 0, fmt.Errorf("localwalrus: %q is neither a blob id nor a patch id", id)
	}
	m, path, err := s.store.lookup(raw, s.Epoch())
	if err != nil || m == nil {
		return "", 0, 0, fmt.Errorf("localwalrus: blob %s: not found (%v)", id, err)
	}
	return path, 0, m.Size, nil
}
