package drill

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/fsys"
	bundlehash "github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// kind is the type of a directory entry.
type kind uint8

const (
	kindFile kind = iota + 1
	kindDir
	kindSymlink
	kindOther
)

func (k kind) String() string {
	switch k {
	case kindFile:
		return "file"
	case kindDir:
		return "directory"
	case kindSymlink:
		return "symlink"
	}
	return "special file"
}

// entry is what the manifest knows about one path.
type entry struct {
	kind kind
	mode fs.FileMode // permission and special bits (fsys.Meta)
	size int64
	sum  [32]byte // files, when the manifest was taken with sums
	// target is a symlink's target, and for a regular file with several
	// names in the tree (hard links) the first of them in walk order; ""
	// for that first name and for a file of one name.
	target string
	// changed is when the entry last changed (its ctime where there is
	// one): whether the live brain moved on since a snapshot.
	changed time.Time
}

// manifest describes a tree without holding its data: path → type, mode,
// size and (optionally) SHA-256. The top-level lock is small and kept
// whole; the receipts export is kept as the multiset of its lines' hashes.
type manifest struct {
	root        string
	rootMode    fs.FileMode // permission and special bits
	rootChanged time.Time
	sums        bool
	entries     map[string]entry // slash paths relative to root; root excluded

	lock        []byte // top-level bundle.lock.json; nil when absent
	receipts    map[[32]byte]int
	receiptsN   int  // lines in receipts
	hasReceipts bool // top-level receipts.ndjson exists
}

// scan walks root (which may be a symlink to the directory; links below it
// are never followed). With sums every regular file is read and hashed.
func scan(ctx context.Context, root string, sums bool) (*manifest, error) {
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	st, err := os.Lstat(root)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", root)
	}
	m := &manifest{root: root, rootMode: st.Mode() & fsys.Meta, rootChanged: changed(st), sums: sums, entries: map[string]entry{}}
	names := map[fileID]string{} // the first name of each file with several
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		info, err := d.Info() // lstat: links are never followed
		if err != nil {
			return err
		}
		e := entry{mode: info.Mode() & fsys.Meta, changed: changed(info)}
		switch t := info.Mode().Type(); {
		case t.IsDir():
			e.kind = kindDir
		case t.IsRegular():
			e.kind, e.size = kindFile, info.Size()
			if id, ok := linked(info); ok {
				if first, seen := names[id]; seen {
					e.target = first
				} else {
					names[id] = rel
				}
			}
			if err := m.readFile(p, rel, &e); err != nil {
				return err
			}
		case t&fs.ModeSymlink != 0:
			e.kind = kindSymlink
			e.target, _ = os.Readlink(p)
		default:
			e.kind = kindOther
		}
		m.entries[rel] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", root, err)
	}
	return m, nil
}

// readFile reads what the manifest keeps of one regular file.
func (m *manifest) readFile(p, rel string, e *entry) error {
	special := rel == bundlelock.FileName || rel == snapshot.ReceiptsFile
	if !m.sums && !special {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	switch rel {
	case bundlelock.FileName:
		b, err := io.ReadAll(io.LimitReader(f, bundlelock.MaxSize+1))
		if err != nil {
			return err
		}
		if len(b) > bundlelock.MaxSize {
			return fmt.Errorf("%s is over %d bytes", rel, bundlelock.MaxSize)
		}
		h.Write(b)
		m.lock = b
	case snapshot.ReceiptsFile:
		m.hasReceipts = true
		m.receipts, m.receiptsN, err = lineHashes(io.TeeReader(f, h))
		if err != nil {
			return fmt.Errorf("read %s: %w", rel, err)
		}
	default:
		if _, err := io.Copy(h, f); err != nil {
			return fmt.Errorf("read %s: %w", rel, err)
		}
	}
	h.Sum(e.sum[:0])
	return nil
}

// lineHashes counts the SHA-256 of every non-empty '\n'-separated line.
func lineHashes(r io.Reader) (map[[32]byte]int, int, error) {
	out := map[[32]byte]int{}
	n := 0
	br := bufio.NewReaderSize(r, 64<<10)
	var h hash.Hash = sha256.New()
	empty := true
	flush := func() {
		if !empty {
			var s [32]byte
			h.Sum(s[:0])
			out[s]++
			n++
		}
		h.Reset()
		empty = true
	}
	for {
		chunk, err := br.ReadSlice('\n')
		line := chunk
		if len(line) > 0 && line[len(line)-1] == '\n' {
			line = line[:len(line)-1]
		}
		if len(line) > 0 {
			h.Write(line)
			empty = false
		}
		switch {
		case err == nil:
			flush()
		case errors.Is(err, bufio.ErrBufferFull):
			// A long line: keep absorbing it.
		case err == io.EOF:
			flush()
			return out, n, nil
		default:
			return nil, 0, err
		}
	}
}

// bundleHash is the bundle hash of the files of a summed manifest.
func (m *manifest) bundleHash() bundlehash.Digest {
	var files []bundlehash.File
	for p, e := range m.entries {
		if e.kind == kindFile {
			files = append(files, bundlehash.File{Path: p, Size: e.size, Mode: e.mode.Perm(), SHA256: e.sum})
		}
	}
	return bundlehash.FromFiles(files)
}

// paths returns the manifest's paths in sorted order.
func (m *manifest) paths() []string {
	ps := make([]string, 0, len(m.entries))
	for p := range m.entries {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// unsupported lists the entries a snapshot cannot carry (sockets, fifos,
// devices).
func (m *manifest) unsupported() []string {
	var out []string
	for _, p := range m.paths() {
		if m.entries[p].kind == kindOther {
			out = append(out, "special file "+p)
		}
	}
	return out
}

// symlinks returns the manifest's symlinks and their targets.
func (m *manifest) symlinks() map[string]string {
	out := map[string]string{}
	for p, e := range m.entries {
		if e.kind == kindSymlink {
			out[p] = e.target
		}
	}
	return out
}

// counts returns the number of regular files and directories.
func (m *manifest) counts() (files, dirs int) {
	for _, e := range m.entries {
		switch e.kind {
		case kindFile:
			files++
		case kindDir:
			dirs++
		}
	}
	return files, dirs
}
