package repo

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
)

// Pack layout (docs/format-v3.md §6):
//
//	header[28] ‖ encrypted index[L] ‖ objects[D]
//
// The header is plaintext and fixed-size; the index is one AES-256-GCM
// object whose associated data includes the header; objects are stored
// back to back, each nonce ‖ ciphertext ‖ tag.
const (
	// HeaderSize is the size of a pack header.
	HeaderSize = 28
	// Magic starts every hermesd blob; the byte after it is the version.
	Magic = "HRMS"
	// Version is the pack format version byte.
	Version = 0x03

	flagHead   = 0x01
	flagEscrow = 0x02

	// MaxEscrowLen bounds a head pack's key escrow (a Seal object of a
	// 32-byte key is a few hundred bytes).
	MaxEscrowLen = 4096

	// indexEntryLen: type[1] ‖ id[32] ‖ offset u64 ‖ length u32.
	indexEntryLen = 1 + 32 + 8 + 4
	// minIndexPlain: entry count u32 ‖ commit length u32.
	minIndexPlain  = 8
	minIndexStored = minIndexPlain + Overhead

	// MaxIndexLen bounds a stored pack index.
	MaxIndexLen = 64 << 20
	// MaxPackLen bounds a pack (Walrus stores at most about 13.6 GiB).
	MaxPackLen = 16 << 30
	// MaxChunkLen bounds a chunk's plaintext as a reader accepts it (the
	// writer makes chunks of at most MaxChunk).
	MaxChunkLen = 16 << 20
	// MaxTreeLen bounds a tree's plaintext.
	MaxTreeLen = 64 << 20
)

// Header is a pack's plaintext header.
type Header struct {
	Head        bool            // the pack carries a commit
	KeyID       [KeyIDSize]byte // AgentKey.ID of the writer
	IndexLength int64           // the index region: escrow, then the encrypted index
	DataLength  int64           // bytes of objects after the index
	// EscrowLength is the key escrow's length at the start of the index
	// region (docs/format-v3.md §6.1); 0 when the pack carries none.
	EscrowLength int64
}

// Size returns the size of the whole pack the header describes.
func (h Header) Size() int64 { return HeaderSize + h.IndexLength + h.DataLength }

// DataOffset returns where the objects begin in the pack.
func (h Header) DataOffset() int64 { return HeaderSize + h.IndexLength }

// Encode returns the header's 28 bytes.
func (h Header) Encode() [HeaderSize]byte {
	var b [HeaderSize]byte
	copy(b[:], Magic)
	b[4] = Version
	if h.Head {
		b[5] = flagHead
	}
	if h.EscrowLength > 0 {
		b[5] |= flagEscrow
		binary.BigEndian.PutUint16(b[6:], uint16(h.EscrowLength))
	}
	copy(b[8:16], h.KeyID[:])
	binary.BigEndian.PutUint32(b[16:], uint32(h.IndexLength))
	binary.BigEndian.PutUint64(b[20:], uint64(h.DataLength))
	return b
}

// DecodeHeader parses a pack header. A blob that does not start with
// "HRMS" 0x03 is ErrNotPack; any other defect is ErrCorrupt.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < 5 || string(b[:4]) != Magic {
		return Header{}, fmt.Errorf("%w: no %q magic", ErrNotPack, Magic)
	}
	if b[4] != Version {
		return Header{}, fmt.Errorf("%w: format version %d", ErrNotPack, b[4])
	}
	if len(b) < HeaderSize {
		return Header{}, corruptf("pack header truncated at %d bytes", len(b))
	}
	var h Header
	if b[5]&^(flagHead|flagEscrow) != 0 {
		return Header{}, corruptf("pack header: unknown flags %#02x", b[5])
	}
	h.Head = b[5]&flagHead != 0
	e := binary.BigEndian.Uint16(b[6:])
	switch {
	case b[5]&flagEscrow == 0 && e != 0:
		return Header{}, corruptf("pack header: escrow length %d without the escrow flag", e)
	case b[5]&flagEscrow != 0 && !h.Head:
		return Header{}, corruptf("pack header: key escrow in a pack that is not a head")
	case b[5]&flagEscrow != 0 && (e == 0 || e > MaxEscrowLen):
		return Header{}, corruptf("pack header: escrow length %d out of range (1 to %d)", e, MaxEscrowLen)
	}
	h.EscrowLength = int64(e)
	copy(h.KeyID[:], b[8:16])
	h.IndexLength = int64(binary.BigEndian.Uint32(b[16:]))
	d := binary.BigEndian.Uint64(b[20:])
	switch {
	case h.IndexLength < minIndexStored+h.EscrowLength || h.IndexLength > MaxIndexLen:
		return Header{}, corruptf("pack header: index length %d out of range", h.IndexLength)
	case d > MaxPackLen-HeaderSize-uint64(h.IndexLength):
		return Header{}, corruptf("pack header: data length %d out of range", d)
	}
	h.DataLength = int64(d)
	return h, nil
}

// IndexEntry locates one object in a pack. Offset is relative to the
// start of the pack's data (Header.DataOffset); Length is the stored
// length, plaintext plus Overhead.
type IndexEntry struct {
	Type   Type
	ID     ID
	Offset int64
	Length int64
}

// Handle returns the entry's object handle.
func (e IndexEntry) Handle() Handle { return Handle{e.Type, e.ID} }

// PackIndex is a pack's index plaintext: its objects in pack order, and
// the commit (JSON) when the pack is a head.
type PackIndex struct {
	Entries []IndexEntry
	Commit  []byte
}

// maxPlain returns the largest plaintext an object of type t may have.
func maxPlain(t Type) int64 {
	switch t {
	case TypeChunk:
		return MaxChunkLen
	case TypeTree:
		return MaxTreeLen
	}
	return -1
}

// Encode returns the index plaintext.
func (ix *PackIndex) Encode() []byte {
	b := make([]byte, 0, minIndexPlain+indexEntryLen*len(ix.Entries)+len(ix.Commit))
	b = binary.BigEndian.AppendUint32(b, uint32(len(ix.Entries)))
	for _, e := range ix.Entries {
		b = append(b, byte(e.Type))
		b = append(b, e.ID[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(e.Offset))
		b = binary.BigEndian.AppendUint32(b, uint32(e.Length))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(ix.Commit)))
	return append(b, ix.Commit...)
}

// DecodePackIndex parses an index plaintext for a pack whose data region
// has dataLen bytes. Entries must tile the data region exactly, in order
// (each starting where the previous ended, the last ending at dataLen),
// with known types, lengths between Overhead and the type's cap, and no
// handle twice. Errors match ErrCorrupt.
func DecodePackIndex(b []byte, dataLen int64) (*PackIndex, error) {
	if len(b) < minIndexPlain {
		return nil, corruptf("pack index: %d bytes, shorter than its fixed fields", len(b))
	}
	n := binary.BigEndian.Uint32(b)
	rest := b[4:]
	if uint64(n) > uint64((len(rest)-4)/indexEntryLen) {
		return nil, corruptf("pack index: %d entries cannot fit in %d bytes", n, len(b))
	}
	if uint64(n) > uint64(dataLen/Overhead) {
		return nil, corruptf("pack index: %d entries cannot fit in %d data bytes", n, dataLen)
	}
	ix := &PackIndex{Entries: make([]IndexEntry, n)}
	seen := make(map[Handle]struct{}, n)
	var off int64
	for i := range ix.Entries {
		e := &ix.Entries[i]
		e.Type = Type(rest[0])
		copy(e.ID[:], rest[1:33])
		o := binary.BigEndian.Uint64(rest[33:])
		e.Length = int64(binary.BigEndian.Uint32(rest[41:]))
		rest = rest[indexEntryLen:]
		max := maxPlain(e.Type)
		switch {
		case max < 0:
			return nil, corruptf("pack index: entry %d: unknown object type %d", i, e.Type)
		case o != uint64(off):
			return nil, corruptf("pack index: entry %d: offset %d, want %d (objects must tile the data)", i, o, off)
		case e.Length < Overhead || e.Length > max+Overhead:
			return nil, corruptf("pack index: %s: length %d out of range", e.Handle(), e.Length)
		case e.Length > dataLen-off:
			return nil, corruptf("pack index: %s at %d+%d runs past the data (%d bytes)", e.Handle(), off, e.Length, dataLen)
		}
		e.Offset = off
		off += e.Length
		if _, dup := seen[e.Handle()]; dup {
			return nil, corruptf("pack index: %s listed twice", e.Handle())
		}
		seen[e.Handle()] = struct{}{}
	}
	if off != dataLen {
		return nil, corruptf("pack index: objects cover %d of %d data bytes", off, dataLen)
	}
	c := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(c) != uint64(len(rest)) {
		return nil, corruptf("pack index: commit length %d, %d bytes left", c, len(rest))
	}
	if c > MaxCommitLen {
		return nil, corruptf("pack index: commit of %d bytes exceeds %d", c, MaxCommitLen)
	}
	if c > 0 {
		ix.Commit = bytes.Clone(rest)
	}
	return ix, nil
}

// openIndex authenticates and parses a pack's stored index against its
// header bytes. A header naming another key id is ErrWrongAgent.
func (k *Keys) openIndex(hdrBytes []byte, h Header, stored []byte) (*PackIndex, error) {
	if h.KeyID != k.keyID {
		return nil, &wrongAgentError{msg: fmt.Sprintf("%s: the pack was written under key id %x, this agent's key id is %x (another agent's snapshot, or another key)",
			ErrWrongAgent.Error(), h.KeyID, k.keyID)}
	}
	if int64(len(stored)) != h.IndexLength {
		return nil, corruptf("pack index: %d bytes, header says %d", len(stored), h.IndexLength)
	}
	escrow, sealed := stored[:h.EscrowLength], stored[h.EscrowLength:]
	plain, err := k.openAAD(nil, k.indexAAD(hdrBytes, escrow), sealed)
	if err != nil {
		return nil, fmt.Errorf("pack index: %w (wrong identity %q, or the pack was tampered with)", err, k.identity)
	}
	ix, err := DecodePackIndex(plain, h.DataLength)
	if err != nil {
		return nil, err
	}
	if h.Head != (len(ix.Commit) > 0) {
		return nil, corruptf("pack index: head flag %v but commit of %d bytes", h.Head, len(ix.Commit))
	}
	return ix, nil
}

// OpenIndex authenticates and parses a pack's stored index; hdr is the
// pack's first HeaderSize bytes.
func (k *Keys) OpenIndex(hdr, stored []byte) (Header, *PackIndex, error) {
	h, err := DecodeHeader(hdr)
	if err != nil {
		return Header{}, nil, err
	}
	ix, err := k.openIndex(hdr[:HeaderSize], h, stored)
	return h, ix, err
}

// Pack is a finished pack, ready to upload: a spool file holding the
// pack at Start, after a hole (see PackWriter). Objects are never held in
// memory: with two packs uploading and one filling, 10 MiB packs (the
// public publishers' cap) would otherwise be most of the builder's memory.
// Read it with Open; Discard frees it.
type Pack struct {
	Path        string // the spool file
	Start       int64  // where the pack begins in it
	Size        int64  // bytes
	IndexLength int64  // stored index length (for the commit's pack list)
	Head        bool   // carries a commit
	Objects     []IndexEntry

	// SHA256 is the whole pack's digest, computed for a head pack only
	// (the daemon records its head's). A full pack is checked by comparing
	// its read-back with Open's bytes, and no reader needs its digest:
	// hashing it would cost a SHA-256 pass over every uploaded byte.
	SHA256 [32]byte

	discarded bool
	spools    *spools // where its file goes when discarded
}

// Open returns a reader of the whole pack from its first byte. Each call
// starts anew (an upload's retries, then the read-back check). The reader
// is also a syscall.Conn of its file, positioned at the pack: an upload
// over plain TCP then moves the pack with sendfile(2) (net.TCPConn's
// ReadFrom under the transport's limit of Size bytes), never through
// user memory; and on Linux Window gives the read-back check the pack's
// bytes without a copy.
func (p *Pack) Open() (io.ReadCloser, error) {
	if p.discarded {
		return nil, errors.New("repo: pack already discarded")
	}
	f, err := os.Open(p.Path)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(p.Start, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("repo: pack spool: %w", err)
	}
	return &PackFile{f: f, start: p.Start, end: p.Start + p.Size, pos: p.Start}, nil
}

// PackFile reads a pack from its spool file (Pack.Open).
type PackFile struct {
	f          *os.File
	start, end int64
	pos        int64 // the file's offset while only Read moved it
	handed     bool  // SyscallConn was called: sendfile may move the offset
	unmap      func() error
}

// Read reads up to the pack's end from the file's offset, which sendfile
// (through SyscallConn) may have advanced.
func (r *PackFile) Read(b []byte) (int, error) {
	if r.handed {
		off, err := r.f.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0, err
		}
		r.pos = off
	}
	if r.pos >= r.end {
		return 0, io.EOF
	}
	if int64(len(b)) > r.end-r.pos {
		b = b[:r.end-r.pos]
	}
	n, err := r.f.Read(b)
	r.pos += int64(n)
	return n, err
}

// ReadAt reads the pack's bytes at off (from its start), whatever the
// file's offset: for its blob id to be computed in place.
func (r *PackFile) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("repo: negative pack offset")
	}
	if off >= r.end-r.start {
		return 0, io.EOF
	}
	short := int64(len(b)) > r.end-r.start-off
	if short {
		b = b[:r.end-r.start-off]
	}
	n, err := r.f.ReadAt(b, r.start+off)
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

// SyscallConn returns the file's, for sendfile(2).
func (r *PackFile) SyscallConn() (syscall.RawConn, error) {
	r.handed = true
	return r.f.SyscallConn()
}

// Close closes the file (and unmaps what Window mapped).
func (r *PackFile) Close() error {
	var err error
	if r.unmap != nil {
		err = r.unmap()
		r.unmap = nil
	}
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Discard gives the pack's file back to its snapshot for the next pack,
// or removes it; the pack cannot be read afterwards. The builder discards
// its packs once StorePack returned.
func (p *Pack) Discard() {
	if p.Path != "" && !p.discarded && p.spools != nil {
		p.spools.put(p.Path)
	}
	p.discarded = true
}

// spools recycles one snapshot's spool files: the file of an uploaded
// pack takes a later pack's objects, overwriting pages already in the
// page cache, where a new file would allocate them anew and the removal
// of the old one free them (together a third of the spool's system time
// on a first snapshot of big). The snapshot drains it as it ends. With
// max 0 (NewPackWriter) each pack gets a new file, removed on Discard.
type spools struct {
	dir  string
	max  int // files kept for reuse
	mu   sync.Mutex
	free []string
	done bool
}

// create returns a spool file to write from the start: a free one, or a
// new one.
func (s *spools) create() (*os.File, error) {
	for {
		s.mu.Lock()
		n := len(s.free)
		if n == 0 {
			s.mu.Unlock()
			return os.CreateTemp(s.dir, "hermesd-objects-*.tmp")
		}
		path := s.free[n-1]
		s.free = s.free[:n-1]
		s.mu.Unlock()
		if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
			return f, nil
		}
		os.Remove(path)
	}
}

// put takes back the file at path, or removes it when enough are kept or
// the snapshot ended.
func (s *spools) put(path string) {
	s.mu.Lock()
	if !s.done && len(s.free) < s.max {
		s.free = append(s.free, path)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	os.Remove(path)
}

// drain removes the free files; files put back later are removed too.
func (s *spools) drain() {
	s.mu.Lock()
	free := s.free
	s.free, s.done = nil, true
	s.mu.Unlock()
	for _, path := range free {
		os.Remove(path)
	}
}

// MinPackSize is the smallest pack cap a writer accepts: a chunk of
// MaxChunk bytes must fit, with its index.
const MinPackSize = 2 << 20

// ErrPackFull is returned by PackWriter.Add when the object does not fit.
var ErrPackFull = errors.New("repo: pack full")

// PackWriter collects sealed objects of one pack under a size cap and, on
// Finish, seals the index (and computes a head pack's SHA-256). The objects go
// to a spool file that becomes the Pack's (see Pack): they are written
// after a hole as large as the largest prefix (header, escrow and index)
// the pack could need, and Finish writes the prefix just before them, so
// the file holds the pack in one piece to send with sendfile(2). A hole
// costs no space on the filesystems Linux spools on (ext4, xfs, btrfs,
// tmpfs). Not safe for concurrent use.
type PackWriter struct {
	keys    *Keys
	max     int64
	spool   *os.File
	buf     *bufio.Writer // in front of spool: small objects cost no write(2) each
	hole    int64         // where the objects begin in the spool
	spools  *spools       // where the spool came from
	entries []IndexEntry
	data    int64
	err     error // sticky
}

// spoolBuf is the write buffer of a pack's spool.
const spoolBuf = 128 << 10

// NewPackWriter starts a pack of at most maxSize bytes, spooled in dir.
func NewPackWriter(keys *Keys, dir string, maxSize int64) (*PackWriter, error) {
	return newPackWriter(keys, &spools{dir: dir}, maxSize)
}

// newPackWriter is NewPackWriter with the spool from sp (a reused file is
// overwritten, and cut to the pack's length by Finish).
func newPackWriter(keys *Keys, sp *spools, maxSize int64) (*PackWriter, error) {
	if maxSize < MinPackSize {
		return nil, fmt.Errorf("%w: pack cap %d is below the minimum %d", ErrTooLarge, maxSize, MinPackSize)
	}
	f, err := sp.create()
	if err != nil {
		return nil, fmt.Errorf("repo: create pack spool: %w", err)
	}
	max := min(maxSize, MaxPackLen)
	// The prefix is at most the pack, and its index region at most
	// MaxIndexLen (Fits).
	hole := min(max, HeaderSize+MaxIndexLen)
	if _, err := f.Seek(hole, io.SeekStart); err != nil {
		f.Close()
		sp.put(f.Name())
		return nil, fmt.Errorf("repo: pack spool: %w", err)
	}
	return &PackWriter{keys: keys, max: max, spool: f, buf: bufio.NewWriterSize(f, spoolBuf), hole: hole, spools: sp}, nil
}

// Len returns the number of objects added.
func (w *PackWriter) Len() int { return len(w.entries) }

// sizeWith returns the size the pack would have with extra more objects
// of storedLen bytes in all and a commit of commitLen bytes.
func (w *PackWriter) sizeWith(storedLen, commitLen int64, extra int) (total, indexPlain int64) {
	n := int64(len(w.entries) + extra)
	indexPlain = minIndexPlain + indexEntryLen*n + commitLen
	total = HeaderSize + indexPlain + Overhead + w.data + storedLen
	if commitLen > 0 {
		total += int64(len(w.keys.escrow))
		indexPlain += int64(len(w.keys.escrow)) // the index region's bound covers it
	}
	return total, indexPlain
}

// Fits reports whether an object of storedLen bytes still fits, leaving
// room for a commit of commitLen bytes (storedLen 0: only the commit).
func (w *PackWriter) Fits(storedLen, commitLen int64) bool {
	extra := 1
	if storedLen == 0 {
		extra = 0
	}
	total, ix := w.sizeWith(storedLen, commitLen, extra)
	return total <= w.max && ix+Overhead <= MaxIndexLen
}

// Add appends a sealed object (Keys.Seal's output). It returns ErrPackFull
// when the object does not fit under the cap; the pack is then unchanged.
func (w *PackWriter) Add(t Type, id ID, stored []byte) error {
	if w.err != nil {
		return w.err
	}
	if maxPlain(t) < 0 || int64(len(stored)) < Overhead || int64(len(stored)) > maxPlain(t)+Overhead {
		return fmt.Errorf("repo: %s %s: stored length %d out of range", t, id.Short(), len(stored))
	}
	if !w.Fits(int64(len(stored)), 0) {
		return ErrPackFull
	}
	if _, err := w.buf.Write(stored); err != nil {
		w.err = fmt.Errorf("repo: write pack spool: %w", err)
		return w.err
	}
	w.entries = append(w.entries, IndexEntry{Type: t, ID: id, Offset: w.data, Length: int64(len(stored))})
	w.data += int64(len(stored))
	return nil
}

// SealIndex returns what precedes the objects of a pack holding ix and
// dataLen bytes of objects: the header (a head pack when ix has a commit,
// the writer's key id), the key escrow of a head pack when the keys carry
// one (SetEscrow), and the index sealed under the object key with the
// header and escrow as associated data; and the header itself.
func (k *Keys) SealIndex(ix *PackIndex, dataLen int64) ([]byte, Header, error) {
	plain := ix.Encode()
	h := Header{Head: len(ix.Commit) > 0, KeyID: k.keyID, DataLength: dataLen}
	var escrow []byte
	if h.Head {
		escrow = k.escrow
	}
	h.EscrowLength = int64(len(escrow))
	h.IndexLength = h.EscrowLength + int64(len(plain)+Overhead)
	hdr := h.Encode()
	prefix := make([]byte, 0, HeaderSize+h.IndexLength)
	prefix = append(prefix, hdr[:]...)
	prefix = append(prefix, escrow...)
	prefix, err := k.sealAAD(prefix, k.indexAAD(hdr[:], escrow), plain)
	return prefix, h, err
}

// SetEscrow makes every head pack these keys seal carry escrow, the agent
// key sealed to key servers (docs/format-v3.md §6.1). The keys do not
// check what it holds; the caller produced it.
func (k *Keys) SetEscrow(escrow []byte) error {
	if len(escrow) == 0 || len(escrow) > MaxEscrowLen {
		return fmt.Errorf("repo: a key escrow of %d bytes (1 to %d)", len(escrow), MaxEscrowLen)
	}
	k.escrow = bytes.Clone(escrow)
	return nil
}

// ParseEscrow returns the key escrow of a head pack from its first bytes
// (at least HeaderSize + EscrowLength of them), without any key: the
// header, and the escrow (nil when the pack carries none).
func ParseEscrow(b []byte) (Header, []byte, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return Header{}, nil, err
	}
	if !h.Head {
		return h, nil, corruptf("pack is not a head: it carries no commit and no key escrow")
	}
	if int64(len(b)) < HeaderSize+h.EscrowLength {
		return h, nil, corruptf("key escrow truncated: %d of %d bytes", int64(len(b))-HeaderSize, h.EscrowLength)
	}
	if h.EscrowLength == 0 {
		return h, nil, nil
	}
	return h, bytes.Clone(b[HeaderSize : HeaderSize+h.EscrowLength]), nil
}

// Finish completes the pack: a head pack when commit is non-empty. The
// returned Pack belongs to the caller, who discards it. The writer is done
// either way.
func (w *PackWriter) Finish(commit []byte) (p *Pack, err error) {
	defer w.Abort()
	if w.err != nil {
		return nil, w.err
	}
	if total, ix := w.sizeWith(0, int64(len(commit)), 0); total > w.max || ix+Overhead > MaxIndexLen {
		return nil, fmt.Errorf("%w: pack of %d bytes with its commit exceeds the cap of %d", ErrPackFull, total, w.max)
	}
	prefix, h, err := w.keys.SealIndex(&PackIndex{Entries: w.entries, Commit: commit}, w.data)
	if err != nil {
		return nil, err
	}
	p = &Pack{Size: h.Size(), IndexLength: h.IndexLength, Head: h.Head, Objects: w.entries}
	if err := w.keepSpool(p, prefix); err != nil {
		return nil, err
	}
	return p, nil
}

// keepSpool makes the spool p's file: it writes the prefix before the
// objects, checks the file's length and hashes a head pack.
func (w *PackWriter) keepSpool(p *Pack, prefix []byte) error {
	if err := w.buf.Flush(); err != nil {
		return fmt.Errorf("repo: write pack spool: %w", err)
	}
	p.Start = w.hole - int64(len(prefix))
	if p.Start < 0 {
		return fmt.Errorf("repo: a pack prefix of %d bytes is over its room of %d", len(prefix), w.hole)
	}
	if _, err := w.spool.WriteAt(prefix, p.Start); err != nil {
		return fmt.Errorf("repo: write pack spool: %w", err)
	}
	// A reused file may be longer: the pack ends the file.
	if err := w.spool.Truncate(w.hole + w.data); err != nil {
		return fmt.Errorf("repo: pack spool: %w", err)
	}
	st, err := w.spool.Stat()
	if err != nil {
		return fmt.Errorf("repo: pack spool: %w", err)
	}
	if st.Size() != w.hole+w.data {
		return fmt.Errorf("repo: pack spool holds %d bytes, want %d", st.Size()-w.hole, w.data)
	}
	if p.Head {
		sum := sha256.New()
		if _, err := io.CopyBuffer(sum, io.NewSectionReader(w.spool, p.Start, p.Size), make([]byte, 64<<10)); err != nil {
			return fmt.Errorf("repo: read pack spool: %w", err)
		}
		sum.Sum(p.SHA256[:0])
	}
	if err := w.spool.Close(); err != nil {
		return fmt.Errorf("repo: pack spool: %w", err)
	}
	p.Path, p.spools = w.spool.Name(), w.spools
	w.spool = nil // the pack's now
	return nil
}

// Abort discards what the writer holds. It is safe to call more than once
// and after Finish.
func (w *PackWriter) Abort() {
	w.buf = nil // its 128 KiB would wait with a pack waiting for its upload
	if w.spool != nil {
		w.spool.Close()
		w.spools.put(w.spool.Name())
		w.spool = nil
	}
	if w.err == nil {
		w.err = errors.New("repo: pack writer closed")
	}
}
