package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// smallRepo snapshots a small brain into one head pack.
func smallRepo(t *testing.T) *fx {
	t.Helper()
	brain := t.TempDir()
	writeFiles(t, brain, map[string]string{
		"system.md":            "You are a test agent.\n",
		"skills/reentrancy.md": strings.Repeat("look for re-entrant calls\n", 5000), // 130 KB: several chunks? no: one file, chunked
		"notes/":               "",
		"bundle.lock.json":     "{}",
	})
	f := newFx(t, 4<<20)
	f.snap(brain, nil)
	return f
}

// rewriteHead decodes the head pack, lets mod change its header, index and
// objects, and writes it back sealed under the agent's key (as a writer
// holding the key, buggy or hostile, would).
func rewriteHead(t *testing.T, f *fx, mod func(h *Header, ix *PackIndex, data *[]byte)) {
	t.Helper()
	blob := f.store.blob(t, f.head)
	h, ix, err := f.keys.OpenIndex(blob[:HeaderSize], blob[HeaderSize:HeaderSize+f.last.Head.IndexLength])
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Clone(blob[h.DataOffset():])
	mod(&h, ix, &data)
	plain := ix.Encode()
	h.IndexLength, h.DataLength = int64(len(plain)+Overhead), int64(len(data))
	hdr := h.Encode()
	sealed, err := f.keys.sealAAD(append([]byte{}, hdr[:]...), f.keys.indexAAD(hdr[:], nil), plain)
	if err != nil {
		t.Fatal(err)
	}
	f.store.put(t, f.head, append(sealed, data...))
}

// restoreErr restores the head into a fresh directory inside a parent
// that must stay otherwise empty, and returns the error.
func restoreErr(t *testing.T, f *fx) error {
	t.Helper()
	parent := t.TempDir()
	r, err := Open(context.Background(), f.store, f.keys, f.head, ReadOptions{})
	if err == nil {
		_, err = r.Restore(context.Background(), filepath.Join(parent, "restored"), RestoreOptions{})
	}
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if e.Name() != "restored" {
			t.Errorf("restore wrote %s outside its target", e.Name())
		}
	}
	return err
}

func TestHostile(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(t *testing.T, f *fx)
		want    error
		notWant error
		msg     string
	}{
		{"tampered object", func(t *testing.T, f *fx) {
			b := f.store.blob(t, f.head)
			b[len(b)-100] ^= 0x01 // inside the last objects (trees)
			f.store.put(t, f.head, b)
		}, ErrAuth, ErrCorrupt, "does not decrypt"},
		{"tampered chunk", func(t *testing.T, f *fx) {
			rewriteHead(t, f, func(h *Header, ix *PackIndex, data *[]byte) {
				(*data)[ix.Entries[0].Offset+NonceSize+3] ^= 0x80
			})
		}, ErrAuth, ErrCorrupt, "does not decrypt"},
		{"tampered header", func(t *testing.T, f *fx) {
			b := f.store.blob(t, f.head)
			// Swap the key id for the same agent's... no: keep the key id,
			// change a byte the index's associated data covers and the
			// header parser accepts: the data length, with the blob grown
			// to match.
			d := binary.BigEndian.Uint64(b[20:])
			binary.BigEndian.PutUint64(b[20:], d+1)
			f.store.put(t, f.head, append(b, 0))
		}, ErrAuth, ErrCorrupt, "pack index"},
		{"wrong object id", func(t *testing.T, f *fx) {
			rewriteHead(t, f, func(h *Header, ix *PackIndex, data *[]byte) {
				// The lock's chunk is listed (and referenced) under another
				// id: it decrypts, but does not hash to that id.
				c, err := DecodeCommit(ix.Commit)
				if err != nil {
					t.Fatal(err)
				}
				bogus := ID{0xaa, 0xbb}
				for i, e := range ix.Entries {
					if e.Type == TypeChunk && e.ID == c.Lock.Chunks[0] {
						ix.Entries[i].ID = bogus
					}
				}
				c.Lock.Chunks[0], c.Lock.SHA256 = bogus, bogus
				if ix.Commit, err = c.Encode(); err != nil {
					t.Fatal(err)
				}
			})
		}, ErrCorrupt, ErrAuth, "does not hash to its id"},
		{"index points outside the pack", func(t *testing.T, f *fx) {
			rewriteHead(t, f, func(h *Header, ix *PackIndex, data *[]byte) {
				ix.Entries[len(ix.Entries)-1].Length += 1000
			})
		}, ErrCorrupt, ErrAuth, "runs past the data"},
		{"overlapping objects", func(t *testing.T, f *fx) {
			rewriteHead(t, f, func(h *Header, ix *PackIndex, data *[]byte) {
				ix.Entries[1].Offset -= 10
			})
		}, ErrCorrupt, ErrAuth, "must tile"},
		{"oversized length", func(t *testing.T, f *fx) {
			rewriteHead(t, f, func(h *Header, ix *PackIndex, data *[]byte) {
				e := &ix.Entries[len(ix.Entries)-1]
				e.Type, e.Length = TypeChunk, MaxChunkLen+Overhead+1
				*data = append(*data, make([]byte, MaxChunkLen)...)
			})
		}, ErrCorrupt, ErrAuth, "out of range"},
		{"missing object", func(t *testing.T, f *fx) {
			rewriteHead(t, f, func(h *Header, ix *PackIndex, data *[]byte) {
				e := ix.Entries[0] // the first chunk
				*data = (*data)[e.Length:]
				ix.Entries = ix.Entries[1:]
				for i := range ix.Entries {
					ix.Entries[i].Offset -= e.Length
				}
			})
		}, ErrCorrupt, ErrAuth, "not in any live pack"},
		{"truncated pack", func(t *testing.T, f *fx) {
			b := f.store.blob(t, f.head)
			f.store.put(t, f.head, b[:len(b)-1])
		}, ErrCorrupt, ErrAuth, "truncated"},
		{"trailing data", func(t *testing.T, f *fx) {
			f.store.put(t, f.head, append(f.store.blob(t, f.head), 0))
		}, ErrCorrupt, ErrAuth, "trailing"},
		{"truncated to its header", func(t *testing.T, f *fx) {
			f.store.put(t, f.head, f.store.blob(t, f.head)[:HeaderSize-1])
		}, nil, nil, ""},
		{"not a pack", func(t *testing.T, f *fx) {
			b := f.store.blob(t, f.head)
			b[4] = 0x02
			f.store.put(t, f.head, b)
		}, ErrNotPack, ErrAuth, "version"},
		{"commit of another agent", func(t *testing.T, f *fx) {
			other := testKeys(t, "other.hermes.eth")
			f.keys = other
		}, ErrWrongAgent, ErrCorrupt, "not this agent's snapshot"},
		{"right key id, wrong identity", func(t *testing.T, f *fx) {
			k, err := NewKeys(DeriveAgentKey(testMaster, testIdentity), "impostor.eth")
			if err != nil {
				t.Fatal(err)
			}
			f.keys = k
		}, ErrAuth, ErrWrongAgent, "wrong identity"},
		{"file size lies", func(t *testing.T, f *fx) {
			rewriteTree(t, f, func(tr *Tree) { tr.Entries[len(tr.Entries)-1].Size++ })
		}, ErrCorrupt, ErrAuth, ""},
		{"empty file's SHA-256 lies", func(t *testing.T, f *fx) {
			// The commit's bundle hash and totals agree with the lying
			// tree: only the plan's own check can refuse it.
			rewriteTreeAndSums(t, f, func(tr *Tree) {
				tr.Entries = append(tr.Entries, Entry{Name: "zz-empty", Type: EntryFile, Mode: 0o644, SHA256: ID{1}})
			})
		}, ErrCorrupt, ErrAuth, "an empty file whose SHA-256"},
		{"bundle hash lies", func(t *testing.T, f *fx) {
			rewriteTree(t, f, func(tr *Tree) { tr.Entries[len(tr.Entries)-1].SHA256[0] ^= 1 })
		}, ErrCorrupt, ErrAuth, "the trees hash to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := smallRepo(t)
			tt.mod(t, f)
			err := restoreErr(t, f)
			if err == nil {
				t.Fatal("restore succeeded")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			if tt.notWant != nil && errors.Is(err, tt.notWant) {
				t.Errorf("got %v, which also matches %v", err, tt.notWant)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
		})
	}
}

// rewriteTree replaces the root tree with a modified copy (sealed under
// the key, so it authenticates) and points a new commit at it.
func rewriteTree(t *testing.T, f *fx, mod func(*Tree)) {
	t.Helper()
	rewriteTreeCommit(t, f, mod, false)
}

func rewriteTreeCommit(t *testing.T, f *fx, mod func(*Tree), sums bool) {
	t.Helper()
	rewriteHead(t, f, func(h *Header, ix *PackIndex, data *[]byte) {
		c, err := DecodeCommit(ix.Commit)
		if err != nil {
			t.Fatal(err)
		}
		root := *f.last.Trees[c.Root]
		root.Entries = append([]Entry(nil), root.Entries...)
		mod(&root)
		plain, err := root.Encode()
		if err != nil {
			t.Fatal(err)
		}
		id := ID(sha256.Sum256(plain))
		sealed, err := f.keys.sealTo(nil, TypeTree, plain)
		if err != nil {
			t.Fatal(err)
		}
		ix.Entries = append(ix.Entries, IndexEntry{Type: TypeTree, ID: id, Offset: int64(len(*data)), Length: int64(len(sealed))})
		*data = append(*data, sealed...)
		c.Root = id
		if sums {
			trees := TreeMap{id: &root}
			for tid, tr := range f.last.Trees {
				trees[tid] = tr
			}
			s, err := Summarize(context.Background(), trees, id)
			if err != nil {
				t.Fatal(err)
			}
			c.BundleHash, c.Files, c.Bytes = s.BundleHash, s.Files, s.Bytes
		}
		if ix.Commit, err = c.Encode(); err != nil {
			t.Fatal(err)
		}
	})
}

// rewriteTreeAndSums is rewriteTree with the commit's bundle hash and
// totals recomputed from the modified trees.
func rewriteTreeAndSums(t *testing.T, f *fx, mod func(*Tree)) {
	t.Helper()
	rewriteTreeCommit(t, f, mod, true)
}

// TestHostileListedPack damages a pack the commit lists (not the head).
func TestHostileListedPack(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(b []byte) []byte
		want error
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-10] }, ErrCorrupt},
		{"tampered index", func(b []byte) []byte { b[HeaderSize+40] ^= 1; return b }, ErrAuth},
		{"head flag flipped", func(b []byte) []byte { b[5] ^= flagHead; return b }, ErrAuth},
		{"other key id", func(b []byte) []byte { b[9] ^= 1; return b }, ErrWrongAgent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			brain := richBrain(t)
			f := newFx(t, MinPackSize)
			res := f.snap(brain, nil)
			id := res.Commit.Packs[0].BlobID
			f.store.put(t, id, tt.mod(f.store.blob(t, id)))
			_, err := Open(context.Background(), f.store, f.keys, f.head, ReadOptions{})
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), id) {
				t.Errorf("got %v, want %v naming %s", err, tt.want, id)
			}
		})
	}
}

// cycleSource serves a tree that contains itself (impossible with verified
// ids; the walk refuses it anyway).
type cycleSource struct{ id ID }

func (c cycleSource) Tree(_ context.Context, id ID) (*Tree, error) {
	return &Tree{Entries: []Entry{DirEntry("loop", 0o755, c.id)}}, nil
}

func TestTreeCycleAndDepth(t *testing.T) {
	id := ID{1}
	err := Walk(context.Background(), cycleSource{id}, id, func(string, *Entry) error { return nil })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle: got %v", err)
	}
	// A chain deeper than MaxDepth of distinct trees.
	m := TreeMap{}
	next := ID{}
	for i := range MaxDepth + 2 {
		tr := &Tree{}
		if i > 0 {
			tr.Entries = []Entry{DirEntry("d", 0, next)}
		}
		tid, err := tr.ID()
		if err != nil {
			t.Fatal(err)
		}
		m[tid], next = tr, tid
	}
	err = Walk(context.Background(), m, next, func(string, *Entry) error { return nil })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "deeper") {
		t.Errorf("depth: got %v", err)
	}
}

func TestDecodeTreeRejects(t *testing.T) {
	// Revision 1 entries (no time) and revision 2 (a time: 8 more bytes
	// before the size).
	for _, rev := range []struct {
		name  string
		mtime int64
		skip  int
	}{{"rev1", 0, 0}, {"rev2", 1700000000123456789, 8}} {
		t.Run(rev.name, func(t *testing.T) { decodeRejects(t, rev.mtime, rev.skip) })
	}
}

func decodeRejects(t *testing.T, mtime int64, skip int) {
	good := func() *Tree {
		d := DirEntry("b", 0o755, ID{2})
		d.Mtime, d.Untimed = mtime, skip == 0
		return &Tree{Entries: []Entry{
			{Name: "a", Type: EntryFile, Mode: 0o644, Mtime: mtime, Untimed: skip == 0, Size: 1, SHA256: [32]byte{1}, Chunks: []ID{{1}}},
			d,
		}}
	}
	enc := func(tr *Tree) []byte {
		b, err := tr.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	base := enc(good())
	if _, err := DecodeTree(base); err != nil {
		t.Fatal(err)
	}
	// Raw edits an encoder would refuse to produce.
	rename := func(name string) []byte {
		b := bytes.Clone(base)
		copy(b[6:7], name) // the first entry's one-byte name
		return b
	}
	cases := map[string][]byte{
		"empty":           nil,
		"count too large": append([]byte{0xff, 0xff, 0xff, 0xff}, base[4:]...),
		"trailing":        append(bytes.Clone(base), 0),
		"truncated":       base[:len(base)-1],
		"name ..":         append([]byte{0, 0, 0, 1, 0, 2, '.', '.', 2, 0, 0}, make([]byte, 32)...),
		"name with slash": rename("/"),
		"name with nul":   rename("\x00"),
		"name backslash":  rename("\\"),
		"out of order":    rename("c"),
		"duplicate":       rename("b"),
		"invalid utf-8":   rename("\xff"),
		"mode bits":       func() []byte { b := bytes.Clone(base); b[8] = 0x10; return b }(),
		"unknown type":    func() []byte { b := bytes.Clone(base); b[7] = 9; return b }(),
		"size without chunks": func() []byte {
			b := bytes.Clone(base)
			binary.BigEndian.PutUint32(b[10+skip+8+32:], 0)
			return b
		}(),
		// One entry of the other revision: a tree is one or the other.
		"mixed revisions": func() []byte {
			b := bytes.Clone(base)
			if skip == 0 {
				b[7] = codeFile // now reads 8 bytes of time the entry lacks
			} else {
				b[7] = codeFile1
			}
			return b
		}(),
	}
	if skip == 0 {
		// Special bits need a revision 2 entry.
		cases["special bits in rev1"] = func() []byte { b := bytes.Clone(base); b[8] = 0x08; return b }()
	}
	for name, b := range cases {
		if _, err := DecodeTree(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
}

// TestHostileLinks: a hard link entry must name a file (not a link, not a
// directory) that the walk meets before it, with its own size and
// SHA-256; anything else fails the restore before a byte is written
// outside, and a good one restores as a link.
func TestHostileLinks(t *testing.T) {
	sys := func(tr *Tree) *Entry { return tr.Find("system.md") }
	link := func(name, target string, size int64, sum [32]byte) Entry {
		return Entry{Name: name, Type: EntryFile, Size: size, SHA256: sum, Link: target}
	}
	insert := func(tr *Tree, es ...Entry) {
		tr.Entries = append(tr.Entries, es...)
		slices.SortFunc(tr.Entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	}
	for _, tt := range []struct {
		name string
		mod  func(tr *Tree)
		msg  string // "" for a good one
	}{
		{"good", func(tr *Tree) { s := sys(tr); insert(tr, link("zz", "system.md", s.Size, s.SHA256)) }, ""},
		{"missing target", func(tr *Tree) { s := sys(tr); insert(tr, link("zz", "nothing.md", s.Size, s.SHA256)) }, "not in the snapshot"},
		{"directory target", func(tr *Tree) { s := sys(tr); insert(tr, link("zz", "skills", s.Size, s.SHA256)) }, "not a file"},
		{"target a link", func(tr *Tree) {
			s := sys(tr)
			insert(tr, link("zy", "system.md", s.Size, s.SHA256), link("zz", "zy", s.Size, s.SHA256))
		}, "not a file"},
		{"other content", func(tr *Tree) { s := sys(tr); insert(tr, link("zz", "system.md", s.Size, [32]byte{1})) }, "content is another"},
		{"other size", func(tr *Tree) { s := sys(tr); insert(tr, link("zz", "system.md", s.Size+1, s.SHA256)) }, "content is another"},
		{"target later", func(tr *Tree) { s := sys(tr); insert(tr, link("aa", "system.md", s.Size, s.SHA256)) }, "comes after it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := smallRepo(t)
			rewriteTreeAndSums(t, f, tt.mod)
			err := restoreErr(t, f)
			switch {
			case tt.msg == "" && err != nil:
				t.Fatal(err)
			case tt.msg != "" && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.msg)):
				t.Fatalf("err = %v, want ErrCorrupt saying %q", err, tt.msg)
			}
		})
	}
}

// TestDecodeTreeRejectsLinkTargets: a link's target is a path within the
// name policy, checked when the tree is decoded (an encoder refuses to
// write one outside it).
func TestDecodeTreeRejectsLinkTargets(t *testing.T) {
	abc := sha256.Sum256([]byte("abc"))
	tr := &Tree{Entries: []Entry{
		{Name: "a", Type: EntryFile, Mode: 0o644, Size: 3, SHA256: abc, Chunks: []ID{abc}},
		{Name: "b", Type: EntryFile, Size: 3, SHA256: abc, Link: "x/a"},
	}}
	base, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeTree(base); err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(base, []byte("x/a"))
	for name, target := range map[string]string{"dot-dot": "../", "absolute": "/x/", "empty name": "x//", "backslash": `x\a`, "nul": "x\x00a", "dot": "./a"} {
		b := bytes.Clone(base)
		copy(b[at:], target[:3])
		if _, err := DecodeTree(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s (%q): %v", name, b[at:at+3], err)
		}
	}
	// A mode on a link, a link with chunks: refused by both sides.
	b := bytes.Clone(base)
	i := bytes.LastIndexByte(b[:at], codeLink)
	b[i+2] = 0o44
	if _, err := DecodeTree(b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("link with a mode: %v", err)
	}
	tr.Entries[1].Chunks = []ID{abc}
	if _, err := tr.Encode(); err == nil {
		t.Error("a link with chunks encodes")
	}
}

// TestHostileSwappedChunks: an aggregator holds no key, but it can answer
// a range read with another object of the same agent's, of the same
// length: that decrypts. Here two chunks of one file trade places in the
// pack (the file is 2 MiB of one byte then 2 MiB of another, so its chunks
// are two pairs of equal length and distinct content). The chunks of a
// file of several chunks are checked by the file's SHA-256, not each by
// its id (fetchOpts.hashed): the restore and the check must still refuse.
func TestHostileSwappedChunks(t *testing.T) {
	brain := t.TempDir()
	content := append(bytes.Repeat([]byte{'a'}, 2<<20), bytes.Repeat([]byte{'b'}, 2<<20)...)
	writeFiles(t, brain, map[string]string{"memory.db": string(content), "system.md": "x\n"})
	f := newFx(t, 16<<20)
	f.snap(brain, nil)

	blob := f.store.blob(t, f.head)
	h, ix, err := f.keys.OpenIndex(blob[:HeaderSize], blob[HeaderSize:HeaderSize+f.last.Head.IndexLength])
	if err != nil {
		t.Fatal(err)
	}
	// Two chunk objects of one length with different ids.
	var a, b *IndexEntry
	for i := range ix.Entries {
		e := &ix.Entries[i]
		if e.Type != TypeChunk || e.Length < MinChunk {
			continue
		}
		for j := range ix.Entries[:i] {
			if o := &ix.Entries[j]; o.Type == TypeChunk && o.Length == e.Length && o.ID != e.ID {
				a, b = o, e
			}
		}
	}
	if a == nil {
		t.Fatalf("no two chunks of one length in %d entries", len(ix.Entries))
	}
	data := blob[h.DataOffset():]
	ca := bytes.Clone(data[a.Offset : a.Offset+a.Length])
	copy(data[a.Offset:], data[b.Offset:b.Offset+b.Length])
	copy(data[b.Offset:], ca)
	f.store.put(t, f.head, blob)

	err = restoreErr(t, f)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "memory.db does not hash to its recorded SHA-256") {
		t.Fatalf("restore: %v, want the file's SHA-256 refused", err)
	}
	if _, err := f.open().Check(context.Background(), true); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "memory.db") {
		t.Fatalf("check: %v, want memory.db refused", err)
	}
	// The check without the data reads no chunk: it passes.
	if _, err := f.open().Check(context.Background(), false); err != nil {
		t.Fatalf("check without the data: %v", err)
	}
}
