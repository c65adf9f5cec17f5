package repo

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestHostileSharedTrees: trees are content-addressed, so one tree may be
// the subtree of many directories. A writer holding the key chains 60
// trees, each naming the next twice: a walk of them would visit 2^60
// directories. Every walk of the commit's trees (restore, the reader's
// walk, a diff against a sane commit, the bundle hash's verification)
// stops with an error that says so, writing nothing: at DirBound
// directories when the chain ends in an empty directory, at the commit's
// own files when it ends in the brain's files.
func TestHostileSharedTrees(t *testing.T) {
	for _, tt := range []struct {
		name   string
		bottom func(c *Commit) ID
		want   []string
	}{
		{"empty directories", func(*Commit) ID { return sealedEmpty }, []string{"directories", "shared by many directories"}},
		{"the brain's files", func(c *Commit) ID { return c.Root }, []string{"more than the 2 files the commit declares"}},
	} {
		t.Run(tt.name, func(t *testing.T) { sharedTrees(t, tt.bottom, tt.want) })
	}
}

// sealedEmpty marks the bottom of the chain as an empty tree, sealed with
// the chain.
var sealedEmpty = ID{0xee}

func sharedTrees(t *testing.T, bottom func(*Commit) ID, want []string) {
	f0 := smallRepo(t)
	saneReader, err := Open(context.Background(), f0.store, f0.keys, f0.head, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := smallRepo(t)
	rewriteHead(t, f, func(h *Header, ix *PackIndex, data *[]byte) {
		c, err := DecodeCommit(ix.Commit)
		if err != nil {
			t.Fatal(err)
		}
		seal := func(tr *Tree) ID {
			plain, err := tr.Encode()
			if err != nil {
				t.Fatal(err)
			}
			id := ID(sha256.Sum256(plain))
			for _, e := range ix.Entries {
				if e.Type == TypeTree && e.ID == id {
					return id // the brain has one already
				}
			}
			sealed, err := f.keys.sealTo(nil, TypeTree, plain)
			if err != nil {
				t.Fatal(err)
			}
			ix.Entries = append(ix.Entries, IndexEntry{Type: TypeTree, ID: id, Offset: int64(len(*data)), Length: int64(len(sealed))})
			*data = append(*data, sealed...)
			return id
		}
		next := bottom(c)
		if next == sealedEmpty {
			next = seal(&Tree{})
		}
		for range 60 {
			next = seal(&Tree{Entries: []Entry{DirEntry("a", 0o755, next), DirEntry("b", 0o755, next)}})
		}
		c.Root = next
		if ix.Commit, err = c.Encode(); err != nil {
			t.Fatal(err)
		}
	})

	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want a corrupt snapshot", what, err)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: got %v, want it to say %q", what, err, w)
			}
		}
	}
	start := time.Now()
	rerr := restoreErr(t, f)
	check("restore", rerr)
	t.Logf("the restore stopped after %s: %v", time.Since(start).Round(time.Millisecond), rerr)
	r, err := Open(context.Background(), f.store, f.keys, f.head, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	check("walk", r.Walk(context.Background(), func(string, *Entry) error { n++; return nil }))
	if limit := DirBound(r.Commit().Files) + r.Commit().Files; int64(n) > limit {
		t.Errorf("the walk visited %d entries, more than %d", n, limit)
	}
	check("diff", Diff(context.Background(), saneReader, saneReader.Commit().Root, r, r.Commit().Root,
		func(Change) error { return nil }))
	_, err = Summarize(context.Background(), r, r.Commit().Root)
	check("summarize", err)
}

// A writer refuses a brain its readers would refuse to walk.
func TestCheckCounts(t *testing.T) {
	for _, tt := range []struct {
		files, dirs int64
		ok          bool
	}{
		{0, 0, true},
		{0, dirAllowance - 1, true},
		{0, dirAllowance, false},
		{10, dirAllowance + 9, true},
		{10, dirAllowance + 10, false},
		{MaxFiles, 0, true},
		{MaxFiles + 1, 0, false},
	} {
		err := checkCounts(tt.files, tt.dirs)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrTooLarge)) {
			t.Errorf("%d files, %d directories: %v", tt.files, tt.dirs, err)
		}
	}
}
