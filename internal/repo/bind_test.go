package repo

import (
	"errors"
	"testing"

	"github.com/hermesd/hermesd/internal/headref"
)

// TestOpenRefBinds serves an agent's older head under its newer head's
// id (the replay of docs/format-v3.md §14): every other check passes —
// the older head is genuine — but a reference bound to the newer commit
// refuses it with headref.ErrMismatch, in OpenRef and ReadCommitRef, and
// reads no pack beyond the head's header and index. A bare reference,
// or one bound to the commit served, reads it.
func TestOpenRefBinds(t *testing.T) {
	f := newFx(t, MinPackSize)
	brain := t.TempDir()
	writeFiles(t, brain, map[string]string{"system.md": "old\n"})
	older := f.snap(brain, nil)
	writeFiles(t, brain, map[string]string{"system.md": "new\n", "notes.md": "more"})
	newer := f.snap(brain, nil)
	newRef := headref.Bind(newer.Head.BlobID, headref.Digest(newer.CommitID))

	// Genuine: the reference opens the head it names.
	r, err := OpenRef(t.Context(), f.store, f.keys, newRef, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.CommitID() != newer.CommitID || r.Ref() != newRef || r.Ref().String() != newRef.String() {
		t.Fatalf("opened commit %x (ref %s), want %x", r.CommitID(), r.Ref(), newer.CommitID)
	}

	// The aggregator answers the newer id with the older head's bytes.
	f.store.put(t, newer.Head.BlobID, f.store.blob(t, older.Head.BlobID))
	reads := f.store.reads
	_, err = OpenRef(t.Context(), f.store, f.keys, newRef, ReadOptions{})
	if !errors.Is(err, headref.ErrMismatch) {
		t.Fatalf("OpenRef of a replayed head: %v, want ErrMismatch", err)
	}
	if n := f.store.reads - reads; n != 2 {
		t.Errorf("%d range reads, want 2 (the header, the index)", n)
	}
	if _, err := ReadCommitRef(t.Context(), f.store, f.keys, newRef); !errors.Is(err, headref.ErrMismatch) {
		t.Fatalf("ReadCommitRef of a replayed head: %v, want ErrMismatch", err)
	}
	t.Log(err)

	// Without the digest nothing tells: the older brain reads.
	r, err = OpenRef(t.Context(), f.store, f.keys, headref.Bare(newer.Head.BlobID), ReadOptions{})
	if err != nil || r.CommitID() != older.CommitID || r.Commit().BundleHash != older.Commit.BundleHash {
		t.Fatalf("bare reference: %v", err)
	}
	// Bound to what is served, it reads too (the digest is the commit's).
	if _, err := OpenRef(t.Context(), f.store, f.keys, headref.Bind(newer.Head.BlobID, headref.Digest(older.CommitID)), ReadOptions{}); err != nil {
		t.Fatal(err)
	}
}
