package compose

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/quilt"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/walrus"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// TestPatchRanges: ranges of a pack that is a quilt patch come from the
// whole patch, read once however many ranges (and readers at once) ask;
// the patch's size is the total; a range past its end is refused.
func TestPatchRanges(t *testing.T) {
	var patchReads atomic.Int32
	s, c := localWalrus(t, localwalrus.Config{OnRequest: func(ri localwalrus.RequestInfo) {
		if ri.PatchID != "" {
			patchReads.Add(1)
		}
	}})
	b := quilt.New(QuiltStore(c), quilt.Config{MaxBody: 10 << 20})
	t.Cleanup(b.Close)
	pack := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	st, err := Quilter(b).StorePatch(t.Context(), snapshot.PatchRequest{Owner: "a", Size: int64(len(pack)), Epochs: 2,
		Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(pack)), nil }})
	if err != nil {
		t.Fatal(err)
	}
	if !walrus.IsPatchID(st.BlobID) || st.Patches != 1 {
		t.Fatalf("stored %+v", st)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s.Quiesce(ctx)
	before := patchReads.Load() // the batcher's read-back

	store := Store(c)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(i * 1000)
			var got bytes.Buffer
			total, err := store.ReadRange(t.Context(), st.BlobID, off, 100, &got)
			if err != nil || total != int64(len(pack)) || !bytes.Equal(got.Bytes(), pack[off:off+100]) {
				t.Errorf("range at %d: total %d, %v", off, total, err)
			}
		}()
	}
	wg.Wait()
	if _, err := store.ReadRange(t.Context(), st.BlobID, int64(len(pack))-10, 11, io.Discard); !errors.Is(err, walrus.ErrInvalidRange) {
		t.Errorf("a range past the patch's end: %v", err)
	}
	s.Quiesce(ctx)
	if n := patchReads.Load() - before; n != 1 {
		t.Errorf("%d reads of the patch for 9 ranges, want 1", n)
	}
	// The cache is bounded: patches beyond it go, the newest stay.
	pc := newPatchCache()
	for i := range 5 {
		id := string(rune('a' + i))
		pc.get(t.Context(), id, func(context.Context) ([]byte, error) { return make([]byte, patchCacheBytes/3), nil })
	}
	if pc.bytes > patchCacheBytes || len(pc.byID) != 3 || pc.byID["e"] == nil {
		t.Errorf("cache holds %d bytes in %d patches", pc.bytes, len(pc.byID))
	}
	// A failed read is not kept.
	failing := errors.New("no")
	if _, err := pc.get(t.Context(), "x", func(context.Context) ([]byte, error) { return nil, failing }); !errors.Is(err, failing) || pc.byID["x"] != nil {
		t.Errorf("a failed read: %v, kept %v", err, pc.byID["x"] != nil)
	}
}

// TestQuilterSuperseded: a pack that leaves its batch for a newer state
// of its brain fails with snapshot.ErrSuperseded.
func TestQuilterSuperseded(t *testing.T) {
	_, c := localWalrus(t, localwalrus.Config{})
	b := quilt.New(QuiltStore(c), quilt.Config{Window: time.Hour, MaxBody: 10 << 20})
	t.Cleanup(b.Close)
	newer := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := Quilter(b).StorePatch(t.Context(), snapshot.PatchRequest{Owner: "a", Size: 3, Epochs: 1, Newer: newer,
			Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte("abc"))), nil }})
		errc <- err
	}()
	for b.Pending() == 0 {
		time.Sleep(time.Millisecond) // polling a condition
	}
	close(newer)
	if err := <-errc; !errors.Is(err, snapshot.ErrSuperseded) {
		t.Errorf("superseded pack: %v", err)
	}
}

// TestQuilterCharges: an agent's account is charged its share of every
// quilt one of its packs was stored in, from the batcher's result, also
// when the patch then fails its read-back; a pack that left its batch for
// a newer state is charged nothing.
func TestQuilterCharges(t *testing.T) {
	s, c := localWalrus(t, localwalrus.Config{})
	b := quilt.New(QuiltStore(c), quilt.Config{Window: time.Hour, MaxBody: 10 << 20})
	t.Cleanup(b.Close)
	l := ledger.Open(t.TempDir(), ledger.Options{})
	acct := accounts{l: l, log: slog.New(slog.DiscardHandler)}
	store := func(id string, newer <-chan struct{}) chan error {
		q := quilter{b: b, acct: &account{accounts: acct, id: id}}
		data := []byte("the pack of " + id)
		errc := make(chan error, 1)
		go func() {
			_, err := q.StorePatch(t.Context(), snapshot.PatchRequest{Owner: id, Size: int64(len(data)), Epochs: 1, Newer: newer,
				Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }})
			errc <- err
		}()
		return errc
	}
	newer := make(chan struct{})
	gone := store("gone", newer)
	bad := store("bad", nil)
	for b.Pending() < 2 {
		time.Sleep(time.Millisecond) // polling a condition
	}
	close(newer)
	if err := <-gone; !errors.Is(err, snapshot.ErrSuperseded) {
		t.Fatalf("superseded pack: %v", err)
	}
	// The quilt is stored, but no patch of it reads back.
	s.SetFaults(localwalrus.Faults{Rate: 1, Target: localwalrus.RouteAggregator,
		Kinds: []localwalrus.Fault{{Kind: localwalrus.FaultStatus, Status: http.StatusForbidden}}})
	b.Flush()
	if err := <-bad; err == nil {
		t.Fatal("a patch that does not read back was taken")
	}
	if got := l.Total("bad"); got.Patches != 1 || got.FROST == 0 || got.SuiTx != walruscost.SuiTxPerBlob {
		t.Errorf("the pack alone in a stored quilt was charged %+v, want the whole quilt", got)
	}
	if got := l.Total("gone"); got.Patches != 0 || got.FROST != 0 || got.SuiTx != 0 {
		t.Errorf("a pack that left its batch was charged %+v", got)
	}
}

// TestPatchCacheForget: Forget drops every patch kept, and a patch whose
// read was in flight when it was called is returned to its reader but not
// kept (nor does its end disturb what was kept since).
func TestPatchCacheForget(t *testing.T) {
	pc := newPatchCache()
	pc.get(t.Context(), "a", func(context.Context) ([]byte, error) { return []byte("lie"), nil })
	started, release := make(chan struct{}), make(chan struct{})
	got := make(chan []byte, 1)
	go func() {
		b, _ := pc.get(t.Context(), "b", func(context.Context) ([]byte, error) {
			close(started)
			<-release
			return []byte("in flight"), nil
		})
		got <- b
	}()
	<-started
	pc.forget()
	pc.get(t.Context(), "c", func(context.Context) ([]byte, error) { return []byte("after"), nil })
	close(release)
	if b := <-got; string(b) != "in flight" {
		t.Fatalf("the read in flight got %q", b)
	}
	reads := 0
	b, _ := pc.get(t.Context(), "a", func(context.Context) ([]byte, error) { reads++; return []byte("truth"), nil })
	if string(b) != "truth" || reads != 1 {
		t.Fatalf("after Forget: %q (%d reads), want the patch read again", b, reads)
	}
	if pc.byID["b"] != nil || pc.byID["c"] == nil || pc.bytes != int64(len("after")+len("truth")) {
		t.Fatalf("kept %v (%d bytes): want c and a, not the read in flight", pc.order, pc.bytes)
	}
}
