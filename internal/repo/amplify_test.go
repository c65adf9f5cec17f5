package repo

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Amplification with a valid key: a seller handing an
// agent over holds its key, so every commit below authenticates; what
// bounds the buyer's cost is what the commit declares.

// amplify rewrites f's head as a writer holding the key could: the head
// pack gains one chunk (plain), and the root tree gains copies files of
// that one chunk ("zz-copy-NNNNN") and, when n > 0, a file "zz-big" that
// lists it n times. The commit's totals and bundle hash are recomputed
// from the trees, so they declare everything the files hold. bigSum is
// zz-big's recorded SHA-256 (its true one when zero).
func amplify(t *testing.T, f *fx, plain []byte, copies, n int, bigSum ID) {
	t.Helper()
	rewriteHead(t, f, func(h *Header, ix *PackIndex, data *[]byte) {
		c, err := DecodeCommit(ix.Commit)
		if err != nil {
			t.Fatal(err)
		}
		add := func(typ Type, plain []byte) ID {
			id, sealed, err := f.keys.Seal(typ, plain)
			if err != nil {
				t.Fatal(err)
			}
			ix.Entries = append(ix.Entries, IndexEntry{Type: typ, ID: id, Offset: int64(len(*data)), Length: int64(len(sealed))})
			*data = append(*data, sealed...)
			return id
		}
		chunk := add(TypeChunk, plain)
		root := *f.last.Trees[c.Root]
		root.Entries = append([]Entry(nil), root.Entries...)
		if n > 0 {
			if bigSum.IsZero() {
				h := sha256.New()
				for range n {
					h.Write(plain)
				}
				h.Sum(bigSum[:0])
			}
			chunks := make([]ID, n)
			for i := range chunks {
				chunks[i] = chunk
			}
			root.Entries = append(root.Entries, Entry{Name: "zz-big", Type: EntryFile, Mode: 0o644,
				Size: int64(n) * int64(len(plain)), SHA256: bigSum, Chunks: chunks})
		}
		for i := range copies {
			root.Entries = append(root.Entries, Entry{Name: fmt.Sprintf("zz-copy-%05d", i), Type: EntryFile, Mode: 0o644,
				Size: int64(len(plain)), SHA256: chunk, Chunks: []ID{chunk}})
		}
		enc, err := root.Encode()
		if err != nil {
			t.Fatal(err)
		}
		c.Root = add(TypeTree, enc)
		trees := TreeMap{c.Root: &root}
		for id, tr := range f.last.Trees {
			trees[id] = tr
		}
		s, err := Summarize(context.Background(), trees, c.Root)
		if err != nil {
			t.Fatal(err)
		}
		c.BundleHash, c.Files, c.Bytes = s.BundleHash, s.Files, s.Bytes
		if ix.Commit, err = c.Encode(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestAmplifiedChunkRestores: one 16 KiB chunk listed 1,024 times as
// files and 1,024 times in one file writes exactly the 32 MiB the commit
// declares, verified, while the chunk is downloaded once (this is also
// what a brain of identical files looks like, so it must restore); a
// bound below the declared size refuses it before anything is written.
func TestAmplifiedChunkRestores(t *testing.T) {
	f := smallRepo(t)
	plain := randomBytes(14, 16<<10)
	amplify(t, f, plain, 1024, 1024, ID{})
	r := f.open()
	c := r.Commit()
	declared := c.declared()
	if c.Bytes < 32<<20 {
		t.Fatalf("the commit declares %d bytes", c.Bytes)
	}

	parent := t.TempDir()
	_, err := r.Restore(context.Background(), filepath.Join(parent, "bounded"), RestoreOptions{MaxBytes: declared - 1})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a bound of one byte less: %v", err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Fatalf("a refused restore left %v", ents)
	}

	before, _ := r.Downloaded()
	dir := filepath.Join(parent, "restored")
	res, err := r.Restore(context.Background(), dir, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	beside := 0
	for _, f := range []*FileRef{c.Lock, c.Receipts} {
		if f != nil {
			beside++
		}
	}
	if res.Bytes != declared || res.Files != int(c.Files)+beside {
		t.Errorf("restored %d files of %d bytes; the commit declares %d files (+ lock, receipts) of %d bytes", res.Files, res.Bytes, c.Files, declared)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "zz-copy-01023")); string(got) != string(plain) {
		t.Error("a copy differs")
	}
	if fi, err := os.Stat(filepath.Join(dir, "zz-big")); err != nil || fi.Size() != 1024*int64(len(plain)) {
		t.Errorf("zz-big: %v %v", fi, err)
	}
	if down := res.Downloaded - before; down > 1<<20 {
		t.Errorf("downloaded %d bytes to restore %d: the one chunk was fetched more than once", down, declared)
	}
}

// TestHostilePackList: a head listing 5,000 packs behind a small brain
// (5,004 sequential range reads, about a minute) is refused after the two
// reads of the head, before any listed pack is read; so is a head listing
// one pack twice.
func TestHostilePackList(t *testing.T) {
	fake := func(i int) PackRef {
		sum := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		return PackRef{BlobID: base64.RawURLEncoding.EncodeToString(sum[:]), Size: 1 << 20, EndEpoch: 200, IndexLength: 4096}
	}
	for _, tt := range []struct {
		name  string
		packs func(c *Commit) []PackRef
		msg   string
	}{
		{"5,000 packs", func(c *Commit) []PackRef {
			refs := append([]PackRef(nil), c.Packs...)
			for i := range 5000 {
				refs = append(refs, fake(i))
			}
			return refs
		}, "5000 packs for"},
		{"one pack twice", func(c *Commit) []PackRef {
			return []PackRef{fake(1), fake(1)}
		}, "duplicate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := smallRepo(t)
			rewriteHead(t, f, func(h *Header, ix *PackIndex, data *[]byte) {
				c, err := DecodeCommit(ix.Commit)
				if err != nil {
					t.Fatal(err)
				}
				c.Packs = tt.packs(c)
				sortPacks(c.Packs)
				// Encode would refuse it: marshal it as a hostile writer.
				if ix.Commit, err = json.Marshal(c); err != nil {
					t.Fatal(err)
				}
			})
			f.store.mu.Lock()
			f.store.reads = 0
			f.store.mu.Unlock()
			_, err := Open(context.Background(), f.store, f.keys, f.head, ReadOptions{})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v, want ErrCorrupt saying %q", err, tt.msg)
			}
			if f.store.reads != 2 {
				t.Errorf("%d range reads; the head's header and index are 2", f.store.reads)
			}
		})
	}
}

func sortPacks(p []PackRef) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && p[j].BlobID < p[j-1].BlobID; j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

// TestPackBound: the bound grows with what the commit declares, exactly.
func TestPackBound(t *testing.T) {
	c := &Commit{Format: Format, Identity: testIdentity, KeyID: strings.Repeat("ab", KeyIDSize), Root: ID{1},
		Files: 3 << 10, Bytes: 100 << 20, Lock: &FileRef{Mode: 0o644, Size: 1 << 20, SHA256: ID{2}, Chunks: []ID{{2}}}}
	max := int(PackBound(c.Files, c.Bytes+c.Lock.Size))
	if max != packAllowance+3+101 {
		t.Fatalf("bound %d", max)
	}
	for i := range max + 1 {
		sum := sha256.Sum256([]byte(fmt.Sprint(i)))
		c.Packs = append(c.Packs, PackRef{BlobID: base64.RawURLEncoding.EncodeToString(sum[:]), Size: 1 << 20, IndexLength: 4096})
	}
	sortPacks(c.Packs)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d packs for", max+1)) {
		t.Fatalf("one pack over: %v", err)
	}
	c.Packs = c.Packs[:max]
	sortPacks(c.Packs)
	if err := c.Validate(); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
}

// TestDedupedBrainRestores: a brain of many identical files, which a
// deduplicating writer stores once, restores byte for byte.
func TestDedupedBrainRestores(t *testing.T) {
	brain := t.TempDir()
	big := string(randomBytes(3, 200<<10))
	files := map[string]string{"system.md": "You are a test agent.\n"}
	for i := range 300 {
		files[fmt.Sprintf("copies/big-%03d", i)] = big
		files[fmt.Sprintf("copies/small-%03d.md", i)] = "the same note\n"
	}
	writeFiles(t, brain, files)
	f := newFx(t, MinPackSize)
	res := f.snap(brain, nil)
	if res.Commit.Bytes != 300*int64(len(big)+len("the same note\n"))+22 {
		t.Fatalf("the commit declares %d bytes", res.Commit.Bytes)
	}
	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)
}
