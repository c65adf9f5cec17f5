package compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/walrus"
)

// windowBody is an upload body that maps its bytes in windows, as a
// spooled pack does on Linux; it records the largest window asked for.
type windowBody struct {
	*bytes.Reader
	b       []byte
	largest int64
	failAt  int64 // Window fails from this offset on (0: never)
}

func (w *windowBody) Close() error { return nil }

func (w *windowBody) Window(off, n int64) ([]byte, error) {
	if off < 0 || n <= 0 || off+n > int64(len(w.b)) {
		return nil, fmt.Errorf("window [%d, +%d) outside %d bytes", off, n, len(w.b))
	}
	if w.failAt > 0 && off >= w.failAt {
		return nil, errors.New("cannot map")
	}
	w.largest = max(w.largest, n)
	return w.b[off : off+n], nil
}

// localWalrus runs a local Walrus server for the test and returns it
// with a client of it that retries fast. Its shard count is 100 unless
// the test says otherwise: blob ids at a hundredth of mainnet's cost.
func localWalrus(t testing.TB, cfg localwalrus.Config) (*localwalrus.Server, *walrus.Client) {
	t.Helper()
	cfg.Dir = t.TempDir()
	if cfg.Shards == 0 {
		cfg.Shards = 100
	}
	s, err := localwalrus.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := walrus.New(walrus.Config{Publishers: []string{s.URL()}, Aggregators: []string{s.URL()}, Shards: cfg.Shards,
		RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// TestCompare: the read-back check accepts the blob as stored and refuses
// one that differs anywhere, is shorter or is longer (its id is another),
// whether it compares through a buffer, in mapped windows (several of
// them here), or reads on from where a window could not be mapped.
func TestCompare(t *testing.T) {
	_, c := localWalrus(t, localwalrus.Config{})
	st := Store(c)
	ctx := context.Background()
	stored := make([]byte, 2*compareWindow+12345)
	for i := range stored {
		stored[i] = byte(rand.N(256))
	}
	res, err := st.PutReader(ctx, func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(stored)), nil }, int64(len(stored)), 1)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(stored)
		b[i] ^= 1
		return b
	}
	for _, tc := range []struct {
		name string
		have []byte // what the pack holds
		ok   bool
	}{
		{"same", stored, true},
		{"first byte differs", flip(0), false},
		{"byte in the second window differs", flip(compareWindow + 7), false},
		{"last byte differs", flip(len(stored) - 1), false},
		{"blob longer", stored[:len(stored)-1], false},
		{"blob shorter", append(bytes.Clone(stored), 0), false},
	} {
		for _, mode := range []string{"read", "mapped", "mapped, then read"} {
			mapped := mode != "read"
			t.Run(fmt.Sprintf("%s/%s", tc.name, mode), func(t *testing.T) {
				wb := &windowBody{Reader: bytes.NewReader(tc.have), b: tc.have}
				if mode == "mapped, then read" {
					wb.failAt = compareWindow // the second window cannot be mapped
				}
				open := func() (io.ReadCloser, error) {
					if mapped {
						return wb, nil
					}
					return io.NopCloser(bytes.NewReader(tc.have)), nil
				}
				err := st.Compare(ctx, res.BlobID, open, int64(len(tc.have)))
				switch {
				case tc.ok && err != nil:
					t.Fatalf("the stored blob is refused: %v", err)
				case !tc.ok && !errors.Is(err, walrus.ErrMismatch):
					t.Fatalf("got %v, want a mismatch", err)
				}
				// (Other bytes are refused by their id before any byte is compared.)
				if mapped && tc.ok && (wb.largest == 0 || wb.largest > compareWindow) {
					t.Fatalf("largest window %d bytes (want 1 to %d)", wb.largest, compareWindow)
				}
			})
		}
	}
}

// TestUploadReadBack: the read-back (Compare) refuses the id a publisher
// named for other bytes than it was sent (here it stores others, under
// their true id), and bytes an aggregator substitutes under the right id;
// the right bytes under their id pass.
func TestUploadReadBack(t *testing.T) {
	s, _ := localWalrus(t, localwalrus.Config{Shards: 10})
	ctx := context.Background()
	a, b := bytes.Repeat([]byte("pack a "), 3000), bytes.Repeat([]byte("pack b "), 3000)
	openA := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(a)), nil }
	client := func(publisher, aggregator string) *walrusStore {
		lc, err := walrus.New(walrus.Config{Publishers: []string{publisher}, Aggregators: []string{aggregator}, Shards: 10,
			RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return newStore(lc)
	}
	// A publisher that stores b whatever it is sent.
	swapping := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		req, err := http.NewRequestWithContext(r.Context(), r.Method, s.URL()+r.URL.RequestURI(), bytes.NewReader(b))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(swapping.Close)
	swapped, err := client(swapping.URL, s.URL()).PutReader(ctx, openA, int64(len(a)), 1)
	if err != nil {
		t.Fatalf("pack a stored as b: %v", err)
	}
	if err := client(s.URL(), s.URL()).Compare(ctx, swapped.BlobID, openA, int64(len(a))); !errors.Is(err, walrus.ErrMismatch) {
		t.Fatalf("pack a stored as b, read back: %v, want a mismatch", err)
	}
	st, err := client(s.URL(), s.URL()).PutReader(ctx, openA, int64(len(a)), 1)
	if err != nil {
		t.Fatalf("pack a stored as sent: %v", err)
	}
	serving := func(body []byte) *walrusStore {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
		t.Cleanup(srv.Close)
		return client(s.URL(), srv.URL)
	}
	if err := serving(a).Compare(ctx, st.BlobID, openA, int64(len(a))); err != nil {
		t.Fatalf("pack a under its id, served as stored: %v", err)
	}
	if err := serving(b).Compare(ctx, st.BlobID, openA, int64(len(a))); !errors.Is(err, walrus.ErrMismatch) {
		t.Fatalf("pack a under its id, b served: %v, want a mismatch", err)
	}
}

// BenchmarkCompare is the read-back stage of a first snapshot: per pack,
// the blob read back and compared as it streams.
func BenchmarkCompare(b *testing.B) {
	for _, size := range []int{1 << 20, 10 << 20} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			st, pack := benchStore(b, localwalrus.Faults{}, size)
			open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(pack)), nil }
			res, err := st.PutReader(b.Context(), open, int64(size), 1)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			for b.Loop() {
				if err := st.Compare(b.Context(), res.BlobID, open, int64(size)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUploadChecked is a pack's whole upload as the pipeline makes
// it, at the network's 1000 shards: PutReader (the upload) then Compare
// (the read-back), against a local server whose publisher answers after
// latency, as the network's does after its Sui transactions. The local
// server computes its own id of every upload on the same cores.
func BenchmarkUploadChecked(b *testing.B) {
	for _, size := range []int{20 << 10, 10 << 20} {
		for _, latency := range []time.Duration{0, 500 * time.Millisecond} {
			b.Run(fmt.Sprintf("size=%d/latency=%s", size, latency), func(b *testing.B) {
				st, pack := benchStore(b, localwalrus.Faults{Target: localwalrus.RoutePublisher, Latency: latency}, size)
				b.SetBytes(int64(size))
				for b.Loop() {
					for i := range pack[:64] {
						pack[i] = byte(rand.N(256)) // a new blob each time
					}
					open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(pack)), nil }
					res, err := st.PutReader(b.Context(), open, int64(size), 1)
					if err != nil {
						b.Fatal(err)
					}
					if err := st.Compare(b.Context(), res.BlobID, open, int64(size)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchStore is a store of a local server at the network's 1000 shards
// with faults, and a random pack of size bytes.
func benchStore(b *testing.B, faults localwalrus.Faults, size int) (*walrusStore, []byte) {
	b.Helper()
	_, c := localWalrus(b, localwalrus.Config{Shards: 1000, Faults: faults})
	pack := make([]byte, size)
	for i := range pack {
		pack[i] = byte(rand.N(256))
	}
	return newStore(c), pack
}
