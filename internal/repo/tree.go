package repo

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/hermesd/hermesd/internal/fsys"
)

// MaxNameLen bounds one file or directory name in bytes.
const MaxNameLen = 1024

// EntryType says what a tree entry is.
type EntryType uint8

// Entry types (docs/format-v3.md §5). A hard link is an EntryFile whose
// Link is set.
const (
	EntryFile    EntryType = 1
	EntryDir     EntryType = 2
	EntrySymlink EntryType = 3 // revision 3: a symbolic link, its target in Link
)

// Tree encodings of the entry types (docs/format-v3.md §5). Trees of
// revision 1 hold only the first two; revision 2 trees (written since
// 2026-11-27) only the next three, and revision 3 trees (since
// 2026-11-29, only where a directory holds a symlink) those and the last.
const (
	codeFile1   = 0x01 // revision 1: file, permission bits, no time
	codeDir1    = 0x02 // revision 1: directory, permission bits, no time
	codeFile    = 0x03 // file with its mtime and special bits
	codeDir     = 0x04 // directory with its mtime and special bits
	codeLink    = 0x05 // another name of a file met earlier in the walk
	codeSymlink = 0x06 // revision 3: a symlink, its target verbatim
)

// NoTime is the mtime, in a restore's plan and in Commit.RootMeta, of
// what records no time: a restore leaves it with the time it is written.
// (An Entry says so with Untimed: every int64 is a time a tree may
// record.)
const NoTime int64 = math.MinInt64

func (t EntryType) String() string {
	switch t {
	case EntryFile:
		return "file"
	case EntryDir:
		return "dir"
	case EntrySymlink:
		return "symlink"
	}
	return fmt.Sprintf("entry(%d)", uint8(t))
}

// Entry is one name of a directory: a regular file with its size, the
// SHA-256 of its whole content and its chunk ids in order, a directory
// with its subtree id, or a symlink with its target. Mode holds the
// permission bits and the setuid, setgid and sticky bits (fsys.Meta);
// Mtime the modification time in nanoseconds since the Unix epoch, any
// int64, unless Untimed (revision 1 trees record no times).
//
// A file with Link set is a hard link: another name of the file at path
// Link (from the root tree), which the walk meets first. It carries that
// file's size and SHA-256 (so the bundle hash and diffs need no other
// tree) but no chunks, mode or time: those are the other name's.
//
// A symlink (EntrySymlink) has its target, verbatim, in Link, its own
// Mtime, and no mode (Linux gives every link 0777), size or chunks. It is
// never followed, and like the bundle hash, counts and sizes ignore it.
type Entry struct {
	Name string
	Type EntryType
	// Untimed: the entry records no time (revision 1); Mtime is 0.
	Untimed bool
	Mode    fs.FileMode
	Mtime   int64
	Size    int64 // file only
	// SHA256 is a file's content SHA-256, a directory's subtree id
	// (Subtree): one field for both keeps a brain's trees 32 bytes a file
	// smaller in memory.
	SHA256 [32]byte
	Chunks []ID // file only; empty iff Size == 0 (or Link is set)
	// Link is, for a file, the path of the file it is a hard link of
	// ("" for none); for a symlink, its target.
	Link string
}

// IsLink reports whether e is another name of a file met earlier.
func (e *Entry) IsLink() bool { return e.Type == EntryFile && e.Link != "" }

// DirEntry returns the entry of a directory whose tree is subtree.
func DirEntry(name string, mode fs.FileMode, subtree ID) Entry {
	return Entry{Name: name, Type: EntryDir, Mode: mode, SHA256: subtree}
}

// Subtree returns a directory entry's tree id.
func (e *Entry) Subtree() ID { return e.SHA256 }

// Tree is one directory: its entries sorted by name bytes, names unique.
type Tree struct {
	Entries []Entry
}

// Find returns the entry called name, or nil.
func (t *Tree) Find(name string) *Entry {
	lo, hi := 0, len(t.Entries)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.Entries[m].Name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(t.Entries) && t.Entries[lo].Name == name {
		return &t.Entries[lo]
	}
	return nil
}

// Tree encoding sizes.
const (
	treeHeaderLen   = 4          // u32 entry count
	entryFixedLen   = 2 + 1 + 2  // name length, type, mode
	fileFixedLen    = 8 + 32 + 4 // size, sha256, chunk count
	dirFixedLen     = 32         // subtree id
	timeLen         = 8          // i64 mtime (revision 2)
	linkFixedLen    = 8 + 32 + 2 // size, sha256, target length
	symlinkFixedLen = 8 + 2      // mtime, target length
	minTreeEntryLen = entryFixedLen + 1 + symlinkFixedLen + 1
	// MaxLinkLen bounds a hard link's target path.
	MaxLinkLen = 4095
)

// CheckName validates one name against the format's policy, the same as
// the bundle hasher's plus the structural rules: non-empty, valid UTF-8, no
// '/', NUL or '\', not "." or "..", at most MaxNameLen bytes.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %q: longer than %d bytes", ErrName, clip(name), MaxNameLen)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q", ErrName, name)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrName, name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("%w: %q contains '/', '\\' or NUL", ErrName, name)
	}
	return nil
}

// Encode returns the tree's canonical bytes (docs/format-v3.md §5): the same
// directory always encodes to the same bytes, hence the same id. It
// refuses entries out of order, duplicate or invalid names, and fields out
// of range.
func (t *Tree) Encode() ([]byte, error) {
	return t.appendEncoding(nil)
}

func (t *Tree) encodedLen() int {
	n := treeHeaderLen
	for i := range t.Entries {
		e := &t.Entries[i]
		n += entryFixedLen + len(e.Name)
		switch {
		case e.Type == EntrySymlink:
			n += symlinkFixedLen + len(e.Link)
		case e.Link != "":
			n += linkFixedLen + len(e.Link)
		case e.Type == EntryDir:
			n += timeLen + dirFixedLen
		default:
			n += timeLen + fileFixedLen + 32*len(e.Chunks)
		}
	}
	return n
}

// code returns the entry's type byte, and whether it is of revision 1 (a
// file or directory without a time).
func (e *Entry) code() (byte, bool, error) {
	switch {
	case e.Type == EntrySymlink:
		if e.Untimed {
			return 0, false, fmt.Errorf("repo: %s: a symlink records its time", e.Name)
		}
		return codeSymlink, false, nil
	case e.Link != "":
		if e.Type != EntryFile {
			return 0, false, fmt.Errorf("repo: %s: a %s cannot be a hard link", e.Name, e.Type)
		}
		return codeLink, false, nil
	case e.Untimed:
		if e.Mtime != 0 {
			return 0, true, fmt.Errorf("repo: %s: an entry without a time has mtime %d", e.Name, e.Mtime)
		}
		if e.Mode&^0o777 != 0 {
			return 0, true, fmt.Errorf("repo: %s: an entry without a time has only permission bits, not %v", e.Name, e.Mode)
		}
		switch e.Type {
		case EntryFile:
			return codeFile1, true, nil
		case EntryDir:
			return codeDir1, true, nil
		}
	default:
		switch e.Type {
		case EntryFile:
			return codeFile, false, nil
		case EntryDir:
			return codeDir, false, nil
		}
	}
	return 0, false, fmt.Errorf("repo: %s: unknown entry type %d", e.Name, e.Type)
}

func (t *Tree) appendEncoding(b []byte) ([]byte, error) {
	if uint64(len(t.Entries)) > math.MaxUint32 {
		return nil, fmt.Errorf("%w: directory has too many entries", ErrTooLarge)
	}
	if cap(b)-len(b) < t.encodedLen() {
		nb := make([]byte, len(b), len(b)+t.encodedLen())
		copy(nb, b)
		b = nb
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(t.Entries)))
	var first bool // the first entry's revision is 1
	for i := range t.Entries {
		e := &t.Entries[i]
		if err := CheckName(e.Name); err != nil {
			return nil, err
		}
		if i > 0 && t.Entries[i-1].Name >= e.Name {
			return nil, fmt.Errorf("repo: tree entries out of order or duplicate at %q", e.Name)
		}
		code, rev1, err := e.code()
		if err != nil {
			return nil, err
		}
		if i == 0 {
			first = rev1
		} else if rev1 != first {
			return nil, fmt.Errorf("repo: tree mixes entries with and without times at %q", e.Name)
		}
		if e.Mode&^fsys.Meta != 0 {
			return nil, fmt.Errorf("repo: %s: mode %v has more than permission and special bits", e.Name, e.Mode)
		}
		if code == codeLink && (e.Mode != 0 || e.Mtime != 0 || len(e.Chunks) != 0) {
			return nil, fmt.Errorf("repo: %s: a hard link has no mode, time or chunks of its own", e.Name)
		}
		if code == codeSymlink && (e.Mode != 0 || e.Size != 0 || len(e.Chunks) != 0) {
			return nil, fmt.Errorf("repo: %s: a symlink has no mode, size or chunks", e.Name)
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(e.Name)))
		b = append(b, e.Name...)
		b = append(b, code)
		b = binary.BigEndian.AppendUint16(b, uint16(fsys.UnixMode(e.Mode)))
		if !rev1 && code != codeLink {
			b = binary.BigEndian.AppendUint64(b, uint64(e.Mtime))
		}
		switch code {
		case codeFile1, codeFile:
			if e.Size < 0 || (e.Size == 0) != (len(e.Chunks) == 0) || int64(len(e.Chunks)) > e.Size && e.Size > 0 {
				return nil, fmt.Errorf("repo: %s: size %d does not fit %d chunks", e.Name, e.Size, len(e.Chunks))
			}
			if uint64(len(e.Chunks)) > math.MaxUint32 {
				return nil, fmt.Errorf("%w: %s has too many chunks", ErrTooLarge, e.Name)
			}
			b = binary.BigEndian.AppendUint64(b, uint64(e.Size))
			b = append(b, e.SHA256[:]...)
			b = binary.BigEndian.AppendUint32(b, uint32(len(e.Chunks)))
			for _, c := range e.Chunks {
				b = append(b, c[:]...)
			}
		case codeDir1, codeDir:
			b = append(b, e.SHA256[:]...)
		case codeSymlink:
			if err := fsys.CheckSymlinkTarget(e.Link); err != nil {
				return nil, fmt.Errorf("repo: %s: %w", e.Name, err)
			}
			b = binary.BigEndian.AppendUint16(b, uint16(len(e.Link)))
			b = append(b, e.Link...)
		case codeLink:
			if err := checkLinkTarget(e.Link); err != nil {
				return nil, fmt.Errorf("repo: %s: %w", e.Name, err)
			}
			if e.Size < 0 {
				return nil, fmt.Errorf("repo: %s: size %d out of range", e.Name, e.Size)
			}
			b = binary.BigEndian.AppendUint64(b, uint64(e.Size))
			b = append(b, e.SHA256[:]...)
			b = binary.BigEndian.AppendUint16(b, uint16(len(e.Link)))
			b = append(b, e.Link...)
		}
	}
	return b, nil
}

// checkLinkTarget checks a hard link's target path: 1 to MaxLinkLen
// bytes, '/'-separated names each within the name policy.
func checkLinkTarget(p string) error {
	if p == "" || len(p) > MaxLinkLen {
		return fmt.Errorf("%w: hard link target of %d bytes", ErrName, len(p))
	}
	for name := range strings.SplitSeq(p, "/") {
		if err := CheckName(name); err != nil {
			return err
		}
	}
	return nil
}

// ID returns the tree's id, SHA-256 of its encoding.
func (t *Tree) ID() (ID, error) {
	b, err := t.Encode()
	if err != nil {
		return ID{}, err
	}
	return sha256.Sum256(b), nil
}

// DecodeTree parses a tree's bytes. Everything is checked: the entry count
// against the bytes present, names (policy, order, uniqueness), types
// (revision 1 entries never mixed with later ones), modes, sizes against
// chunk counts, hard link targets' syntax, symlink targets' length (1 to
// fsys.MaxSymlinkLen bytes, no NUL; anything else is kept verbatim), and
// no trailing bytes. Errors match
// ErrCorrupt. (Whether a link's target exists is the walk's to check:
// trees do not see each other.)
func DecodeTree(b []byte) (*Tree, error) {
	if len(b) < treeHeaderLen {
		return nil, corruptf("tree: %d bytes, shorter than its header", len(b))
	}
	n := binary.BigEndian.Uint32(b)
	rest := b[treeHeaderLen:]
	if uint64(n) > uint64(len(rest)/minTreeEntryLen) {
		return nil, corruptf("tree: %d entries cannot fit in %d bytes", n, len(rest))
	}
	t := &Tree{Entries: make([]Entry, n)}
	rev := 0 // the revision of the entries so far
	for i := range t.Entries {
		e := &t.Entries[i]
		if len(rest) < entryFixedLen {
			return nil, corruptf("tree: entry %d truncated", i)
		}
		nl := int(binary.BigEndian.Uint16(rest))
		if nl == 0 || nl > MaxNameLen || len(rest) < entryFixedLen+nl {
			return nil, corruptf("tree: entry %d: name length %d out of range", i, nl)
		}
		e.Name = string(rest[2 : 2+nl])
		if err := CheckName(e.Name); err != nil {
			return nil, fmt.Errorf("%w: tree: %w", ErrCorrupt, err)
		}
		if i > 0 && t.Entries[i-1].Name >= e.Name {
			return nil, corruptf("tree: entry %q out of order or duplicate", e.Name)
		}
		code := rest[2+nl]
		mode := binary.BigEndian.Uint16(rest[3+nl:])
		rest = rest[entryFixedLen+nl:]
		r := 2
		if code == codeFile1 || code == codeDir1 {
			r = 1
		}
		if rev != 0 && r != rev {
			return nil, corruptf("tree: %q: entries with and without times in one tree", e.Name)
		}
		rev = r
		switch code {
		case codeFile1, codeDir1:
			if mode&^0o777 != 0 {
				return nil, corruptf("tree: %q: mode %#o has more than permission bits", e.Name, mode)
			}
			e.Untimed = true
		case codeSymlink:
			if mode != 0 {
				return nil, corruptf("tree: %q: a symlink with mode %#o", e.Name, mode)
			}
			if len(rest) < timeLen {
				return nil, corruptf("tree: %q truncated", e.Name)
			}
			e.Mtime = int64(binary.BigEndian.Uint64(rest))
			rest = rest[timeLen:]
		case codeFile, codeDir:
			if mode&^0o7777 != 0 {
				return nil, corruptf("tree: %q: mode %#o has more than permission and special bits", e.Name, mode)
			}
			if len(rest) < timeLen {
				return nil, corruptf("tree: %q truncated", e.Name)
			}
			e.Mtime = int64(binary.BigEndian.Uint64(rest))
			rest = rest[timeLen:]
		case codeLink:
			if mode != 0 {
				return nil, corruptf("tree: %q: a hard link with mode %#o", e.Name, mode)
			}
		}
		e.Mode = fsys.FromUnixMode(uint32(mode))
		switch code {
		case codeFile1, codeFile:
			e.Type = EntryFile
			if len(rest) < fileFixedLen {
				return nil, corruptf("tree: %q truncated", e.Name)
			}
			size := binary.BigEndian.Uint64(rest)
			copy(e.SHA256[:], rest[8:40])
			k := binary.BigEndian.Uint32(rest[40:])
			rest = rest[fileFixedLen:]
			switch {
			case size > math.MaxInt64:
				return nil, corruptf("tree: %q: size %d out of range", e.Name, size)
			case (size == 0) != (k == 0), uint64(k) > size:
				return nil, corruptf("tree: %q: %d chunks cannot hold %d bytes", e.Name, k, size)
			case uint64(k) > uint64(len(rest)/32):
				return nil, corruptf("tree: %q: %d chunk ids cannot fit in %d bytes", e.Name, k, len(rest))
			}
			e.Size = int64(size)
			if k > 0 {
				e.Chunks = make([]ID, k)
				for j := range e.Chunks {
					copy(e.Chunks[j][:], rest[32*j:])
				}
				rest = rest[32*int(k):]
			}
		case codeDir1, codeDir:
			e.Type = EntryDir
			if len(rest) < dirFixedLen {
				return nil, corruptf("tree: %q truncated", e.Name)
			}
			copy(e.SHA256[:], rest)
			rest = rest[dirFixedLen:]
		case codeSymlink:
			e.Type = EntrySymlink
			if len(rest) < 2 {
				return nil, corruptf("tree: %q truncated", e.Name)
			}
			tl := int(binary.BigEndian.Uint16(rest))
			rest = rest[2:]
			if tl > len(rest) {
				return nil, corruptf("tree: %q: symlink target of %d bytes truncated", e.Name, tl)
			}
			e.Link = string(rest[:tl])
			rest = rest[tl:]
			if err := fsys.CheckSymlinkTarget(e.Link); err != nil {
				return nil, fmt.Errorf("%w: tree: %q: %w", ErrCorrupt, e.Name, err)
			}
		case codeLink:
			e.Type = EntryFile
			if len(rest) < linkFixedLen {
				return nil, corruptf("tree: %q truncated", e.Name)
			}
			size := binary.BigEndian.Uint64(rest)
			copy(e.SHA256[:], rest[8:40])
			tl := int(binary.BigEndian.Uint16(rest[40:]))
			rest = rest[linkFixedLen:]
			if size > math.MaxInt64 {
				return nil, corruptf("tree: %q: size %d out of range", e.Name, size)
			}
			if tl > len(rest) {
				return nil, corruptf("tree: %q: link target of %d bytes truncated", e.Name, tl)
			}
			e.Size, e.Link = int64(size), string(rest[:tl])
			rest = rest[tl:]
			if err := checkLinkTarget(e.Link); err != nil {
				return nil, fmt.Errorf("%w: tree: %q: %w", ErrCorrupt, e.Name, err)
			}
		default:
			return nil, corruptf("tree: %q: unknown entry type %d", e.Name, code)
		}
	}
	if len(rest) != 0 {
		return nil, corruptf("tree: %d trailing bytes", len(rest))
	}
	return t, nil
}
