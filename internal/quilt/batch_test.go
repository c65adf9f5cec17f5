package quilt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/quilt"
	"github.com/hermesd/hermesd/internal/wait"
	"github.com/hermesd/hermesd/internal/walrus"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// walrusStore is the quilt.Store of a real Walrus client (compose has the
// daemon's).
type walrusStore struct{ c *walrus.Client }

func (s walrusStore) StoreQuilt(ctx context.Context, parts []quilt.Part, epochs int) (quilt.Stored, error) {
	wp := make([]walrus.QuiltPart, len(parts))
	for i, p := range parts {
		wp[i] = walrus.QuiltPart{Identifier: p.Identifier, Body: p.Body}
	}
	r, err := s.c.StoreQuilt(ctx, wp, walrus.WithEpochs(epochs))
	if err != nil {
		return quilt.Stored{}, err
	}
	st := quilt.Stored{QuiltID: r.BlobID, EndEpoch: uint64(r.EndEpoch), Epoch: uint64(r.RegisteredEpoch), Attempts: r.Attempts,
		Size: r.Size, Charge: r.Charge()}
	for _, p := range r.Patches {
		st.Patches = append(st.Patches, p.PatchID)
	}
	return st, nil
}

func (s walrusStore) Compare(ctx context.Context, id string, open func() (io.ReadCloser, error), size int64) error {
	var got bytes.Buffer
	if _, err := s.c.Read(ctx, id, &got, walrus.WithExpectedSize(size)); err != nil {
		return err
	}
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	want, _ := io.ReadAll(rc)
	if !bytes.Equal(got.Bytes(), want) {
		return walrus.ErrMismatch
	}
	return nil
}

type body struct {
	open func() (io.ReadCloser, error)
	size int64
}

func (b body) Open() (io.ReadCloser, error) { return b.open() }
func (b body) Size() int64                  { return b.size }

type world struct {
	srv    *localwalrus.Server
	client *walrus.Client
	stores atomic.Int32
}

func newWorld(t *testing.T, aggregator func(string) string) *world {
	t.Helper()
	w := &world{}
	var err error
	w.srv, err = localwalrus.New(localwalrus.Config{Dir: t.TempDir(), OnRequest: func(ri localwalrus.RequestInfo) {
		if ri.Route == localwalrus.RoutePublisher && ri.Status == 200 {
			w.stores.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.srv.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.srv.Close() })
	agg := w.srv.URL()
	if aggregator != nil {
		agg = aggregator(agg)
	}
	w.client, err = walrus.New(walrus.Config{Publishers: []string{w.srv.URL()}, Aggregators: []string{agg},
		RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond, RetryMax: 2})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) batcher(t *testing.T, cfg quilt.Config) *quilt.Batcher {
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 10 << 20
	}
	b := quilt.New(walrusStore{w.client}, cfg)
	t.Cleanup(b.Close)
	return b
}

func pack(i int, n int) []byte {
	return bytes.Repeat([]byte{byte(i), byte(i >> 8), 0xa5}, n/3+1)[:n]
}

func request(owner string, data []byte) quilt.Request {
	return quilt.Request{Owner: owner, Epochs: 3, Pack: body{
		open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		size: int64(len(data))}}
}

// putAll puts n packs concurrently and returns their results.
func putAll(t *testing.T, b *quilt.Batcher, n int, size func(i int) int) []quilt.Result {
	t.Helper()
	res := make([]quilt.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = b.Put(t.Context(), request(fmt.Sprint("agent", i), pack(i, size(i))))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	return res
}

func TestBatchOneQuilt(t *testing.T) {
	w := newWorld(t, nil)
	var obs []quilt.Batch
	var mu sync.Mutex
	// A window long enough for every Put to join; the test then flushes,
	// so it waits on the condition, not on the window.
	b := w.batcher(t, quilt.Config{Window: time.Hour, Observe: func(bt quilt.Batch) { mu.Lock(); obs = append(obs, bt); mu.Unlock() }})
	const n = 40
	var res []quilt.Result
	done := make(chan struct{})
	go func() { res = putAll(t, b, n, func(i int) int { return 500 + 37*i }); close(done) }()
	wait.For(t, "all packs to join", func() bool { return b.Pending() == n })
	b.Flush()
	<-done
	if got := w.stores.Load(); got != 1 {
		t.Fatalf("%d quilts stored for %d packs, want 1", got, n)
	}
	seen := map[string]bool{}
	for i, r := range res {
		if r.QuiltID != res[0].QuiltID || r.Patches != n || r.EndEpoch != uint64(w.srv.Epoch()+3) || seen[r.PatchID] {
			t.Errorf("result %d: %+v", i, r)
		}
		seen[r.PatchID] = true
		var got bytes.Buffer
		if _, err := w.client.Read(t.Context(), r.PatchID, &got); err != nil || !bytes.Equal(got.Bytes(), pack(i, 500+37*i)) {
			t.Errorf("patch %d reads back wrong: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(obs) != 1 || obs[0].Patches != n || obs[0].Failed != 0 || obs[0].QuiltID != res[0].QuiltID {
		t.Errorf("observed %+v", obs)
	}
}

func TestBatchWindowAndLimits(t *testing.T) {
	w := newWorld(t, nil)
	// A short window: a lone pack is stored when it ends.
	b := w.batcher(t, quilt.Config{Window: 20 * time.Millisecond})
	r, err := b.Put(t.Context(), request("solo", pack(1, 100)))
	if err != nil || r.Patches != 1 {
		t.Fatalf("lone pack: %+v %v", r, err)
	}
	// Window 0: every pack at once, a quilt of its own.
	w = newWorld(t, nil)
	b = w.batcher(t, quilt.Config{})
	putAll(t, b, 3, func(int) int { return 10 })
	if w.stores.Load() != 3 {
		t.Errorf("window 0: %d quilts for 3 packs", w.stores.Load())
	}
	// Full by count: 12 packs, 5 a quilt.
	w = newWorld(t, nil)
	b = w.batcher(t, quilt.Config{Window: time.Hour, MaxPatches: 5})
	done := make(chan []quilt.Result)
	go func() { done <- putAll(t, b, 12, func(int) int { return 100 }) }()
	wait.For(t, "two full quilts and two packs waiting", func() bool { return w.stores.Load() == 2 && b.Pending() == 2 })
	b.Flush()
	res := <-done
	counts := map[string]int{}
	for _, r := range res {
		counts[r.QuiltID]++
	}
	if len(counts) != 3 || w.stores.Load() != 3 {
		t.Errorf("12 packs, 5 a quilt: %v", counts)
	}
	// Full by body: packs of 1000 bytes, a body cap of 4 KiB: ~3 a quilt.
	w = newWorld(t, nil)
	b = w.batcher(t, quilt.Config{Window: time.Hour, MaxBody: 4 << 10})
	if b.MaxPatch() != 1<<10 {
		t.Fatalf("MaxPatch %d", b.MaxPatch())
	}
	if _, err := b.Put(t.Context(), request("x", pack(0, 1025))); err == nil {
		t.Error("a pack over MaxPatch was taken")
	}
	go func() { done <- putAll(t, b, 7, func(int) int { return 1000 }) }()
	// 1,256 bytes of body each: three fill a quilt, the fourth opens the next.
	wait.For(t, "two full quilts and one pack waiting", func() bool { return w.stores.Load() == 2 && b.Pending() == 1 })
	b.Flush()
	<-done
	if n := w.stores.Load(); n != 3 {
		t.Errorf("7 × 1000 bytes under a 4 KiB body: %d quilts", n)
	}
}

func TestPaddingBudget(t *testing.T) {
	tiny := make([]int64, 600)
	for i := range tiny {
		tiny[i] = 100
	}
	big := int64(4 << 20)
	if pad := quilt.QuiltSize(append(tiny, big)) - 600*100 - big; pad <= quilt.PaddingBudget {
		t.Errorf("600 tiny packs and one of 4 MiB pad %d bytes; want over the budget", pad)
	}
	if pad := quilt.QuiltSize(append(tiny, 2000)) - 600*100 - 2000; pad > quilt.PaddingBudget {
		t.Errorf("similar packs pad %d bytes", pad)
	}
	// The batcher opens a new quilt rather than pad that much.
	w := newWorld(t, nil)
	b := w.batcher(t, quilt.Config{Window: time.Hour, MaxBody: 64 << 20})
	done := make(chan []quilt.Result)
	go func() { done <- putAll(t, b, 600, func(int) int { return 100 }) }()
	wait.For(t, "600 small packs", func() bool { return b.Pending() == 600 })
	bigc := make(chan []quilt.Result)
	go func() { bigc <- putAll(t, b, 1, func(int) int { return 4 << 20 }) }()
	wait.For(t, "the small packs' quilt", func() bool { return w.stores.Load() == 1 && b.Pending() == 1 })
	b.Flush()
	small, large := <-done, <-bigc
	if small[0].QuiltID == large[0].QuiltID || small[0].Patches != 600 || large[0].Patches != 1 {
		t.Errorf("600 small packs and one of 4 MiB: %+v, %+v", small[0], large[0])
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// waitc waits for tk in the background.
func waitc(t *testing.T, tk *quilt.Ticket) chan error {
	errc := make(chan error, 1)
	go func() { _, err := tk.Wait(t.Context()); errc <- err }()
	return errc
}

// add adds a pack, failing the test if it is refused.
func add(t *testing.T, b *quilt.Batcher, owner string, data []byte) *quilt.Ticket {
	t.Helper()
	tk, err := b.Add(request(owner, data))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestSupersede(t *testing.T) {
	w := newWorld(t, nil)
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	b := w.batcher(t, quilt.Config{Window: time.Hour, Now: clock.now})
	// Another agent keeps the batch open.
	other := waitc(t, add(t, b, "other", pack(9, 50)))
	first := add(t, b, "alpha", pack(1, 60))
	if b.Pending() != 2 || !first.Withdraw() {
		t.Fatalf("%d packs wait; alpha's pack did not leave for a newer one", b.Pending())
	}
	if _, err := first.Wait(t.Context()); !errors.Is(err, quilt.ErrSuperseded) {
		t.Fatalf("superseded pack: %v", err)
	}
	if first.Withdraw() {
		t.Error("a pack left its batch twice")
	}
	// Its replacement joins the same batch; with less than half the window
	// left, a newer one no longer replaces it.
	second := add(t, b, "alpha", pack(2, 70))
	clock.add(31 * time.Minute)
	if second.Withdraw() {
		t.Fatal("a pack left its batch with less than half the window left")
	}
	b.Flush()
	if _, err := second.Wait(t.Context()); err != nil {
		t.Fatalf("second pack: %v", err)
	}
	if second.Withdraw() {
		t.Error("a pack left a batch that was stored")
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	if w.stores.Load() != 1 {
		t.Errorf("%d quilts", w.stores.Load())
	}

	// A replacement that missed its batch is firm in the next one.
	clock.add(time.Hour)
	third := add(t, b, "beta", pack(3, 80))
	keep := waitc(t, add(t, b, "gamma", pack(4, 80)))
	if !third.Withdraw() {
		t.Fatal("beta's pack did not leave")
	}
	if _, err := third.Wait(t.Context()); !errors.Is(err, quilt.ErrSuperseded) {
		t.Fatalf("beta superseded: %v", err)
	}
	b.Flush() // the batch goes without beta
	if err := <-keep; err != nil {
		t.Fatal(err)
	}
	fourth := add(t, b, "beta", pack(5, 90))
	if fourth.Withdraw() {
		t.Error("a replacement that missed its batch left the next one")
	}
	b.Flush()
	if _, err := fourth.Wait(t.Context()); err != nil {
		t.Errorf("beta's replacement: %v", err)
	}
}

// TestSupersedeAlone: an agent alone in its batch is replaced in it: the
// batch keeps its deadline, and one quilt holds the newest state only.
func TestSupersedeAlone(t *testing.T) {
	w := newWorld(t, nil)
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	b := w.batcher(t, quilt.Config{Window: time.Hour, Now: clock.now})
	var last *quilt.Ticket
	for i := range 3 {
		last = add(t, b, "solo", pack(i, 100+i))
		if b.Pending() != 1 {
			t.Fatalf("%d packs wait", b.Pending())
		}
		if i < 2 {
			if !last.Withdraw() {
				t.Fatalf("pack %d did not leave", i)
			}
			if _, err := last.Wait(t.Context()); !errors.Is(err, quilt.ErrSuperseded) {
				t.Fatalf("pack %d: %v", i, err)
			}
		}
	}
	b.Flush()
	if _, err := last.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if w.stores.Load() != 1 {
		t.Errorf("%d quilts for one agent's newest state", w.stores.Load())
	}
}

func TestStoreFailsEveryPack(t *testing.T) {
	w := newWorld(t, nil)
	w.srv.SetFaults(localwalrus.Faults{Rate: 1, Target: localwalrus.RoutePublisher,
		Kinds: []localwalrus.Fault{{Kind: localwalrus.FaultStatus, Status: 503, RetryAfter: "0"}}})
	b := w.batcher(t, quilt.Config{Window: time.Hour})
	type out struct {
		res quilt.Result
		err error
	}
	outs := make(chan out, 3)
	for i := range 3 {
		go func() { r, err := b.Put(t.Context(), request(fmt.Sprint(i), pack(i, 10))); outs <- out{r, err} }()
	}
	wait.For(t, "three packs", func() bool { return b.Pending() == 3 })
	b.Flush()
	for range 3 {
		o := <-outs
		if o.err == nil || walrus.Attempts(o.err) != 3 {
			t.Errorf("a pack of a quilt that could not be stored: %v", o.err)
		}
		if o.res.Charge != (walruscost.Charge{}) {
			t.Errorf("a quilt that was not stored charged a pack %+v", o.res.Charge)
		}
	}
}

// altering puts a proxy in front of the aggregator that changes one byte
// of any answer whose body is altered (a patch read back).
func altering(t *testing.T, altered []byte) func(string) string {
	return func(agg string) string {
		u, _ := url.Parse(agg)
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.ModifyResponse = func(resp *http.Response) error {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if bytes.Equal(b, altered) {
				b = bytes.Clone(b)
				b[len(b)/2] ^= 1
			}
			resp.Body = io.NopCloser(bytes.NewReader(b))
			return nil
		}
		srv := httptest.NewServer(rp)
		t.Cleanup(srv.Close)
		return srv.URL
	}
}

// TestReadBackDiffers: an aggregator that changes one patch's bytes fails
// that pack alone, before any caller has a patch id (but with its share
// of the quilt's charge).
func TestReadBackDiffers(t *testing.T) {
	altered := pack(1, 101)
	w := newWorld(t, altering(t, altered))
	b := w.batcher(t, quilt.Config{Window: time.Hour})
	res := make([]quilt.Result, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = b.Put(t.Context(), request(fmt.Sprint("agent", i), pack(i, 100+i)))
		}()
	}
	wait.For(t, "three packs", func() bool { return b.Pending() == 3 })
	b.Flush()
	wg.Wait()
	for i := range 3 {
		if i == 1 {
			// Its quilt was stored: the result still carries its share.
			if !errors.Is(errs[i], walrus.ErrMismatch) || res[i].PatchID != "" || !res[i].Charge.Patch {
				t.Errorf("the altered patch: %+v %v", res[i], errs[i])
			}
		} else if errs[i] != nil {
			t.Errorf("pack %d: %v", i, errs[i])
		}
	}
}

func TestCancelAndClose(t *testing.T) {
	w := newWorld(t, nil)
	b := quilt.New(walrusStore{w.client}, quilt.Config{Window: time.Hour, MaxBody: 1 << 20})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { _, err := b.Put(ctx, request("a", pack(1, 10))); errc <- err }()
	wait.For(t, "the pack", func() bool { return b.Pending() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if b.Pending() != 0 {
		t.Errorf("%d packs still wait", b.Pending())
	}
	go func() { _, err := b.Put(t.Context(), request("b", pack(2, 10))); errc <- err }()
	wait.For(t, "the pack", func() bool { return b.Pending() == 1 })
	b.Close()
	if err := <-errc; !errors.Is(err, quilt.ErrClosed) {
		t.Errorf("closed: %v", err)
	}
	if _, err := b.Put(t.Context(), request("c", pack(3, 10))); !errors.Is(err, quilt.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if w.stores.Load() != 0 {
		t.Errorf("%d quilts stored", w.stores.Load())
	}
}

// TestChargeShared: a stored quilt's charge, as the publisher answered
// it, is shared among the packs in it by their bytes, exactly, each
// share in its pack's result: a pack whose read-back then fails pays its
// share all the same, a pack that left its batch for a newer one pays
// nothing.
func TestChargeShared(t *testing.T) {
	altered := pack(2, 3000)
	w := newWorld(t, altering(t, altered))
	var (
		mu     sync.Mutex
		shares = map[string][]walruscost.Charge{}
		obs    []quilt.Batch
	)
	b := w.batcher(t, quilt.Config{Window: time.Hour, Observe: func(bt quilt.Batch) { mu.Lock(); obs = append(obs, bt); mu.Unlock() }})
	put := func(owner string, tk *quilt.Ticket) chan error {
		errc := make(chan error, 1)
		go func() {
			r, err := tk.Wait(t.Context())
			mu.Lock()
			if r.Charge != (walruscost.Charge{}) {
				shares[owner] = append(shares[owner], r.Charge)
			}
			mu.Unlock()
			errc <- err
		}()
		return errc
	}
	// In this order (the order of the quilt's parts, and so of the split).
	a := put("a", add(t, b, "a", pack(1, 1000)))
	left := add(t, b, "gone", pack(9, 500))
	gone := put("gone", left)
	if !left.Withdraw() {
		t.Fatal("gone's pack did not leave")
	}
	if err := <-gone; !errors.Is(err, quilt.ErrSuperseded) {
		t.Fatalf("superseded: %v", err)
	}
	bad := put("b", add(t, b, "b", altered))
	c := put("c", add(t, b, "c", pack(3, 6000)))
	b.Flush()
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	if err := <-bad; !errors.Is(err, walrus.ErrMismatch) {
		t.Fatalf("the altered patch: %v", err)
	}
	if err := <-c; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// One quilt of 10,000 bytes of packs laid out in 445,556 bytes:
	// 66,034,000 encoded, 63 units for 3 epochs at the default price.
	q := walruscost.NewBlob(66_034_000, 3, 63*(3*100_000+20_000))
	if len(obs) != 1 || obs[0].Charge != q || obs[0].Size != 445_556 {
		t.Fatalf("observed %+v, want one quilt charged %+v", obs, q)
	}
	want := map[string]walruscost.Charge{
		"a": {New: true, Patch: true, EncodedBytes: 6_603_400, EncodedByteEpochs: 19_810_200, FROST: 2_016_000, SuiTx: 0.2},
		"b": {New: true, Patch: true, EncodedBytes: 19_810_200, EncodedByteEpochs: 59_430_600, FROST: 6_048_000, SuiTx: 0.6},
		"c": {New: true, Patch: true, EncodedBytes: 39_620_400, EncodedByteEpochs: 118_861_200, FROST: 12_096_000, SuiTx: 1.2},
	}
	var sum walruscost.Charge
	for owner, w := range want {
		got := shares[owner]
		if len(got) != 1 || got[0].New != w.New || got[0].Patch != w.Patch || got[0].EncodedBytes != w.EncodedBytes ||
			got[0].EncodedByteEpochs != w.EncodedByteEpochs || got[0].FROST != w.FROST || math.Abs(got[0].SuiTx-w.SuiTx) > 1e-9 {
			t.Errorf("%s was charged %+v, want %+v", owner, got, w)
			continue
		}
		sum.EncodedBytes += got[0].EncodedBytes
		sum.EncodedByteEpochs += got[0].EncodedByteEpochs
		sum.FROST += got[0].FROST
		sum.SuiTx += got[0].SuiTx
	}
	if len(shares["gone"]) != 0 {
		t.Errorf("a pack that left its batch was charged %+v", shares["gone"])
	}
	if sum.EncodedBytes != q.EncodedBytes || sum.EncodedByteEpochs != q.EncodedByteEpochs || sum.FROST != q.FROST || math.Abs(sum.SuiTx-2) > 1e-9 {
		t.Errorf("the shares add up to %+v, the quilt cost %+v", sum, q)
	}
}
