package hash

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/hermesd/hermesd/internal/fsys"
	"golang.org/x/crypto/sha3"
)

func utf8Valid(s string) bool { return utf8.ValidString(s) }

// naiveDir is a deliberately simple second implementation of
// docs/design.md §2: recursive os.ReadDir, os.ReadFile, sort.Slice over UTF-16 code units.
func naiveDir(t testing.TB, root string) Digest {
	t.Helper()
	type rec struct {
		key string
		sum [32]byte
	}
	var recs []rec
	var walk func(rel string)
	walk = func(rel string) {
		ents, err := os.ReadDir(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			key := e.Name()
			if rel != "" {
				key = rel + "/" + e.Name()
			}
			switch {
			case e.IsDir():
				walk(key)
			case e.Type().IsRegular():
				if rel == "" && (key == "bundle.lock.json" || key == "receipts.ndjson") {
					continue
				}
				b, err := os.ReadFile(filepath.Join(root, key))
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, rec{key, sha256.Sum256(b)})
			}
		}
	}
	walk("")
	if len(recs) == 0 {
		h := sha3.NewLegacyKeccak256()
		h.Write([]byte("stratum/empty-bundle"))
		return Digest(h.Sum(nil))
	}
	sort.Slice(recs, func(i, j int) bool {
		a, b := utf16.Encode([]rune(recs[i].key)), utf16.Encode([]rune(recs[j].key))
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return len(a) < len(b)
	})
	outer := sha3.NewLegacyKeccak256()
	for _, r := range recs {
		h := sha3.NewLegacyKeccak256()
		h.Write([]byte(r.key))
		h.Write([]byte{0})
		h.Write(r.sum[:])
		outer.Write(h.Sum(nil))
	}
	return Digest(outer.Sum(nil))
}

// names mixes plain, hidden, excluded, non-ASCII and non-BMP names; the
// last ones make UTF-16 order differ from byte order.
var names = []string{
	"a", "b", "a.md", "a-b", "A", "z", ".hidden", "x y", "bundle.lock.json", "receipts.ndjson",
	"ü.md", "日本", "\U0001F600", "\uFF5E", "\uE000x", "\U00010437.md", "\uFFFD", "skills", "patterns",
}

type treeGen struct {
	t    testing.TB
	r    *rand.Rand
	root string
}

func (g *treeGen) name() string { return names[g.r.IntN(len(names))] }

func (g *treeGen) content() []byte {
	n := 0
	switch g.r.IntN(20) {
	case 0, 1: // empty
	case 2:
		n = bufSize + g.r.IntN(3000) // crosses the read buffer
	default:
		n = g.r.IntN(5000)
	}
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], g.r.Uint64())
	}
	return b[:n]
}

// fill populates dir (relative) with random entries.
func (g *treeGen) fill(rel string, depth int) {
	n := g.r.IntN(6)
	for range n {
		name := g.name()
		p := filepath.Join(g.root, rel, name)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		switch k := g.r.IntN(10); {
		case k < 5:
			if err := os.WriteFile(p, g.content(), 0o644); err != nil {
				g.t.Fatal(err)
			}
		case k < 8 && depth < 3:
			if err := os.Mkdir(p, 0o755); err != nil {
				g.t.Fatal(err)
			}
			g.fill(filepath.Join(rel, name), depth+1)
		case k == 8:
			// symlinks to a file, a directory, or nowhere: skipped
			target := []string{"/etc/hostname", g.root, "missing"}[g.r.IntN(3)]
			if err := os.Symlink(target, p); err != nil {
				g.t.Fatal(err)
			}
		default:
			if err := mkfifo(p); err != nil {
				g.t.Fatal(err)
			}
		}
	}
}

func TestDirMatchesNaive(t *testing.T) {
	ctx := t.Context()
	for seed := range uint64(25) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := &treeGen{t: t, r: rand.New(rand.NewPCG(seed, 7)), root: t.TempDir()}
			g.fill("", 0)
			// Always include the names whose UTF-16 order differs.
			writeFile(t, g.root, "k/\U0001F600", "smile")
			writeFile(t, g.root, "k/\uFF5E", "tilde")
			os.MkdirAll(filepath.Join(g.root, "emptydir/nested"), 0o755)
			want := naiveDir(t, g.root)
			for _, workers := range []int{1, 3} {
				res, err := Dir(ctx, g.root, Options{Workers: workers})
				if err != nil {
					t.Fatal(err)
				}
				if res.Digest != want {
					t.Fatalf("workers=%d: Dir = %s, naive = %s", workers, res.Digest, want)
				}
				if FromFiles(res.Files) != want {
					t.Fatal("FromFiles(Dir.Files) differs")
				}
				if !slices.IsSortedFunc(res.Files, func(a, b File) int { return utf16Compare(a.Path, b.Path) }) {
					t.Fatal("Files not in UTF-16 order")
				}
			}
		})
	}
}

// mutator applies random changes to a tree and reports the paths it
// touched, as a watcher would.
type mutator struct {
	*treeGen
	tick time.Time
}

// existing returns a random existing path (file or dir) or "".
func (m *mutator) existing(wantDir bool) string {
	var all []string
	filepath.WalkDir(m.root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == m.root {
			return nil
		}
		if d.IsDir() == wantDir && (wantDir || d.Type().IsRegular()) {
			rel, _ := filepath.Rel(m.root, p)
			all = append(all, rel)
		}
		return nil
	})
	if len(all) == 0 {
		return ""
	}
	return all[m.r.IntN(len(all))]
}

// touch gives every rewrite a distinct mtime, so a same-size rewrite
// always changes the stat even within one clock tick.
func (m *mutator) touch(p string) {
	m.tick = m.tick.Add(time.Second)
	if err := os.Chtimes(p, m.tick, m.tick); err != nil {
		m.t.Fatal(err)
	}
}

func (m *mutator) step() []string {
	abs := func(rel string) string { return filepath.Join(m.root, rel) }
	switch m.r.IntN(9) {
	case 0: // create a file in an existing dir
		dir := m.existing(true)
		p := filepath.Join(dir, fmt.Sprintf("new%d", m.r.IntN(1000)))
		os.WriteFile(abs(p), m.content(), 0o644)
		return []string{p}
	case 1, 2: // modify a file, same size or not
		f := m.existing(false)
		if f == "" {
			return nil
		}
		b, _ := os.ReadFile(abs(f))
		if m.r.IntN(2) == 0 && len(b) > 0 {
			b[m.r.IntN(len(b))] ^= 0xff
		} else {
			b = m.content()
		}
		os.WriteFile(abs(f), b, 0o644)
		m.touch(abs(f))
		return []string{f}
	case 3: // delete a file
		f := m.existing(false)
		if f == "" {
			return nil
		}
		os.Remove(abs(f))
		return []string{f}
	case 4: // delete a directory
		d := m.existing(true)
		if d == "" {
			return nil
		}
		os.RemoveAll(abs(d))
		return []string{d}
	case 5: // rename a file or directory
		src := m.existing(m.r.IntN(2) == 0)
		if src == "" {
			return nil
		}
		dst := fmt.Sprintf("moved%d", m.r.IntN(1000))
		if err := os.Rename(abs(src), abs(dst)); err != nil {
			return nil
		}
		return []string{src, dst}
	case 6: // new directory with contents
		d := fmt.Sprintf("nd%d", m.r.IntN(1000))
		os.Mkdir(abs(d), 0o755)
		m.fill(d, 1)
		return []string{d}
	case 7: // replace a file with a directory or a symlink
		f := m.existing(false)
		if f == "" {
			return nil
		}
		os.Remove(abs(f))
		if m.r.IntN(2) == 0 {
			os.Symlink("/etc/hostname", abs(f))
		} else {
			os.Mkdir(abs(f), 0o755)
			os.WriteFile(abs(filepath.Join(f, "inner")), m.content(), 0o644)
		}
		return []string{f}
	default: // chmod only: stat changes, the hash does not
		f := m.existing(false)
		if f == "" {
			return nil
		}
		os.Chmod(abs(f), 0o600)
		return []string{f}
	}
}

func TestCacheMatchesDir(t *testing.T) {
	ctx := t.Context()
	// A clock an hour ahead: nothing is racy, so unchanged files are
	// trusted by stat alone and the stat comparison itself is under test.
	defer func(old func() time.Time) { now = old }(now)
	now = func() time.Time { return time.Now().Add(time.Hour) }
	for seed := range uint64(5) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := &treeGen{t: t, r: rand.New(rand.NewPCG(seed, 99)), root: t.TempDir()}
			g.fill("", 0)
			m := &mutator{treeGen: g, tick: time.Unix(1_600_000_000, 0)}
			c := NewCache(g.root, Options{Workers: 2})
			if res, err := c.Update(ctx, []string{}); err != nil || res.Digest != naiveDir(t, g.root) {
				t.Fatalf("first Update: %v", err)
			}
			for round := range 30 {
				var changed []string
				for range 1 + g.r.IntN(3) {
					changed = append(changed, m.step()...)
				}
				// Sometimes name absolute paths, as fsnotify reports them.
				if round%3 == 0 {
					for i := range changed {
						changed[i] = filepath.Join(g.root, changed[i])
					}
				}
				want := naiveDir(t, g.root)
				res, err := c.Update(ctx, changed)
				if err != nil {
					t.Fatal(err)
				}
				if res.Digest != want || c.Digest() != want {
					t.Fatalf("round %d: Update(%q) = %s, want %s", round, changed, res.Digest, want)
				}
				if got := FromFiles(c.Files()); got != want {
					t.Fatalf("round %d: Files() inconsistent", round)
				}
				if round%5 == 4 {
					res, err := c.Rescan(ctx)
					if err != nil || res.Digest != want {
						t.Fatalf("round %d: Rescan = %s, %v; want %s", round, res.Digest, err, want)
					}
					if res.Read != 0 {
						t.Fatalf("round %d: Rescan after Update re-read %d files", round, res.Read)
					}
				}
			}
		})
	}
}

func TestCacheRescanFindsUnnamedChanges(t *testing.T) {
	ctx := t.Context()
	defer func(old func() time.Time) { now = old }(now)
	now = func() time.Time { return time.Now().Add(time.Hour) }
	g := &treeGen{t: t, r: rand.New(rand.NewPCG(1, 2)), root: t.TempDir()}
	g.fill("", 0)
	writeFile(t, g.root, "keep/a", "a")
	c := NewCache(g.root, Options{})
	if _, err := c.Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	m := &mutator{treeGen: g, tick: time.Unix(1_500_000_000, 0)}
	for range 10 {
		m.step()
	}
	res, err := c.Rescan(ctx)
	if err != nil || res.Digest != naiveDir(t, g.root) {
		t.Fatalf("Rescan = %v, %v", res.Digest, err)
	}
	// Nothing changed: a rescan reads nothing.
	res, err = c.Rescan(ctx)
	if err != nil || res.Read != 0 {
		t.Fatalf("idle Rescan read %d files (%v)", res.Read, err)
	}
	// Update with an empty list only recomputes.
	res, err = c.Update(ctx, []string{})
	if err != nil || res.Read != 0 || res.Digest != naiveDir(t, g.root) {
		t.Fatalf("Update([]) = %+v, %v", res, err)
	}
	// The root vanishes: Null.
	os.RemoveAll(g.root)
	res, err = c.Update(ctx, []string{"keep/a"})
	if err != nil || res.Digest != Null || res.Count != 0 {
		t.Fatalf("after removing the root: %+v, %v", res, err)
	}
}

func TestCacheRacy(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	writeFile(t, dir, "f", "aaaa")
	c := NewCache(dir, Options{})
	if _, err := c.Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	// Rewrite with the same size and put the mtime back: within one clock
	// tick the stat can be identical. The entry was read moments after its
	// mtime, so it is racy and is read again although nobody named it.
	fi, _ := os.Stat(filepath.Join(dir, "f"))
	writeFile(t, dir, "f", "bbbb")
	os.Chtimes(filepath.Join(dir, "f"), fi.ModTime(), fi.ModTime())
	res, err := c.Update(ctx, []string{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Read != 1 || res.Digest != naiveDir(t, dir) {
		t.Fatalf("racy entry: read %d, digest %s, want %s", res.Read, res.Digest, naiveDir(t, dir))
	}

	// The window is measured from the start of the read.
	st := fsys.Info{Mtime: time.Now().Add(-3 * time.Second).UnixNano(), Ctime: time.Now().Add(-3 * time.Second).UnixNano()}
	if isRacy(st, time.Now()) {
		t.Error("a file last changed 3 s before the read is not racy")
	}
	st.Ctime = time.Now().UnixNano()
	if !isRacy(st, time.Now()) {
		t.Error("a recent ctime is racy")
	}
}

func TestCachePersist(t *testing.T) {
	ctx := t.Context()
	defer func(old func() time.Time) { now = old }(now)
	now = func() time.Time { return time.Now().Add(time.Hour) }
	dir := t.TempDir()
	writeFile(t, dir, "system.md", systemMD)
	writeFile(t, dir, "skills/reentrancy.md", "old")
	c := NewCache(dir, Options{})
	if _, err := c.Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "skills/reentrancy.md", reentrancy)
	res, err := c.Update(ctx, []string{"skills/reentrancy.md"})
	if err != nil || res.Read != 1 || res.Digest.String() != bundleTwo {
		t.Fatalf("after Update: read %d, %s, %v; want %s after one read", res.Read, res.Digest, err, bundleTwo)
	}

	// Save, Load into a fresh cache, change one file: the first Update
	// re-validates everything by stat and reads only that file.
	var buf strings.Builder
	if err := c.Save(&buf); err != nil {
		t.Fatal(err)
	}
	saved := buf.String()
	c2 := NewCache(dir, Options{})
	if err := c2.Load(strings.NewReader(saved)); err != nil {
		t.Fatal(err)
	}
	if c2.Digest().String() != bundleTwo {
		t.Fatalf("loaded digest %s", c2.Digest())
	}
	writeFile(t, dir, "system.md", "changed")
	res, err = c2.Update(ctx, []string{"unrelated"})
	if err != nil || res.Read != 1 || res.Digest != naiveDir(t, dir) {
		t.Fatalf("after Load: read %d, %s, %v", res.Read, res.Digest, err)
	}

	for i := range []int{0, len(saved) / 2, len(saved) - 1} {
		bad := []byte(saved)
		bad[i] ^= 1
		if err := NewCache(dir, Options{}).Load(strings.NewReader(string(bad))); err == nil {
			t.Errorf("Load accepted a file with byte %d flipped", i)
		}
	}
	if err := NewCache(dir, Options{}).Load(strings.NewReader(saved[:len(saved)-5])); err == nil {
		t.Error("Load accepted a truncated file")
	}
}

func TestCacheUpdateRejectsOutside(t *testing.T) {
	dir := t.TempDir()
	c := NewCache(dir, Options{})
	if _, err := c.Rescan(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../x", "/etc/passwd", filepath.Join(dir, "..", "x")} {
		if _, err := c.Update(t.Context(), []string{p}); err == nil {
			t.Errorf("Update(%q): want error", p)
		}
	}
	if _, err := c.Update(t.Context(), []string{"a/../../x"}); err == nil {
		t.Error("Update(a/../../x): want error")
	}
}
