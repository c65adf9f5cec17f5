package hash

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
)

// Cache file format (all integers varint-encoded, as in encoding/binary):
//
//	magic   "hermesd-hash-cache/v2\n"
//	count   uvarint
//	count × entry: key length uvarint, key bytes, size varint,
//	        mtime ns varint, ctime ns varint, inode uvarint, device uvarint,
//	        links uvarint, mode uvarint, flags byte (bit 0: racy), sha256 [32]
//	trailer sha256 of everything before it [32]
//
// Entries are in key order. The file is a cache: any defect makes Load
// fail and the caller starts empty (one full read of the tree). A v1 file
// (no link count) loads with one link per file: a file with more is read
// again by the next pass, as its stat no longer matches.
const (
	cacheMagic   = "hermesd-hash-cache/v2\n"
	cacheMagicV1 = "hermesd-hash-cache/v1\n"
)

// maxCacheFile bounds what Load reads (about 10 M files).
const maxCacheFile = 1 << 30

// Save writes the cache's entries to w, for Load after a restart.
func (c *Cache) Save(w io.Writer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	sum := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, sum), 64<<10)
	bw.WriteString(cacheMagic)
	var tmp [binary.MaxVarintLen64]byte
	uv := func(v uint64) { bw.Write(binary.AppendUvarint(tmp[:0], v)) }
	sv := func(v int64) { bw.Write(binary.AppendVarint(tmp[:0], v)) }
	uv(uint64(len(c.sorted)))
	for _, e := range c.sorted {
		uv(uint64(len(e.key)))
		bw.WriteString(e.key)
		sv(e.size)
		sv(e.st.Mtime)
		sv(e.st.Ctime)
		uv(e.st.Ino)
		uv(e.st.Dev)
		uv(e.st.Nlink)
		uv(uint64(e.st.Mode))
		var flags byte
		if e.racy {
			flags |= 1
		}
		bw.WriteByte(flags)
		bw.Write(e.sum[:])
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("hash: save cache: %w", err)
	}
	if _, err := w.Write(sum.Sum(nil)); err != nil {
		return fmt.Errorf("hash: save cache: %w", err)
	}
	return nil
}

// Load replaces the cache's entries with those saved by Save. The loaded
// entries are not trusted yet: the next Update is a full Rescan, which
// re-reads every file whose stat no longer matches. On error the cache is
// unchanged.
func (c *Cache) Load(r io.Reader) error {
	data, err := io.ReadAll(io.LimitReader(r, maxCacheFile+1))
	if err != nil {
		return fmt.Errorf("hash: load cache: %w", err)
	}
	if len(data) > maxCacheFile {
		return fmt.Errorf("%w: larger than %d bytes", errCacheFormat, maxCacheFile)
	}
	if len(data) < len(cacheMagic)+sha256.Size {
		return fmt.Errorf("%w: bad header", errCacheFormat)
	}
	v1 := string(data[:len(cacheMagicV1)]) == cacheMagicV1
	if !v1 && string(data[:len(cacheMagic)]) != cacheMagic {
		return fmt.Errorf("%w: bad header", errCacheFormat)
	}
	body, trailer := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], trailer) {
		return fmt.Errorf("%w: checksum mismatch", errCacheFormat)
	}
	p := &parser{b: body[len(cacheMagic):]}
	n := p.uvarint()
	if p.err == nil && n > uint64(len(p.b)) {
		p.err = errCacheFormat
	}
	ents := make([]*entry, 0, n)
	for i := uint64(0); i < n && p.err == nil; i++ {
		e := &entry{}
		e.key = string(p.bytes(p.uvarint()))
		e.size = p.varint()
		e.st.Mtime = p.varint()
		e.st.Ctime = p.varint()
		e.st.Ino = p.uvarint()
		e.st.Dev = p.uvarint()
		e.st.Nlink = 1
		if !v1 {
			e.st.Nlink = p.uvarint()
		}
		e.st.Mode = fs.FileMode(p.uvarint())
		flags := p.bytes(1)
		copy(e.sum[:], p.bytes(32))
		if p.err != nil {
			break
		}
		e.racy = flags[0]&1 != 0
		e.st.Size = e.size
		if e.key == "" || Excluded(e.key) || checkKey(e.key) != nil || !e.st.Mode.IsRegular() ||
			(len(ents) > 0 && Compare(ents[len(ents)-1].key, e.key) >= 0) {
			return fmt.Errorf("%w: bad entry %q", errCacheFormat, e.key)
		}
		e.leaf = Leaf(e.key, e.sum)
		ents = append(ents, e)
	}
	if p.err == nil && len(p.b) != 0 {
		p.err = errCacheFormat
	}
	if p.err != nil {
		return fmt.Errorf("%w: truncated or malformed", errCacheFormat)
	}
	m := make(map[string]*entry, len(ents))
	for _, e := range ents {
		m[e.key] = e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries, c.sorted, c.validated = m, ents, false
	c.recompute()
	return nil
}

type parser struct {
	b   []byte
	err error
}

func (p *parser) uvarint() uint64 {
	if p.err != nil {
		return 0
	}
	v, n := binary.Uvarint(p.b)
	if n <= 0 {
		p.err = errCacheFormat
		return 0
	}
	p.b = p.b[n:]
	return v
}

func (p *parser) varint() int64 {
	if p.err != nil {
		return 0
	}
	v, n := binary.Varint(p.b)
	if n <= 0 {
		p.err = errCacheFormat
		return 0
	}
	p.b = p.b[n:]
	return v
}

func (p *parser) bytes(n uint64) []byte {
	if p.err != nil || n > uint64(len(p.b)) {
		p.err = errCacheFormat
		return nil
	}
	b := p.b[:n]
	p.b = p.b[n:]
	return b
}
