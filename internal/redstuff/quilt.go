package redstuff

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// QuiltV1, as walrus-core lays it out (quilt_encoding.rs; @mysten/walrus's
// encodeQuilt computes the same bytes): many blobs in one blob, each in
// whole columns of the blob's p×s matrix of z-byte symbols.
//
// The column-major image of the quilt is: the index (version ‖ u32le
// length ‖ BCS QuiltIndexV1) padded to whole columns (at most 10), then
// every blob, sorted by identifier, as header (version, u32le length of
// the rest, mask) ‖ u16le size ‖ BCS identifier ‖ [u16le size ‖ BCS
// tags, when there are tags] ‖ its bytes, padded to whole columns, then
// zero columns up to s. The quilt blob is that image stored row-major
// (symbol (row, column) at row·s·z + column·z). z is the smallest even
// symbol size with which everything fits (compute_symbol_size). A patch
// is named by its columns [start, end).

const (
	// QuiltVersion is QuiltV1's version byte.
	QuiltVersion = 1
	// MaxQuiltIndexColumns bounds the columns the index may take.
	MaxQuiltIndexColumns = 10
	// MaxIdentifier bounds an identifier's BCS encoding (a u16 size
	// field, less one).
	MaxIdentifier = 1<<16 - 2

	quiltPrefix = 1 + 4 // version, index length
	blobHeader  = 1 + 4 + 1
	tagsFlag    = 1
	// maxSymbol is RS2's largest symbol size.
	maxSymbol = 1<<16 - 2
)

// ErrQuilt means bytes that are not a valid QuiltV1 quilt, index or patch.
var ErrQuilt = errors.New("redstuff: not a QuiltV1 quilt")

// QuiltBlob is one blob to lay out: its identifier, tags and size.
type QuiltBlob struct {
	Identifier string
	Tags       map[string]string
	Size       int64
}

// QuiltPatch is one blob in a quilt.
type QuiltPatch struct {
	Identifier string
	Tags       map[string]string
	Size       int64
	Start, End int // columns [Start, End)
	// Blob is the blob's index among those given to LayoutQuilt (-1 for
	// a quilt read back).
	Blob int

	prefix []byte // header ‖ identifier ‖ tags
	off    int64  // where its bytes start in its columns' image
}

// Quilt is a quilt's layout.
type Quilt struct {
	Params       Params // of the quilt blob
	Index        []byte // version ‖ u32le length ‖ BCS QuiltIndexV1
	IndexColumns int
	Patches      []QuiltPatch // by identifier
}

// ColumnSize is the bytes of one column: p symbols.
func (q *Quilt) ColumnSize() int64 { return int64(q.Params.Primary) * int64(q.Params.Symbol) }

// CheckIdentifier applies walrus-core's rules for a quilt identifier:
// non-empty, valid UTF-8, no control characters, no trailing white
// space, and at most MaxIdentifier bytes as BCS.
func CheckIdentifier(id string) error {
	switch {
	case id == "":
		return errors.New("identifier is empty")
	case !utf8.ValidString(id):
		return errors.New("identifier is not valid UTF-8")
	case strings.TrimRightFunc(id, unicode.IsSpace) != id:
		return fmt.Errorf("identifier %q ends in white space", clip(id))
	case strings.ContainsFunc(id, unicode.IsControl):
		return fmt.Errorf("identifier %q contains control characters", clip(id))
	case len(bcsString(nil, id)) > MaxIdentifier:
		return fmt.Errorf("identifier of %d bytes is too long", len(id))
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// LayoutQuilt lays out blobs as a QuiltV1 quilt over shards shards.
func LayoutQuilt(shards int, blobs []QuiltBlob) (*Quilt, error) {
	if err := CheckShards(shards); err != nil {
		return nil, err
	}
	p, s := sourceCounts(shards)
	if len(blobs) == 0 {
		return nil, errors.New("redstuff: a quilt needs at least one blob")
	}
	if len(blobs)+1 > s {
		return nil, fmt.Errorf("redstuff: %d blobs, a quilt over %d shards holds at most %d", len(blobs), shards, s-1)
	}
	q := &Quilt{Patches: make([]QuiltPatch, len(blobs))}
	for i, b := range blobs {
		if err := CheckIdentifier(b.Identifier); err != nil {
			return nil, fmt.Errorf("redstuff: %w", err)
		}
		if b.Size < 0 {
			return nil, fmt.Errorf("redstuff: blob %q has a negative size", clip(b.Identifier))
		}
		q.Patches[i] = QuiltPatch{Identifier: b.Identifier, Tags: b.Tags, Size: b.Size, Blob: i}
	}
	slices.SortFunc(q.Patches, func(a, b QuiltPatch) int { return strings.Compare(a.Identifier, b.Identifier) })
	for i := 1; i < len(q.Patches); i++ {
		if q.Patches[i].Identifier == q.Patches[i-1].Identifier {
			return nil, fmt.Errorf("redstuff: identifier %q appears twice", clip(q.Patches[i].Identifier))
		}
	}
	indexLen := quiltPrefix + len(q.encodeIndex())
	sizes := make([]int64, 0, len(blobs)+1)
	sizes = append(sizes, int64(indexLen))
	for i := range q.Patches {
		pt := &q.Patches[i]
		prefix, err := patchPrefix(pt.Identifier, pt.Tags, pt.Size)
		if err != nil {
			return nil, err
		}
		pt.prefix = prefix
		sizes = append(sizes, int64(len(prefix))+pt.Size)
	}
	z, err := quiltSymbolSize(sizes, s, p)
	if err != nil {
		return nil, err
	}
	q.Params = Params{Shards: shards, Primary: p, Secondary: s, Symbol: int(z), Size: int64(p) * int64(s) * z}
	col := q.ColumnSize()
	q.IndexColumns = int(ceilDiv(sizes[0], col))
	next := q.IndexColumns
	for i := range q.Patches {
		pt := &q.Patches[i]
		pt.Start = next
		pt.End = next + int(ceilDiv(sizes[i+1], col))
		pt.off = int64(len(pt.prefix))
		next = pt.End
	}
	body := q.encodeIndex()
	q.Index = make([]byte, quiltPrefix, quiltPrefix+len(body))
	q.Index[0] = QuiltVersion
	binary.LittleEndian.PutUint32(q.Index[1:], uint32(len(body)))
	q.Index = append(q.Index, body...)
	return q, nil
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// quiltSymbolSize is walrus-core's compute_symbol_size: the smallest
// symbol size (in units, then rounded up to RS2's alignment of 2) at
// which every blob (the index first) fits its own whole columns, the
// index in at most 10.
func quiltSymbolSize(sizes []int64, cols, rows int) (int64, error) {
	var sum, largest int64
	for _, v := range sizes {
		sum += v
		largest = max(largest, v)
	}
	c, r := int64(cols), int64(rows)
	lo := max(ceilDiv(sum, c*r), ceilDiv(sizes[0], r*MaxQuiltIndexColumns), ceilDiv(quiltPrefix, r))
	hi := ceilDiv(largest, c/int64(len(sizes))*r)
	fits := func(z int64) bool {
		var need int64
		for _, v := range sizes {
			need += ceilDiv(v, z*r)
		}
		return need <= c
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if fits(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	z := lo + lo%2
	if z > maxSymbol {
		return 0, fmt.Errorf("%w: the quilt needs %d-byte symbols, more than RS2's %d", ErrTooLarge, z, maxSymbol)
	}
	return z, nil
}

// patchPrefix is a blob's header, identifier and tags in the quilt.
func patchPrefix(id string, tags map[string]string, size int64) ([]byte, error) {
	b := make([]byte, blobHeader, blobHeader+2+len(id)+8)
	b[0] = QuiltVersion
	ident := bcsString(nil, id)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(ident)))
	b = append(b, ident...)
	if len(tags) > 0 {
		t := bcsTags(nil, tags)
		if len(t) > 1<<16-1 {
			return nil, fmt.Errorf("redstuff: the tags of %q take %d bytes, more than a quilt's 65,535", clip(id), len(t))
		}
		b[5] = tagsFlag
		b = binary.LittleEndian.AppendUint16(b, uint16(len(t)))
		b = append(b, t...)
	}
	rest := int64(len(b)-blobHeader) + size
	if rest > 1<<32-1 {
		return nil, fmt.Errorf("%w: blob %q of %d bytes is over a quilt patch's 4 GiB", ErrTooLarge, clip(id), size)
	}
	binary.LittleEndian.PutUint32(b[1:], uint32(rest))
	return b, nil
}

// encodeIndex is BCS QuiltIndexV1 {patches: vector<{end_index: u16,
// identifier: string, tags: map<string, string>}>} (the start index is
// not serialized: it is the previous patch's end, or the index's
// columns).
func (q *Quilt) encodeIndex() []byte {
	b := uleb(nil, uint64(len(q.Patches)))
	for _, pt := range q.Patches {
		b = binary.LittleEndian.AppendUint16(b, uint16(pt.End))
		b = bcsString(b, pt.Identifier)
		b = bcsTags(b, pt.Tags)
	}
	return b
}

func uleb(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func bcsString(b []byte, s string) []byte { return append(uleb(b, uint64(len(s))), s...) }

// bcsTags is a BCS map<string, string>: entries sorted by their keys'
// BCS bytes (length first), as BCS requires.
func bcsTags(b []byte, tags map[string]string) []byte {
	keys := make([][]byte, 0, len(tags))
	for k := range tags {
		keys = append(keys, bcsString(nil, k))
	}
	slices.SortFunc(keys, bytes.Compare)
	b = uleb(b, uint64(len(keys)))
	for _, k := range keys {
		b = append(b, k...)
		d := bcsDecoder{b: k}
		b = bcsString(b, tags[d.string()])
	}
	return b
}

// PatchID names a quilt patch: the quilt's blob id and the patch's
// internal id (version, start and end column), BCS-encoded (37 bytes) in
// URL-safe base64 without padding.
type PatchID struct {
	Quilt      ID
	Version    uint8
	Start, End uint16
}

// PatchIDLen is the length of a QuiltV1 patch id's text form.
const PatchIDLen = 50

func (p PatchID) String() string {
	b := make([]byte, 0, 37)
	b = append(b, p.Quilt[:]...)
	b = append(b, p.Version)
	b = binary.LittleEndian.AppendUint16(b, p.Start)
	b = binary.LittleEndian.AppendUint16(b, p.End)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParsePatchID parses a QuiltV1 patch id.
func ParsePatchID(s string) (PatchID, error) {
	if len(s) != PatchIDLen {
		return PatchID{}, fmt.Errorf("%w: a patch id has %d characters, not %d", ErrQuilt, PatchIDLen, len(s))
	}
	var b [37]byte
	n, err := idEncoding.Decode(b[:], []byte(s))
	if err != nil || n != len(b) {
		return PatchID{}, fmt.Errorf("%w: a patch id is URL-safe base64 of 37 bytes", ErrQuilt)
	}
	p := PatchID{Version: b[32], Start: binary.LittleEndian.Uint16(b[33:]), End: binary.LittleEndian.Uint16(b[35:])}
	copy(p.Quilt[:], b[:32])
	if p.Version != QuiltVersion || p.Start >= p.End {
		return PatchID{}, fmt.Errorf("%w: patch id of version %d, columns %d..%d", ErrQuilt, p.Version, p.Start, p.End)
	}
	return p, nil
}

// PatchID is the id of patch i of the quilt whose blob id is quilt.
func (q *Quilt) PatchID(quilt ID, i int) PatchID {
	return PatchID{Quilt: quilt, Version: QuiltVersion, Start: uint16(q.Patches[i].Start), End: uint16(q.Patches[i].End)}
}

// groupBytes is how much of a quilt's column-major image is transposed
// at a time.
const groupBytes = 4 << 20

// Write writes the quilt blob (Params.Size bytes, row-major) to dst;
// open(i) returns the bytes of blob i (as given to LayoutQuilt), exactly
// its size. It holds at most a few MiB: columns are transposed in
// groups, each row's share of a group written at once.
func (q *Quilt) Write(dst io.WriterAt, open func(blob int) (io.Reader, error)) error {
	col := q.ColumnSize()
	group := max(1, int(groupBytes/col))
	src := &imageReader{q: q, open: open}
	buf := make([]byte, int64(group)*col)
	row := make([]byte, group*q.Params.Symbol)
	z, s := q.Params.Symbol, q.Params.Secondary
	for c0 := 0; c0 < s; c0 += group {
		k := min(group, s-c0)
		img := buf[:int64(k)*col]
		if _, err := io.ReadFull(src, img); err != nil {
			return err
		}
		for r := range q.Params.Primary {
			for c := range k {
				copy(row[c*z:(c+1)*z], img[int64(c)*col+int64(r*z):])
			}
			if _, err := dst.WriteAt(row[:k*z], int64(r)*int64(s*z)+int64(c0*z)); err != nil {
				return err
			}
		}
	}
	return src.close()
}

// imageReader reads the quilt's column-major image.
type imageReader struct {
	q    *Quilt
	open func(int) (io.Reader, error)
	part int // -1: index; i: patch i; len: trailing zeros
	cur  io.Reader
	rc   io.Closer
	init bool
}

func (r *imageReader) Read(b []byte) (int, error) {
	col := r.q.ColumnSize()
	for {
		if !r.init {
			r.init, r.part = true, -1
			r.cur = io.MultiReader(bytesReader(r.q.Index), zeros(int64(r.q.IndexColumns)*col-int64(len(r.q.Index))))
		}
		n, err := r.cur.Read(b)
		if n > 0 || err != io.EOF {
			return n, err
		}
		if err := r.close(); err != nil {
			return 0, err
		}
		r.part++
		switch {
		case r.part < len(r.q.Patches):
			pt := r.q.Patches[r.part]
			data, err := r.open(pt.Blob)
			if err != nil {
				return 0, err
			}
			if c, ok := data.(io.Closer); ok {
				r.rc = c
			}
			span := int64(pt.End-pt.Start) * col
			r.cur = io.MultiReader(bytesReader(pt.prefix), exactly(data, pt.Size, pt.Identifier),
				zeros(span-int64(len(pt.prefix))-pt.Size))
		case r.part == len(r.q.Patches):
			last := r.q.IndexColumns
			if len(r.q.Patches) > 0 {
				last = r.q.Patches[len(r.q.Patches)-1].End
			}
			r.cur = zeros(int64(r.q.Params.Secondary-last) * col)
		default:
			return 0, io.EOF
		}
	}
}

func (r *imageReader) close() error {
	if r.rc == nil {
		return nil
	}
	err := r.rc.Close()
	r.rc = nil
	return err
}

func bytesReader(b []byte) io.Reader { return &sliceReader{b: b} }

type sliceReader struct{ b []byte }

func (s *sliceReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

type zeroReader struct{ n int64 }

func zeros(n int64) io.Reader { return &zeroReader{n: n} }

func (z *zeroReader) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), z.n))
	clear(p[:k])
	z.n -= int64(k)
	return k, nil
}

// exactly yields exactly n bytes of r, or an error.
func exactly(r io.Reader, n int64, id string) io.Reader {
	return &exactReader{r: r, n: n, id: id}
}

type exactReader struct {
	r  io.Reader
	n  int64
	id string
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.n {
		p = p[:e.n]
	}
	k, err := e.r.Read(p)
	e.n -= int64(k)
	if err == io.EOF && e.n > 0 {
		return k, fmt.Errorf("redstuff: blob %q ended %d bytes short", clip(e.id), e.n)
	}
	if err == io.EOF {
		err = nil
	}
	return k, err
}

// ReadQuilt reads the layout of the quilt blob of size bytes in r (over
// shards shards) from its index. The bytes are untrusted: anything that
// is not a consistent QuiltV1 index is ErrQuilt.
func ReadQuilt(r io.ReaderAt, size int64, shards int) (*Quilt, error) {
	pr, err := NewParams(shards, size)
	if err != nil {
		return nil, err
	}
	if size == 0 || int64(pr.Primary)*int64(pr.Secondary)*int64(pr.Symbol) != size {
		return nil, fmt.Errorf("%w: %d bytes is not a whole matrix over %d shards", ErrQuilt, size, shards)
	}
	q := &Quilt{Params: pr}
	cols := min(MaxQuiltIndexColumns, pr.Secondary)
	cr := q.columns(r, 0, cols)
	var h [quiltPrefix]byte
	if _, err := io.ReadFull(cr, h[:]); err != nil {
		return nil, err
	}
	n := int64(binary.LittleEndian.Uint32(h[1:]))
	if h[0] != QuiltVersion || quiltPrefix+n > int64(cols)*q.ColumnSize() {
		return nil, fmt.Errorf("%w: index version %d, %d bytes", ErrQuilt, h[0], n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(cr, body); err != nil {
		return nil, err
	}
	if err := q.parseIndex(body); err != nil {
		return nil, err
	}
	q.Index = append(h[:], body...)
	return q, nil
}

// parseIndex decodes BCS QuiltIndexV1 and places the patches.
func (q *Quilt) parseIndex(b []byte) error {
	d := bcsDecoder{b: b}
	count := d.uleb()
	if d.err != nil || count == 0 || count >= uint64(q.Params.Secondary) {
		return fmt.Errorf("%w: index of %d patches", ErrQuilt, count)
	}
	q.IndexColumns = int(ceilDiv(int64(quiltPrefix+len(b)), q.ColumnSize()))
	next := q.IndexColumns
	for range count {
		pt := QuiltPatch{Blob: -1, Start: next}
		pt.End = int(d.u16())
		pt.Identifier = d.string()
		pt.Tags = d.tags()
		if d.err != nil {
			return fmt.Errorf("%w: index: %v", ErrQuilt, d.err)
		}
		if pt.End <= pt.Start || pt.End > q.Params.Secondary {
			return fmt.Errorf("%w: patch %q at columns %d..%d", ErrQuilt, clip(pt.Identifier), pt.Start, pt.End)
		}
		if err := CheckIdentifier(pt.Identifier); err != nil {
			return fmt.Errorf("%w: %v", ErrQuilt, err)
		}
		if n := len(q.Patches); n > 0 && q.Patches[n-1].Identifier >= pt.Identifier {
			return fmt.Errorf("%w: identifiers out of order", ErrQuilt)
		}
		next = pt.End
		q.Patches = append(q.Patches, pt)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the index", ErrQuilt, len(d.b))
	}
	return nil
}

// OpenPatch reads patch i's header from the quilt blob in r (a quilt
// read with ReadQuilt), checks it against the index, and returns a reader
// of its bytes (exactly its Size, which it sets).
func (q *Quilt) OpenPatch(r io.ReaderAt, i int) (io.Reader, error) {
	pt := &q.Patches[i]
	cr := q.columns(r, pt.Start, pt.End)
	span := int64(pt.End-pt.Start) * q.ColumnSize()
	var h [blobHeader + 2]byte
	if _, err := io.ReadFull(cr, h[:]); err != nil {
		return nil, err
	}
	rest := int64(binary.LittleEndian.Uint32(h[1:]))
	if h[0] != QuiltVersion || blobHeader+rest > span || h[5]&^tagsFlag != 0 {
		return nil, fmt.Errorf("%w: patch %q: header version %d, %d bytes, mask %#x", ErrQuilt, clip(pt.Identifier), h[0], rest, h[5])
	}
	idLen := int64(binary.LittleEndian.Uint16(h[blobHeader:]))
	used := 2 + idLen
	if used > rest {
		return nil, fmt.Errorf("%w: patch %q: identifier of %d bytes in %d", ErrQuilt, clip(pt.Identifier), idLen, rest)
	}
	ident := make([]byte, idLen)
	if _, err := io.ReadFull(cr, ident); err != nil {
		return nil, err
	}
	d := bcsDecoder{b: ident}
	if s := d.string(); d.err != nil || len(d.b) != 0 || s != pt.Identifier {
		return nil, fmt.Errorf("%w: patch %q names itself otherwise", ErrQuilt, clip(pt.Identifier))
	}
	if h[5]&tagsFlag != 0 {
		var n [2]byte
		if _, err := io.ReadFull(cr, n[:]); err != nil {
			return nil, err
		}
		tl := int64(binary.LittleEndian.Uint16(n[:]))
		used += 2 + tl
		if used > rest {
			return nil, fmt.Errorf("%w: patch %q: tags of %d bytes overrun it", ErrQuilt, clip(pt.Identifier), tl)
		}
		tags := make([]byte, tl)
		if _, err := io.ReadFull(cr, tags); err != nil {
			return nil, err
		}
		d := bcsDecoder{b: tags}
		if d.tags(); d.err != nil || len(d.b) != 0 {
			return nil, fmt.Errorf("%w: patch %q: bad tags", ErrQuilt, clip(pt.Identifier))
		}
	}
	pt.off, pt.Size = blobHeader+used, rest-used
	return io.LimitReader(cr, pt.Size), nil
}

// Span is a range of bytes of the quilt blob.
type Span struct{ Off, Len int64 }

// Spans says where patch i's bytes lie in the quilt blob, in order: one
// span per symbol (or part of one) they take. A quilt read back knows
// once OpenPatch read the patch's header.
func (q *Quilt) Spans(i int) []Span {
	pt := q.Patches[i]
	z, col := int64(q.Params.Symbol), q.ColumnSize()
	row := int64(q.Params.Secondary) * z
	var out []Span
	for o, end := pt.off, pt.off+pt.Size; o < end; {
		c, in := int64(pt.Start)+o/col, o%col
		n := min(z-in%z, end-o)
		out = append(out, Span{Off: in/z*row + c*z + in%z, Len: n})
		o += n
	}
	return out
}

// columns reads the column-major image of columns [c0, c1) of the quilt
// blob in r: a group of columns at a time, one read per row.
func (q *Quilt) columns(r io.ReaderAt, c0, c1 int) *columnReader {
	return &columnReader{q: q, r: r, next: c0, end: c1}
}

type columnReader struct {
	q         *Quilt
	r         io.ReaderAt
	next, end int
	buf, rows []byte
	pending   []byte
}

func (c *columnReader) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		if c.next >= c.end {
			return 0, io.EOF
		}
		col := c.q.ColumnSize()
		z, s := c.q.Params.Symbol, c.q.Params.Secondary
		k := min(c.end-c.next, max(1, int(groupBytes/col)))
		if c.buf == nil {
			c.buf = make([]byte, int64(min(c.end-c.next, max(1, int(groupBytes/col))))*col)
			c.rows = make([]byte, len(c.buf)/c.q.Params.Primary)
		}
		img := c.buf[:int64(k)*col]
		for r := range c.q.Params.Primary {
			seg := c.rows[:k*z]
			if _, err := c.r.ReadAt(seg, int64(r)*int64(s*z)+int64(c.next*z)); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return 0, fmt.Errorf("redstuff: read quilt: %w", err)
			}
			for j := range k {
				copy(img[int64(j)*col+int64(r*z):], seg[j*z:(j+1)*z])
			}
		}
		c.next += k
		c.pending = img
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// bcsDecoder reads BCS from untrusted bytes; the first error sticks.
type bcsDecoder struct {
	b   []byte
	err error
}

func (d *bcsDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
	d.b = nil
}

// uleb reads a canonical ULEB128 of at most 32 bits.
func (d *bcsDecoder) uleb() uint64 {
	var v uint64
	for i := 0; ; i++ {
		if i == len(d.b) || i == 5 {
			d.fail("bad length prefix")
			return 0
		}
		c := d.b[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if (c == 0 && i > 0) || v > 1<<32-1 {
				d.fail("non-canonical length prefix")
				return 0
			}
			d.b = d.b[i+1:]
			return v
		}
	}
}

func (d *bcsDecoder) u16() uint16 {
	if len(d.b) < 2 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint16(d.b)
	d.b = d.b[2:]
	return v
}

func (d *bcsDecoder) string() string {
	n := d.uleb()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("string of %d bytes in %d", n, len(d.b))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	if !utf8.ValidString(s) {
		d.fail("string is not UTF-8")
	}
	return s
}

func (d *bcsDecoder) tags() map[string]string {
	n := d.uleb()
	if d.err != nil || n == 0 {
		return nil
	}
	if n > uint64(len(d.b)/2) {
		d.fail("%d tags in %d bytes", n, len(d.b))
		return nil
	}
	tags := make(map[string]string, n)
	var prev []byte
	for range n {
		start := d.b
		k := d.string()
		key := start[:len(start)-len(d.b)]
		v := d.string()
		if d.err != nil {
			return nil
		}
		if prev != nil && bytes.Compare(prev, key) >= 0 {
			d.fail("tags out of order")
			return nil
		}
		prev = key
		tags[k] = v
	}
	return tags
}
