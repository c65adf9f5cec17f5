package snapshot_test

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/quilt"
	"github.com/hermesd/hermesd/internal/redstuff"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/walrus"
)

// quiltAgents are interop agents on one local Walrus server whose small
// packs share one quilt batcher, as a daemon's agents do.
func quiltAgents(t *testing.T, n int) ([]*interopAgent, *quilt.Batcher, *walrus.Client) {
	t.Helper()
	first := newInteropAgent(t)
	c, err := walrus.New(walrus.Config{Publishers: []string{first.srv.URL()}, Aggregators: []string{first.srv.URL()}, MaxBlobSize: repo.MinPackSize})
	if err != nil {
		t.Fatal(err)
	}
	b := quilt.New(compose.QuiltStore(c), quilt.Config{Window: time.Hour, MaxBody: repo.MinPackSize})
	t.Cleanup(b.Close)
	agents := []*interopAgent{first}
	for i := 1; i < n; i++ {
		a := newInteropAgent(t)
		// Every agent on the first one's server.
		a.srv, a.walrus = first.srv, first.walrus
		a.p.Store = compose.Store(c)
		a.p.AgentID = a.p.AgentID + string(rune('a'+i))
		agents = append(agents, a)
	}
	for i, a := range agents {
		a.identity = "quilt" + string(rune('a'+i)) + ".hermes.eth"
		a.p.Identity = a.identity
		a.p.Store = compose.Store(c)
		a.p.Quilts = compose.Quilter(b)
	}
	return agents, b, c
}

// takeAll takes one snapshot of every agent at once, and stores their
// batch whenever every snapshot still running waits in it.
func takeAll(t *testing.T, b *quilt.Batcher, agents []*interopAgent) []snapshot.Result {
	t.Helper()
	res := make([]snapshot.Result, len(agents))
	errs := make([]error, len(agents))
	var running atomic.Int32
	running.Store(int32(len(agents)))
	done := make(chan struct{})
	for i, a := range agents {
		go func() {
			defer func() {
				if running.Add(-1) == 0 {
					close(done)
				}
			}()
			hr, err := hash.Dir(t.Context(), a.brain, hash.Options{})
			if err != nil {
				errs[i] = err
				return
			}
			res[i], errs[i] = a.p.Take(t.Context(), snapshot.Input{Want: hr.Digest, Known: hash.Files(hr.Files)})
		}()
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-done:
			for i, err := range errs {
				if err != nil {
					t.Fatalf("agent %d: %v", i, err)
				}
			}
			return res
		default:
		}
		if n := b.Pending(); n > 0 && n == int(running.Load()) {
			b.Flush()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d snapshots still running, %d packs waiting", running.Load(), b.Pending())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestV3QuiltedSnapshots: the heads of agents snapshotting at once share
// one quilt; large packs stay blobs; every head (a patch id) restores byte
// for byte with hermesd's reader and with the independent one, through
// history too; a patch whose bytes change fails both readers.
func TestV3QuiltedSnapshots(t *testing.T) {
	t.Parallel()
	agents, b, c := quiltAgents(t, 3)
	rng := rand.New(rand.NewPCG(3, 9))
	big := make([]byte, 3<<20) // two full packs of 2 MiB: blobs, not patches
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	for i, a := range agents {
		a.write(t, "system.md", []byte("agent "+string(rune('a'+i))+"\n"), 0o644)
		a.write(t, "skills/s.md", []byte("a skill\n"), 0o600)
	}
	agents[0].write(t, "memory.db", big, 0o600)
	first := takeAll(t, b, agents)
	quiltOf := map[string]bool{}
	for i, r := range first[1:] {
		if !walrus.IsPatchID(r.BlobID) || r.Quilted != 1 {
			t.Fatalf("agent %d: head %s, %d packs quilted: want its head a patch", i+1, r.BlobID, r.Quilted)
		}
		q, err := walrus.PatchQuilt(r.BlobID)
		if err != nil {
			t.Fatal(err)
		}
		quiltOf[q] = true
	}
	if len(quiltOf) != 1 {
		t.Errorf("the small heads of one moment in %d quilts", len(quiltOf))
	}
	if first[0].Packs < 2 {
		t.Fatalf("agent 0 uploaded %d packs; want full packs beside its head", first[0].Packs)
	}
	r, err := agents[0].p.OpenV3(t.Context(), first[0].BlobID)
	if err != nil {
		t.Fatal(err)
	}
	for _, pk := range r.Commit().Packs {
		if walrus.IsPatchID(pk.BlobID) != (pk.Size <= b.MaxPatch()) {
			t.Errorf("listed pack %s of %d bytes: packs over %d bytes are blobs of their own, the others patches", pk.BlobID, pk.Size, b.MaxPatch())
		}
	}

	// A second snapshot: its parent and a listed pack are patches.
	agents[1].write(t, "system.md", []byte("agent b, edited\n"), 0o644)
	agents[1].write(t, "skills/t.md", []byte("another skill\n"), 0o644)
	second := takeAll(t, b, agents[1:2])[0]
	r2, err := agents[1].p.OpenV3(t.Context(), second.BlobID)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Commit().Parent != first[1].BlobID || !slices.ContainsFunc(r2.Commit().Packs, func(p repo.PackRef) bool { return p.BlobID == first[1].BlobID }) {
		t.Errorf("second commit: parent %s, packs %+v; want the first head, a patch, as both", r2.Commit().Parent, r2.Commit().Packs)
	}
	hist, err := agents[1].p.History(t.Context(), second.BlobID, 10)
	if err != nil || len(hist) != 2 || hist[1].BlobID != first[1].BlobID {
		t.Errorf("history of patches: %+v %v", hist, err)
	}

	top := []string{".", "bundle.lock.json", "receipts.ndjson"}
	for i, a := range agents {
		head := first[i].BlobID
		if i == 1 {
			head = second.BlobID
		}
		goOut := filepath.Join(t.TempDir(), "go")
		if _, err := a.p.Restore(t.Context(), head, goOut); err != nil {
			t.Fatalf("agent %d: restore %s: %v", i, head, err)
		}
		sameListing(t, "go restore of a patch head", entriesOf(t, a.brain, top...), entriesOf(t, goOut, top...))
		jsOut := filepath.Join(t.TempDir(), "js")
		s := restoreWithReader(t, a.readerArgs(head, jsOut)...)
		if s.Head != head || s.BundleHash != hashOf(t, a.brain) {
			t.Errorf("agent %d: reader summary %+v", i, s)
		}
		sameListing(t, "independent reader vs go restore", entriesOf(t, goOut), entriesOf(t, jsOut))
	}

	// Tampered bytes inside the quilt fail both readers.
	a := agents[2]
	var pack bytes.Buffer
	if _, err := c.Read(t.Context(), first[2].BlobID, &pack); err != nil {
		t.Fatal(err)
	}
	q, _ := walrus.PatchQuilt(first[2].BlobID)
	file := a.blobFile(t, q)
	whole, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	off := patchByteInQuilt(t, whole, first[2].BlobID, pack.Bytes(), pack.Len()-20) // inside the last object
	flipByte(t, file, off)
	t.Cleanup(func() { flipByte(t, file, off) })
	// Through a fresh store: the pipeline's own keeps patches it read.
	a.p.Store = compose.Store(c)
	if _, err := a.p.Restore(t.Context(), first[2].BlobID, filepath.Join(t.TempDir(), "bad")); !errors.Is(err, repo.ErrAuth) {
		t.Errorf("go restore of a tampered patch: %v", err)
	}
	out := filepath.Join(t.TempDir(), "bad-js")
	got := runReader(t, a.readerArgs(first[2].BlobID, out)...)
	if got.code != 6 || !strings.Contains(got.stderr, "authentication failed") {
		t.Errorf("reader of a tampered patch: %d %q", got.code, got.stderr)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("failed restore left %s", out)
	}
}

// patchByteInQuilt is where byte i of patch (the patch patchID names)
// lies in its quilt blob's bytes whole: QuiltV1 lays a patch down its
// columns, and the blob holds the matrix row by row.
func patchByteInQuilt(t *testing.T, whole []byte, patchID string, patch []byte, i int) int64 {
	t.Helper()
	id, err := redstuff.ParsePatchID(patchID)
	if err != nil {
		t.Fatal(err)
	}
	q, err := redstuff.ReadQuilt(bytes.NewReader(whole), int64(len(whole)), redstuff.DefaultShards)
	if err != nil {
		t.Fatal(err)
	}
	p, s, z := q.Params.Primary, q.Params.Secondary, q.Params.Symbol
	fileAt := func(c, o int) int { return (o/z)*s*z + c*z + o%z } // column c, offset o in it
	var img []byte
	for c := int(id.Start); c < int(id.End); c++ {
		for o := 0; o < p*z; o += z {
			img = append(img, whole[fileAt(c, o):fileAt(c, o)+z]...)
		}
	}
	at := bytes.Index(img, patch)
	if at < 0 {
		t.Fatal("the patch is not in its quilt blob")
	}
	at += i
	return int64(fileAt(int(id.Start)+at/(p*z), at%(p*z)))
}

func hashOf(t *testing.T, dir string) string {
	t.Helper()
	hr, err := hash.Dir(t.Context(), dir, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return hr.Digest.String()
}
