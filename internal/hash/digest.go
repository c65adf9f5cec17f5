package hash

import (
	"encoding/hex"
	"errors"
	"fmt"
	gohash "hash"
	"io"
	"io/fs"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/crypto/sha3"

	"github.com/hermesd/hermesd/internal/fsys"
)

// Digest is a 32-byte Keccak-256 output: a bundle hash, a per-file leaf or
// a state delta.
type Digest [32]byte

// Null is the bundle hash of a tree without files (or of a missing tree):
// keccak256("stratum/empty-bundle").
var Null = keccak256([]byte("stratum/empty-bundle"))

// ErrSyntax is returned by ParseDigest for anything but "0x" followed by
// 64 hex digits.
var ErrSyntax = errors.New("hash: invalid digest")

// String returns d as "0x" followed by 64 lowercase hex digits, the form the
// reference runtime prints and stores.
func (d Digest) String() string {
	var b [66]byte
	b[0], b[1] = '0', 'x'
	hex.Encode(b[2:], d[:])
	return string(b[:])
}

// MarshalText implements encoding.TextMarshaler (the String form).
func (d Digest) MarshalText() ([]byte, error) {
	var b [66]byte
	b[0], b[1] = '0', 'x'
	hex.Encode(b[2:], d[:])
	return b[:], nil
}

// UnmarshalText implements encoding.TextUnmarshaler (see ParseDigest).
func (d *Digest) UnmarshalText(text []byte) error {
	v, err := ParseDigest(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ParseDigest parses "0x" followed by 64 hex digits (either case).
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 2+2*len(d) || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return d, fmt.Errorf("%w: %q: want 0x and 64 hex digits", ErrSyntax, clip(s))
	}
	if _, err := hex.Decode(d[:], []byte(s[2:])); err != nil {
		return Digest{}, fmt.Errorf("%w: %q: %v", ErrSyntax, clip(s), err)
	}
	return d, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// File is one regular file of a bundle: its key (path relative to the
// bundle root, '/'-separated), size, permission bits (mode & 0o777) and the
// SHA-256 of its contents. A Cache also gives the stat data the digest was
// taken with (Stat: mode with special bits, mtime, inode, links), which a
// v3 snapshot records for a file it does not read again; other sources
// leave it zero.
type File struct {
	Path   string
	Size   int64
	Mode   fs.FileMode
	SHA256 [32]byte
	Stat   fsys.Info
}

// Files is a list of files in key order, as Dir returns them.
type Files []File

// Lookup returns the file at path.
func (l Files) Lookup(path string) (File, bool) {
	i, ok := slices.BinarySearchFunc(l, path, func(f File, p string) int { return Compare(f.Path, p) })
	if !ok {
		return File{}, false
	}
	return l[i], true
}

// Leaf returns the per-file hash keccak256(utf8(path) ‖ 0x00 ‖ contentSHA256).
func Leaf(path string, contentSHA256 [32]byte) Digest {
	k := keccakPool.Get().(*keccak)
	d := k.leaf(path, &contentSHA256)
	keccakPool.Put(k)
	return d
}

// StateDelta returns keccak256(before ‖ after), the stateDeltaHash of a
// transition (computed even when before == after).
func StateDelta(before, after Digest) Digest {
	var b [64]byte
	copy(b[:32], before[:])
	copy(b[32:], after[:])
	return keccak256(b[:])
}

// Bundle returns keccak256 of the concatenated leaves, which must already be
// in key order, or Null when there are none.
func Bundle(leaves []Digest) Digest {
	if len(leaves) == 0 {
		return Null
	}
	k := keccakPool.Get().(*keccak)
	k.h.Reset()
	// []Digest is contiguous: absorb it in one call, without copying.
	k.h.Write(unsafe.Slice(&leaves[0][0], len(leaves)*len(leaves[0])))
	d := k.sum()
	keccakPool.Put(k)
	return d
}

// Bundler computes a bundle hash one file at a time, without holding the
// leaves: Add each file in key order, then Sum once. Make it with
// NewBundler.
type Bundler struct {
	leaf, all *keccak
	n         int
}

// NewBundler returns an empty Bundler.
func NewBundler() *Bundler {
	b := &Bundler{leaf: keccakPool.Get().(*keccak), all: keccakPool.Get().(*keccak)}
	b.all.h.Reset()
	return b
}

// Add absorbs the leaf of the file at path with content digest sum.
func (b *Bundler) Add(path string, sum [32]byte) {
	d := b.leaf.leaf(path, &sum)
	b.all.h.Write(d[:])
	b.n++
}

// Sum returns the bundle hash of the files added (Null for none). The
// Bundler is done: it must not be used again.
func (b *Bundler) Sum() Digest {
	d := Null
	if b.n > 0 {
		d = b.all.sum()
	}
	keccakPool.Put(b.leaf)
	keccakPool.Put(b.all)
	b.leaf, b.all = nil, nil
	return d
}

// FromFiles returns the bundle hash of files: the excluded top-level names
// are dropped, the rest sorted by Compare (files is not modified). Paths
// are taken as given; they must be distinct.
func FromFiles(files []File) Digest {
	type keyed struct {
		path string
		sum  *[32]byte
	}
	keys := make([]keyed, 0, len(files))
	for i := range files {
		if !Excluded(files[i].Path) {
			keys = append(keys, keyed{files[i].Path, &files[i].SHA256})
		}
	}
	slices.SortFunc(keys, func(a, b keyed) int { return Compare(a.path, b.path) })
	b := NewBundler()
	for _, f := range keys {
		b.Add(f.path, *f.sum)
	}
	return b.Sum()
}

// keccak is a reusable legacy Keccak-256 state plus scratch space. The
// x/crypto implementation (pure Go) is faster here than go-ethereum's
// assembly, and reusing the state avoids an allocation per leaf.
type keccak struct {
	h   gohash.Hash
	r   io.Reader // the same state; Read squeezes without Sum's clone
	buf []byte
}

func newKeccak() *keccak {
	h := sha3.NewLegacyKeccak256()
	return &keccak{h: h, r: h.(io.Reader), buf: make([]byte, 0, 256)}
}

var keccakPool = sync.Pool{New: func() any { return newKeccak() }}

// sum squeezes the digest; the state must be Reset before reuse.
func (k *keccak) sum() Digest {
	var d Digest
	k.r.Read(d[:])
	return d
}

func (k *keccak) leaf(path string, sum *[32]byte) Digest {
	b := append(k.buf[:0], path...)
	b = append(b, 0)
	b = append(b, sum[:]...)
	k.buf = b[:0]
	k.h.Reset()
	k.h.Write(b)
	return k.sum()
}

func keccak256(data []byte) Digest {
	k := keccakPool.Get().(*keccak)
	k.h.Reset()
	k.h.Write(data)
	d := k.sum()
	keccakPool.Put(k)
	return d
}
