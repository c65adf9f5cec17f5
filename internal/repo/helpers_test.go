package repo

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
)

// dirStore is a blob store in a directory: a PackSink and a RangeReader.
// Blob ids are base64url(SHA-256(content)), 43 characters like Walrus's.
type dirStore struct {
	dir   string
	epoch uint64

	mu     sync.Mutex
	stored []string
	reads  int
	fail   func(p *Pack) error // injected upload failure
}

func newDirStore(t testing.TB) *dirStore {
	return &dirStore{dir: t.TempDir(), epoch: 100}
}

func (s *dirStore) StorePack(ctx context.Context, p *Pack) (Stored, error) {
	if s.fail != nil {
		if err := s.fail(p); err != nil {
			return Stored{}, err
		}
	}
	// Copy and hash as a blob store would, streaming.
	in, err := p.Open()
	if err != nil {
		return Stored{}, err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(s.dir, ".upload-*")
	if err != nil {
		return Stored{}, err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), in)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Stored{}, err
	}
	var sum [32]byte
	h.Sum(sum[:0])
	switch {
	case n != p.Size:
		return Stored{}, errors.New("pack file does not match its size")
	case p.Head && sum != p.SHA256:
		return Stored{}, errors.New("head pack does not match its digest")
	case !p.Head && p.SHA256 != [32]byte{}:
		return Stored{}, errors.New("a full pack was hashed (only heads are)")
	}
	id := base64.RawURLEncoding.EncodeToString(sum[:])
	if err := os.Rename(tmp.Name(), filepath.Join(s.dir, id)); err != nil {
		return Stored{}, err
	}
	s.mu.Lock()
	s.stored = append(s.stored, id)
	s.mu.Unlock()
	return Stored{BlobID: id, EndEpoch: s.epoch}, nil
}

func (s *dirStore) ReadRange(ctx context.Context, blobID string, off, n int64, w io.Writer) (int64, error) {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	f, err := os.Open(filepath.Join(s.dir, blobID))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if off < 0 || n <= 0 || off+n > st.Size() {
		return st.Size(), fmt.Errorf("416: range %d+%d outside a blob of %d bytes", off, n, st.Size())
	}
	_, err = io.Copy(w, io.NewSectionReader(f, off, n))
	return st.Size(), err
}

func (s *dirStore) blob(t testing.TB, id string) []byte {
	b, err := os.ReadFile(filepath.Join(s.dir, id))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s *dirStore) put(t testing.TB, id string, b []byte) {
	if err := os.WriteFile(filepath.Join(s.dir, id), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (s *dirStore) sizes(t testing.TB) map[string]int64 {
	m := map[string]int64{}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		fi, _ := e.Info()
		m[e.Name()] = fi.Size()
	}
	return m
}

var testMaster = func() (k [32]byte) {
	for i := range k {
		k[i] = byte(i)
	}
	return k
}()

const testIdentity = "auditor.hermes.eth"

func testKeys(t testing.TB, identity string) *Keys {
	k, err := NewKeys(DeriveAgentKey(testMaster, identity), identity)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fx is a repository under test: keys, a store, a builder, an index.
type fx struct {
	t     testing.TB
	keys  *Keys
	store *dirStore
	b     *Builder
	index *Index
	last  *Result
	head  string
}

func newFx(t testing.TB, maxPack int64) *fx {
	keys := testKeys(t, testIdentity)
	st := newDirStore(t)
	return &fx{t: t, keys: keys, store: st, index: NewIndex(),
		b: &Builder{Keys: keys, Sink: st, SpoolDir: t.TempDir(), MaxPackSize: maxPack}}
}

// snap takes a snapshot of brain, chaining to the previous one, with the
// hash cache's view of the brain as Known.
func (f *fx) snap(brain string, mod func(*SnapshotInput)) *Result {
	f.t.Helper()
	res, err := f.trySnap(brain, mod)
	if err != nil {
		f.t.Fatalf("snapshot: %v", err)
	}
	return res
}

func (f *fx) trySnap(brain string, mod func(*SnapshotInput)) (*Result, error) {
	hr, err := hash.Dir(context.Background(), brain, hash.Options{})
	if err != nil {
		return nil, err
	}
	in := SnapshotInput{Brain: brain, Index: f.index, Known: hash.Files(hr.Files), Want: hr.Digest, LockVersion: 1}
	if f.last != nil {
		in.Prev, in.Trees, in.Parent, in.ParentFormat = f.last.Commit, f.last.Trees, f.head, ParentV3
	}
	if mod != nil {
		mod(&in)
	}
	res, err := f.b.Snapshot(context.Background(), in)
	if err != nil {
		return nil, err
	}
	f.last, f.head = res, res.Head.BlobID
	return res, nil
}

func (f *fx) open() *Reader {
	f.t.Helper()
	r, err := Open(context.Background(), f.store, f.keys, f.head, ReadOptions{})
	if err != nil {
		f.t.Fatalf("open %s: %v", f.head, err)
	}
	return r
}

// restore restores the head into a fresh directory and returns it.
func (f *fx) restore() (string, Restored) {
	f.t.Helper()
	dir := filepath.Join(f.t.TempDir(), "restored")
	res, err := f.open().Restore(context.Background(), dir, RestoreOptions{})
	if err != nil {
		f.t.Fatalf("restore: %v", err)
	}
	return dir, res
}

// writeFiles creates files (path → content) and directories (path ending
// in "/") under root.
func writeFiles(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// randomBytes returns n pseudo-random bytes from seed.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// treeState is a directory's content: path → mode, content, mtime and,
// for a second name of a file, "=" and its first name (dirs have a "/"
// suffix and no content).
type treeState map[string]string

// readTree reads root as a restore should give it back: permission and
// special bits (less setuid and setgid on files, which restores strip,
// and o+w on directories, which they clear), contents, modification times
// (ns; not of the top-level lock and receipts, which record none), hard
// links, symlinks' targets and times.
func readTree(t testing.TB, root string) treeState {
	t.Helper()
	st := treeState{}
	type inode struct{ dev, ino uint64 }
	first := map[inode]string{}
	var paths []string
	info := map[string]os.FileInfo{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		paths, info[rel] = append(paths, rel), fi
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(paths, WalkCompare)
	when := func(fi os.FileInfo) int64 { return fi.ModTime().UnixNano() }
	for _, rel := range paths {
		fi := info[rel]
		mode := fi.Mode() & fsys.Meta
		switch {
		case fi.IsDir():
			st[rel+"/"] = fmt.Sprintf("%04o @%d", fsys.UnixMode(mode&^0o002), when(fi))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(root, rel))
			if err != nil {
				t.Fatal(err)
			}
			st[rel] = fmt.Sprintf("-> %q @%d", target, when(fi))
		case fi.Mode().IsRegular():
			mode, _ = fsys.Restorable(mode, false)
			b, err := os.ReadFile(filepath.Join(root, rel))
			if err != nil {
				t.Fatal(err)
			}
			s := sha256.Sum256(b)
			v := fmt.Sprintf("%04o %d %x", fsys.UnixMode(mode), len(b), s[:8])
			if rel != LockFile && rel != ReceiptsFile {
				v += fmt.Sprintf(" @%d", when(fi))
			}
			if sys, ok := fi.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 && fsys.Inodes {
				k := inode{uint64(sys.Dev), uint64(sys.Ino)}
				if f, ok := first[k]; ok {
					v += " =" + f
				} else {
					first[k] = rel
				}
			}
			st[rel] = v
		}
	}
	return st
}

// within keeps what a restore of path p gives of the state: p, what is
// below it, its ancestors; a second name whose first name is not kept is
// a file of its own there.
func (st treeState) within(p string) treeState {
	want := treeState{}
	for k, v := range st {
		if k == p || k == p+"/" || strings.HasPrefix(k, p+"/") || strings.HasPrefix(p, strings.TrimSuffix(k, "/")+"/") {
			want[k] = v
		}
	}
	for k, v := range want {
		if i := strings.Index(v, " ="); i >= 0 {
			if _, ok := want[v[i+2:]]; !ok {
				want[k] = v[:i]
			}
		}
	}
	return want
}

func diffTrees(t testing.TB, want, got treeState) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	bad := 0
	for _, k := range keys {
		if want[k] != got[k] {
			if bad++; bad <= 10 {
				t.Errorf("%s: want %q, got %q", k, want[k], got[k])
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d differences in all", bad)
	}
}

func mustEqualTree(t testing.TB, brain, restored string) {
	t.Helper()
	diffTrees(t, readTree(t, brain), readTree(t, restored))
}

// mustEqualTreeNode is mustEqualTree for a restore of the independent
// reader, whose times are exact to a microsecond or so.
func mustEqualTreeNode(t testing.TB, brain, restored string) {
	t.Helper()
	want, got := readTree(t, brain), readTree(t, restored)
	at := regexp.MustCompile(`@(-?\d+)`)
	for k, g := range got {
		w := want[k]
		wm, gm := at.FindStringSubmatch(w), at.FindStringSubmatch(g)
		if wm == nil || gm == nil || at.ReplaceAllString(w, "") != at.ReplaceAllString(g, "") {
			continue
		}
		wn, _ := strconv.ParseInt(wm[1], 10, 64)
		gn, _ := strconv.ParseInt(gm[1], 10, 64)
		if d := time.Duration(wn - gn).Abs(); d < 5*time.Microsecond {
			got[k] = w
		}
	}
	diffTrees(t, want, got)
}
