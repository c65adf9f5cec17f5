package repo

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Index is the dedup index: where every object of the live packs of one
// head lives (object → pack blob, offset, length). It is a cache: the
// caller persists it in its state directory (WriteTo, ReadIndex) and can
// rebuild it from the head commit and its live packs' indexes
// (Reader.Index). A snapshot updates it in place when its commit succeeds,
// and only then.
//
// An Index is safe for concurrent use.
type Index struct {
	mu    sync.RWMutex
	head  string
	packs map[string]*indexPack
	// objects locates each indexed object once (its first location),
	// sorted by key and handle: 24 bytes an object where a map by Handle
	// took about 90 (the handles stay in the packs' entries only).
	objects []objSlot
}

// objSlot is one object of an indexed pack.
type objSlot struct {
	key  uint64 // the first 8 bytes of the object's id
	pack *indexPack
	i    uint32 // its entry in pack.entries
}

func (s objSlot) handle() Handle { return s.pack.entries[s.i].Handle() }

func (s objSlot) loc() objLoc {
	e := &s.pack.entries[s.i]
	return objLoc{pack: s.pack, off: HeaderSize + s.pack.ref.IndexLength + e.Offset, n: e.Length}
}

func slotKey(h Handle) uint64 { return binary.BigEndian.Uint64(h.ID[:8]) }

func compareSlots(a, b objSlot) int {
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c
	}
	ha, hb := a.handle(), b.handle()
	if c := cmp.Compare(ha.Type, hb.Type); c != 0 {
		return c
	}
	return bytes.Compare(ha.ID[:], hb.ID[:])
}

type indexPack struct {
	ref     PackRef
	head    bool // carries a commit (informational)
	entries []IndexEntry
}

type objLoc struct {
	pack *indexPack
	off  int64 // absolute offset in the blob
	n    int64 // stored length
}

// NewIndex returns an empty index (a repository without packs).
func NewIndex() *Index {
	return &Index{packs: map[string]*indexPack{}}
}

// Head returns the head pack blob id the index describes ("" if none).
func (ix *Index) Head() string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.head
}

// Packs returns the indexed packs, sorted by blob id.
func (ix *Index) Packs() []PackRef {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	refs := make([]PackRef, 0, len(ix.packs))
	for _, p := range ix.packs {
		refs = append(refs, p.ref)
	}
	slices.SortFunc(refs, func(a, b PackRef) int { return strings.Compare(a.BlobID, b.BlobID) })
	return refs
}

// Len returns the number of indexed objects.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.objects)
}

// Lookup returns where the object h is stored: its pack's blob id, its
// absolute offset in the blob and its stored length.
func (ix *Index) Lookup(h Handle) (blobID string, off, length int64, ok bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	sl, ok := ix.find(h)
	if !ok {
		return "", 0, 0, false
	}
	l := sl.loc()
	return l.pack.ref.BlobID, l.off, l.n, true
}

// lookup is Lookup without the copy, for the builder (caller holds no lock).
func (ix *Index) lookup(h Handle) (objLoc, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	sl, ok := ix.find(h)
	if !ok {
		return objLoc{}, false
	}
	return sl.loc(), true
}

// find returns h's slot. Callers hold a lock.
func (ix *Index) find(h Handle) (objSlot, bool) {
	k := slotKey(h)
	i, _ := slices.BinarySearchFunc(ix.objects, k, func(s objSlot, k uint64) int { return cmp.Compare(s.key, k) })
	for ; i < len(ix.objects) && ix.objects[i].key == k; i++ {
		if ix.objects[i].handle() == h {
			return ix.objects[i], true
		}
	}
	return objSlot{}, false
}

// alternatives returns, for every object whose indexed location is in one
// of the excluded packs, another location outside them, if any.
func (ix *Index) alternatives(exclude map[string]bool) map[Handle]objLoc {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	alt := map[Handle]objLoc{}
	for id, p := range ix.packs {
		if exclude[id] {
			continue
		}
		base := HeaderSize + p.ref.IndexLength
		for _, e := range p.entries {
			h := e.Handle()
			if sl, ok := ix.find(h); ok && exclude[sl.pack.ref.BlobID] {
				if _, done := alt[h]; !done {
					alt[h] = objLoc{pack: p, off: base + e.Offset, n: e.Length}
				}
			}
		}
	}
	return alt
}

// add indexes packs and their objects; an object already indexed keeps
// its first location (the index's, else the earliest of packs). Callers
// hold the write lock.
func (ix *Index) add(packs []*indexPack) {
	n := 0
	for _, p := range packs {
		if _, ok := ix.packs[p.ref.BlobID]; !ok {
			n += len(p.entries)
		}
	}
	add := make([]objSlot, 0, n)
	for _, p := range packs {
		if _, ok := ix.packs[p.ref.BlobID]; ok {
			continue
		}
		ix.packs[p.ref.BlobID] = p
		for i, e := range p.entries {
			h := e.Handle()
			if _, ok := ix.find(h); !ok {
				add = append(add, objSlot{key: slotKey(h), pack: p, i: uint32(i)})
			}
		}
	}
	if len(add) == 0 {
		return
	}
	// Stable: of two locations of one object, the first stays first and
	// is the one kept.
	slices.SortStableFunc(add, compareSlots)
	add = slices.CompactFunc(add, func(a, b objSlot) bool { return a.handle() == b.handle() })
	// Merge from the back, in place.
	old := len(ix.objects)
	ix.objects = slices.Grow(ix.objects, len(add))[:old+len(add)]
	i, j := old-1, len(add)-1
	for k := len(ix.objects) - 1; j >= 0; k-- {
		if i >= 0 && compareSlots(ix.objects[i], add[j]) > 0 {
			ix.objects[k] = ix.objects[i]
			i--
		} else {
			ix.objects[k] = add[j]
			j--
		}
	}
}

// replace swaps the index's content for the given head's packs. When
// they include every indexed pack (a snapshot that dropped none), only the
// new packs' objects are added: rebuilding the object index of a large
// brain was most of a small snapshot's work.
func (ix *Index) replace(head string, packs []*indexPack) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.head = head
	kept := 0
	for _, p := range packs {
		if ix.packs[p.ref.BlobID] == p {
			kept++
		}
	}
	if kept != len(ix.packs) {
		ix.packs = make(map[string]*indexPack, len(packs))
		ix.objects = nil
	}
	ix.add(packs)
}

// snapshotPacks returns the current packs (for rebuilding).
func (ix *Index) snapshotPacks() map[string]*indexPack {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	m := make(map[string]*indexPack, len(ix.packs))
	for k, v := range ix.packs {
		m[k] = v
	}
	return m
}

// indexMagic names the layout; v1 (before 2026-11-26) also held each
// pack's SHA-256. A file of another layout is rebuilt like a damaged one.
const indexMagic = "hermesd-repo-index/v2\n"

// maxIndexFile bounds what ReadIndex reads.
const maxIndexFile = 1 << 30

// ErrIndexFile: a persisted index is damaged; rebuild it (Reader.Index).
var ErrIndexFile = errors.New("repo: invalid dedup index file")

// WriteTo writes the index for ReadIndex:
//
//	magic "hermesd-repo-index/v2\n"
//	uvarint len ‖ head blob id
//	uvarint pack count, then per pack (by blob id): uvarint len ‖ blob id,
//	  uvarint size, uvarint end epoch, uvarint index length,
//	  head flag byte, uvarint len ‖ index plaintext (without commit)
//	sha256 of everything before it
func (ix *Index) WriteTo(w io.Writer) (int64, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	sum := sha256.New()
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(io.MultiWriter(cw, sum), 64<<10)
	var tmp [binary.MaxVarintLen64]byte
	uv := func(v uint64) { bw.Write(binary.AppendUvarint(tmp[:0], v)) }
	str := func(s string) { uv(uint64(len(s))); bw.WriteString(s) }
	bw.WriteString(indexMagic)
	str(ix.head)
	ids := make([]string, 0, len(ix.packs))
	for id := range ix.packs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	uv(uint64(len(ids)))
	for _, id := range ids {
		p := ix.packs[id]
		str(p.ref.BlobID)
		uv(uint64(p.ref.Size))
		uv(p.ref.EndEpoch)
		uv(uint64(p.ref.IndexLength))
		if p.head {
			bw.WriteByte(1)
		} else {
			bw.WriteByte(0)
		}
		b := (&PackIndex{Entries: p.entries}).Encode()
		uv(uint64(len(b)))
		bw.Write(b)
	}
	if err := bw.Flush(); err != nil {
		return cw.n, fmt.Errorf("repo: write index: %w", err)
	}
	if _, err := cw.Write(sum.Sum(nil)); err != nil {
		return cw.n, fmt.Errorf("repo: write index: %w", err)
	}
	return cw.n, nil
}

// ReadIndex reads an index written by WriteTo. Any defect is ErrIndexFile:
// the caller rebuilds the index from the repository.
func ReadIndex(r io.Reader) (*Index, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxIndexFile+1))
	if err != nil {
		return nil, fmt.Errorf("repo: read index: %w", err)
	}
	if len(b) > maxIndexFile {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrIndexFile, maxIndexFile)
	}
	if len(b) < len(indexMagic)+sha256.Size || !bytes.HasPrefix(b, []byte(indexMagic)) {
		return nil, fmt.Errorf("%w: bad magic", ErrIndexFile)
	}
	body, trailer := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if s := sha256.Sum256(body); !bytes.Equal(s[:], trailer) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrIndexFile)
	}
	d := &decoder{b: body[len(indexMagic):]}
	head := d.str(MaxBlobIDLen)
	n := d.uv()
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail("pack count")
	}
	var packs []*indexPack
	for i := uint64(0); i < n && d.err == nil; i++ {
		var ref PackRef
		ref.BlobID = d.str(MaxBlobIDLen)
		ref.Size = int64(d.uv())
		ref.EndEpoch = d.uv()
		ref.IndexLength = int64(d.uv())
		head := d.byte() == 1
		plain := d.bytes(int(min(d.uv(), uint64(len(d.b)+1))))
		if d.err != nil {
			break
		}
		if err := ref.validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrIndexFile, err)
		}
		pix, err := DecodePackIndex(plain, ref.Size-HeaderSize-ref.IndexLength)
		if err != nil {
			return nil, fmt.Errorf("%w: pack %s: %w", ErrIndexFile, ref.BlobID, err)
		}
		packs = append(packs, &indexPack{ref: ref, head: head, entries: pix.Entries})
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	if head != "" && !ValidBlobID(head) {
		return nil, fmt.Errorf("%w: head %q", ErrIndexFile, clip(head))
	}
	ix := NewIndex()
	ix.replace(head, packs)
	return ix, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrIndexFile, what)
	}
	d.b = nil
}

func (d *decoder) uv() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	b := d.bytes(1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (d *decoder) str(max int) string {
	n := d.uv()
	if n > uint64(max) {
		d.fail("string too long")
		return ""
	}
	return string(d.bytes(int(n)))
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
