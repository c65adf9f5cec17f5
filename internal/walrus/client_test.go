package walrus_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/redstuff"
	"github.com/hermesd/hermesd/internal/walrus"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// testShards is the shard count of the local servers and clients of these
// tests (unless one says otherwise): their blob ids cost a hundredth of
// 1000 shards' (TestDefaultShards runs at 1000).
const testShards = 100

func testBlobID(t testing.TB, b []byte) string {
	t.Helper()
	id, err := redstuff.Sum(b, testShards)
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

// startServer runs a local Walrus on a free loopback port.
func startServer(t testing.TB, cfg localwalrus.Config) *localwalrus.Server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Shards == 0 {
		cfg.Shards = testShards
	}
	s, err := localwalrus.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// settle waits until the server has finished (and reported) every request
// a client has seen answered.
func settle(t testing.TB, s *localwalrus.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Quiesce(ctx); err != nil {
		t.Fatalf("server did not settle: %v", err)
	}
}

// newClient returns a client with tiny backoff, pointed at s unless cfg
// names endpoints.
func newClient(t testing.TB, s *localwalrus.Server, cfg walrus.Config) *walrus.Client {
	t.Helper()
	if cfg.Publishers == nil && cfg.Aggregators == nil {
		cfg.Publishers = []string{s.URL()}
		cfg.Aggregators = []string{s.URL()}
	}
	if cfg.RetryWaitMin == 0 {
		cfg.RetryWaitMin = time.Millisecond
		cfg.RetryWaitMax = 5 * time.Millisecond
	}
	if cfg.Shards == 0 {
		cfg.Shards = testShards
	}
	c, err := walrus.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// genBody is size deterministic pseudo-random bytes, regenerated on every
// Open, so large blobs never sit in memory.
type genBody struct {
	seed uint64
	size int64
}

func (g genBody) Size() int64 { return g.size }
func (g genBody) Open() (io.ReadCloser, error) {
	var seed [32]byte
	copy(seed[:], strconv.FormatUint(g.seed, 10))
	return io.NopCloser(io.LimitReader(rand.NewChaCha8(seed), g.size)), nil
}

func (g genBody) sum(t testing.TB) [32]byte {
	rc, _ := g.Open()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		t.Fatal(err)
	}
	var s [32]byte
	h.Sum(s[:0])
	return s
}

func TestRoundTrip(t *testing.T) {
	s := startServer(t, localwalrus.Config{MaxBodySize: 128 << 20})
	c := newClient(t, s, walrus.Config{MaxBlobSize: 128 << 20})
	sizes := []int64{0, 1, 10 << 20, 100 << 20}
	if walrus.RaceEnabled {
		sizes = sizes[:3] // blob ids run some tenfold slower under the race detector
	}
	for _, size := range sizes {
		t.Run(walrus.FormatSize(size), func(t *testing.T) {
			body := genBody{seed: uint64(size), size: size}
			res, err := c.Store(t.Context(), body, walrus.WithEpochs(3))
			if err != nil {
				t.Fatal(err)
			}
			if res.Size != size || res.AlreadyCertified || res.EndEpoch != s.Epoch()+3 || res.Attempts != 1 ||
				res.Publisher != s.URL() || !strings.HasPrefix(res.ObjectID, "0x") {
				t.Fatalf("store result %+v", res)
			}
			if err := walrus.ValidateBlobID(res.BlobID); err != nil {
				t.Fatal(err)
			}
			// What the store cost, as the server answered it: Walrus's
			// formula at its default price, for the 3 epochs asked.
			enc, _ := walruscost.EncodedLength(uint64(size), testShards)
			want := walruscost.NewBlob(enc, 3, walruscost.DefaultPrice.Cost(enc, 3))
			if res.EncodedLength != enc || res.EpochsPaid != 3 || res.ResourceOperation != "registerFromScratch" || res.Charge() != want {
				t.Fatalf("store charge %+v of %+v, want %+v", res.Charge(), res, want)
			}
			rr, err := c.Verify(t.Context(), res.BlobID, body.sum(t), size)
			if err != nil {
				t.Fatal(err)
			}
			if rr.Size != size || rr.Attempts != 1 || rr.Resumes != 0 {
				t.Fatalf("read result %+v", rr)
			}
		})
	}
	t.Run("to file", func(t *testing.T) {
		body := genBody{seed: 7, size: 3<<20 + 5}
		res, err := c.Store(t.Context(), body)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "blob")
		if _, err := c.ReadToFile(t.Context(), res.BlobID, path); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		h := sha256.New()
		io.Copy(h, f)
		if want := body.sum(t); !bytes.Equal(h.Sum(nil), want[:]) {
			t.Fatal("file content differs")
		}
		if st, _ := f.Stat(); st.Mode().Perm() != 0o600 {
			t.Errorf("mode %v", st.Mode())
		}
	})
	t.Run("from spool file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "spool")
		os.WriteFile(path, []byte("spooled snapshot"), 0o600)
		fb, err := walrus.FileBody(path)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Store(t.Context(), fb)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := c.Read(t.Context(), res.BlobID, &buf); err != nil || buf.String() != "spooled snapshot" {
			t.Fatalf("read %q, %v", buf.String(), err)
		}
		// A spool file that changed size is refused, not sent short.
		os.WriteFile(path, []byte("longer spooled snapshot"), 0o600)
		if _, err := c.Store(t.Context(), fb); err == nil || !strings.Contains(err.Error(), "changed size") {
			t.Fatalf("changed spool: %v", err)
		}
	})
}

func TestDedupAndExpiry(t *testing.T) {
	s := startServer(t, localwalrus.Config{})
	c := newClient(t, s, walrus.Config{Permanent: true})
	body := walrus.BytesBody([]byte("same bytes"))
	first, err := c.Store(t.Context(), body, walrus.WithEpochs(2))
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Store(t.Context(), body, walrus.WithEpochs(1))
	if err != nil {
		t.Fatal(err)
	}
	if !second.AlreadyCertified || second.BlobID != first.BlobID || second.EndEpoch != first.EndEpoch || second.TxDigest == "" {
		t.Fatalf("second store %+v, first %+v", second, first)
	}

	if err := s.AdvanceEpochs(2); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(t.Context(), first.BlobID, io.Discard)
	var se *walrus.StatusError
	if !errors.Is(err, walrus.ErrNotFound) || !errors.As(err, &se) || se.Reason != "BLOB_NOT_FOUND" || walrus.Attempts(err) != 1 {
		t.Fatalf("read of expired blob: %v", err)
	}
}

func TestSizeCap(t *testing.T) {
	var requests sync.Map
	s := startServer(t, localwalrus.Config{MaxBodySize: 1 << 20,
		OnRequest: func(ri localwalrus.RequestInfo) { requests.Store(ri.Start, ri.Status) }})
	count := func() (n int) {
		requests.Range(func(any, any) bool { n++; return true })
		return n
	}

	t.Run("client check", func(t *testing.T) {
		c := newClient(t, s, walrus.Config{MaxBlobSize: 1 << 20})
		_, err := c.Store(t.Context(), genBody{size: 14_889_779})
		if !errors.Is(err, walrus.ErrTooLarge) || !strings.Contains(err.Error(), "blob is 14.2 MiB, over the publisher limit of 1.0 MiB") ||
			!strings.Contains(err.Error(), "walrus.max_blob_size") {
			t.Fatalf("error %v", err)
		}
		if n := count(); n != 0 {
			t.Fatalf("%d requests sent for a blob over the client limit", n)
		}
	})
	t.Run("server 413", func(t *testing.T) {
		c := newClient(t, s, walrus.Config{})
		_, err := c.Store(t.Context(), genBody{size: 8 << 20})
		var se *walrus.StatusError
		if !errors.Is(err, walrus.ErrTooLarge) || !errors.As(err, &se) || se.StatusCode != 413 || se.Permanent() == false ||
			!strings.Contains(se.Message, "length limit exceeded") || walrus.Attempts(err) != 1 {
			t.Fatalf("error %v", err)
		}
		settle(t, s)
		if n := count(); n != 1 {
			t.Fatalf("server saw %d requests, want 1", n)
		}
	})
}

// TestRawAPI checks what the client never sends but the contract fixes.
func TestRawAPI(t *testing.T) {
	s := startServer(t, localwalrus.Config{})
	c := newClient(t, s, walrus.Config{})
	res, err := c.Store(t.Context(), walrus.BytesBody([]byte("0123456789")))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, target, rng string
		status              int
		body                string
	}{
		{"PUT", "/v1/blobs?epochs=1&unknown=1", "", 400, ""},
		{"GET", "/v1/blobs/" + res.BlobID + "?cache_bust=1", "", 400, ""},
		{"GET", "/v1/blobs/" + res.BlobID, "bytes=2-4", 206, "234"},
		{"GET", "/v1/blobs/" + res.BlobID, "bytes=2-", 416, ""},
		{"GET", "/v1/blobs/" + res.BlobID, "bytes=-3", 416, ""},
		{"GET", "/v1/blobs/" + res.BlobID, "bytes=0-1,3-4", 416, ""},
		{"GET", "/v1/blobs/" + res.BlobID, "bytes=0-10", 416, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target+" "+tt.rng, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, s.URL()+tt.target, strings.NewReader("x"))
			if tt.rng != "" {
				req.Header.Set("Range", tt.rng)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || (tt.body != "" && string(b) != tt.body) {
				t.Fatalf("%d %q", resp.StatusCode, b)
			}
		})
	}
}

func TestPermanentErrorsAreNotRetried(t *testing.T) {
	var mu sync.Mutex
	statuses := map[string][]int{}
	s := startServer(t, localwalrus.Config{MaxEpochsAhead: 10, OnRequest: func(ri localwalrus.RequestInfo) {
		mu.Lock()
		defer mu.Unlock()
		statuses[ri.Method] = append(statuses[ri.Method], ri.Status)
	}})
	c := newClient(t, s, walrus.Config{})
	reset := func() { mu.Lock(); clear(statuses); mu.Unlock() }
	seen := func(method string) []int {
		settle(t, s)
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), statuses[method]...)
	}

	_, err := c.Store(t.Context(), walrus.BytesBody([]byte("x")), walrus.WithEpochs(20))
	var se *walrus.StatusError
	if !errors.As(err, &se) || se.StatusCode != 400 || se.Reason != "MALFORMED_REQUEST" || walrus.Attempts(err) != 1 {
		t.Fatalf("store with too many epochs: %v", err)
	}
	if got := seen("PUT"); len(got) != 1 || got[0] != 400 {
		t.Fatalf("server saw %v", got)
	}

	unknown := testBlobID(t, []byte("never stored"))
	reset()
	if _, err := c.Read(t.Context(), unknown, io.Discard); !errors.Is(err, walrus.ErrNotFound) {
		t.Fatalf("read unknown: %v", err)
	}
	if got := seen("GET"); len(got) != 1 {
		t.Fatalf("404 attempted %d times", len(got))
	}
	// "Just stored" mode retries a (CDN-cached) 404 a bounded number of times.
	reset()
	_, err = c.Read(t.Context(), unknown, io.Discard, walrus.WithNotFoundRetries(2))
	if !errors.Is(err, walrus.ErrNotFound) || walrus.Attempts(err) != 3 || len(seen("GET")) != 3 {
		t.Fatalf("read with 404 retries: %v (%d requests)", err, len(seen("GET")))
	}
	// Malformed ids never reach the network.
	reset()
	if _, err := c.Read(t.Context(), "../v1/api", io.Discard); !errors.Is(err, walrus.ErrInvalidBlobID) || len(seen("GET")) != 0 {
		t.Fatalf("malformed id: %v", err)
	}
	// Retries stop at RetryMax.
	reset()
	c2 := newClient(t, s, walrus.Config{RetryMax: 2})
	s.SetFaults(localwalrus.Faults{Rate: 1, Kinds: []localwalrus.Fault{{Kind: localwalrus.FaultStatus, Status: 503}}})
	_, err = c2.Store(t.Context(), walrus.BytesBody([]byte("y")))
	s.SetFaults(localwalrus.Faults{})
	if !errors.As(err, &se) || se.StatusCode != 503 || !se.Temporary() || walrus.Attempts(err) != 3 || len(seen("PUT")) != 3 {
		t.Fatalf("exhausted retries: %v", err)
	}
}

type tagKey struct{}

// tagTransport labels each request with the operation in its context, so
// the server can count attempts per operation.
type tagTransport struct{ base http.RoundTripper }

func (tt tagTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if v, ok := r.Context().Value(tagKey{}).(string); ok {
		r = r.Clone(r.Context())
		r.Header.Set("X-Test-Op", v)
	}
	return tt.base.RoundTrip(r)
}

func TestFaultInjection(t *testing.T) {
	var mu sync.Mutex
	byOp := map[string][]localwalrus.RequestInfo{}
	// 400 blobs stored and read: ids over 10 shards, the fewest that hold
	// these blobs (each read is still checked against its id; under the
	// race detector, ids over 100 shards took most of the test's minute).
	const shards = 10
	s := startServer(t, localwalrus.Config{MaxBodySize: 128 << 10, MaxEpochsAhead: 10, Shards: shards,
		OnRequest: func(ri localwalrus.RequestInfo) {
			if op := ri.Header.Get("X-Test-Op"); op != "" {
				mu.Lock()
				byOp[op] = append(byOp[op], ri)
				mu.Unlock()
			}
		}})
	base := http.DefaultTransport.(*http.Transport).Clone()
	c := newClient(t, s, walrus.Config{RetryMax: 25, Transport: tagTransport{base}, Permanent: true, Shards: shards})
	tagged := func(op string) context.Context { return context.WithValue(t.Context(), tagKey{}, op) }
	requestsOf := func(op string) []localwalrus.RequestInfo {
		mu.Lock()
		defer mu.Unlock()
		return append([]localwalrus.RequestInfo(nil), byOp[op]...)
	}

	// engineered sends requests the server must reject: 400 (epochs over
	// the server's limit) and 413 (over its body limit). Each must be
	// answered once and never tried again.
	engineered := func(t *testing.T, prefix string) {
		for i := range 5 {
			op := fmt.Sprintf("%s-400-%d", prefix, i)
			_, err := c.Store(tagged(op), walrus.BytesBody([]byte(op)), walrus.WithEpochs(20))
			settle(t, s)
			checkFinal(t, op, err, 400, requestsOf(op))
			op = fmt.Sprintf("%s-413-%d", prefix, i)
			_, err = c.Store(tagged(op), genBody{seed: uint64(i), size: 200 << 10})
			settle(t, s)
			checkFinal(t, op, err, 413, requestsOf(op))
		}
	}
	t.Run("no faults", func(t *testing.T) {
		engineered(t, "clean")
		for i := range 5 {
			for _, code := range []int{400, 413} {
				if n := len(requestsOf(fmt.Sprintf("clean-%d-%d", code, i))); n != 1 {
					t.Fatalf("clean %d request attempted %d times", code, n)
				}
			}
		}
	})

	s.SetFaults(localwalrus.Faults{Rate: 0.3, Seed: 1})
	t.Cleanup(func() { s.SetFaults(localwalrus.Faults{}) })
	const n = 200
	type blob struct {
		data []byte
		id   string
	}
	blobs := make([]blob, n)
	r := rand.New(rand.NewPCG(7, 7))
	for i := range blobs {
		blobs[i].data = make([]byte, r.IntN(64<<10))
		for j := range blobs[i].data {
			blobs[i].data[j] = byte(r.Uint32())
		}
	}
	var storeAttempts, readAttempts, resumes int
	// run performs n operations 8 at a time, then checks each one's
	// attempts against what the server saw.
	run := func(t *testing.T, prefix string, f func(i int) (int, error)) {
		attempts := make([]int, n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, 8)
		for i := range n {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				a, err := f(i)
				if err != nil {
					errs <- fmt.Errorf("blob %d: %w", i, err)
				}
				attempts[i] = a
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		settle(t, s)
		for i, a := range attempts {
			op := fmt.Sprintf("%s-%d", prefix, i)
			if err := checkAttempts(op, a, requestsOf(op)); err != nil {
				t.Error(err)
			}
		}
	}
	var amu sync.Mutex
	t.Run("uploads", func(t *testing.T) {
		run(t, "put", func(i int) (int, error) {
			op := fmt.Sprintf("put-%d", i)
			res, err := c.Store(tagged(op), walrus.BytesBody(blobs[i].data))
			if err != nil {
				return 0, err
			}
			if want, err := redstuff.Sum(blobs[i].data, shards); err != nil || res.BlobID != want.String() {
				return 0, fmt.Errorf("blob id %s, want %s (%v)", res.BlobID, want, err)
			}
			blobs[i].id = res.BlobID
			amu.Lock()
			storeAttempts += res.Attempts
			amu.Unlock()
			return res.Attempts, nil
		})
	})
	t.Run("reads", func(t *testing.T) {
		run(t, "get", func(i int) (int, error) {
			op := fmt.Sprintf("get-%d", i)
			var buf bytes.Buffer
			res, err := c.Read(tagged(op), blobs[i].id, &buf)
			if err != nil {
				return 0, err
			}
			if !bytes.Equal(buf.Bytes(), blobs[i].data) {
				return 0, fmt.Errorf("read %d bytes differing from the %d stored", buf.Len(), len(blobs[i].data))
			}
			amu.Lock()
			readAttempts += res.Attempts
			resumes += res.Resumes
			amu.Unlock()
			return res.Attempts, nil
		})
	})
	t.Run("engineered", func(t *testing.T) { engineered(t, "faulty") })

	st := s.Stats()
	faults := 0
	for _, v := range st.Faults {
		faults += v
	}
	t.Logf("faults injected %v; attempts: %d stores, %d reads; %d resumed reads", st.Faults, storeAttempts, readAttempts, resumes)
	if faults < 100 || storeAttempts <= n || readAttempts <= n || resumes == 0 {
		t.Errorf("the faults were not exercised: %d faults, %d/%d attempts, %d resumes", faults, storeAttempts, readAttempts, resumes)
	}
}

// checkAttempts compares the client's attempt count with what the server
// saw, and checks no request followed a final 4xx.
func checkAttempts(op string, attempts int, seen []localwalrus.RequestInfo) error {
	if len(seen) == 0 || len(seen) > attempts {
		return fmt.Errorf("%s: client counted %d attempts, server saw %d", op, attempts, len(seen))
	}
	for i, ri := range seen[:len(seen)-1] {
		if ri.Status >= 400 && ri.Status < 500 && ri.Status != 429 {
			return fmt.Errorf("%s: attempt %d got %d and was retried", op, i+1, ri.Status)
		}
	}
	return nil
}

func checkFinal(t *testing.T, op string, err error, status int, seen []localwalrus.RequestInfo) {
	t.Helper()
	var se *walrus.StatusError
	if !errors.As(err, &se) || se.StatusCode != status {
		t.Fatalf("%s: error %v, want status %d", op, err, status)
	}
	if err := checkAttempts(op, walrus.Attempts(err), seen); err != nil {
		t.Fatal(err)
	}
	final := 0
	for _, ri := range seen {
		if ri.Status == status {
			final++
		}
	}
	if final != 1 || seen[len(seen)-1].Status != status {
		t.Fatalf("%s: server answered %d %d times; statuses %v", op, status, final, statusesOf(seen))
	}
}

func statusesOf(seen []localwalrus.RequestInfo) []int {
	var out []int
	for _, ri := range seen {
		out = append(out, ri.Status)
	}
	return out
}

func TestResumeAfterCut(t *testing.T) {
	for _, kind := range []localwalrus.FaultKind{localwalrus.FaultTruncate, localwalrus.FaultReset} {
		t.Run(kind.String(), func(t *testing.T) {
			var mu sync.Mutex
			var gets []localwalrus.RequestInfo
			s := startServer(t, localwalrus.Config{OnRequest: func(ri localwalrus.RequestInfo) {
				if ri.Route == localwalrus.RouteAggregator {
					mu.Lock()
					gets = append(gets, ri)
					mu.Unlock()
				}
			}})
			c := newClient(t, s, walrus.Config{})
			body := genBody{seed: 99, size: 1 << 20}
			res, err := c.Store(t.Context(), body)
			if err != nil {
				t.Fatal(err)
			}
			const cutAt = 300_000
			s.InjectNext(localwalrus.RouteAggregator, localwalrus.Fault{Kind: kind, CutAt: cutAt})
			rr, err := c.Verify(t.Context(), res.BlobID, body.sum(t), body.size)
			if err != nil {
				t.Fatal(err)
			}
			settle(t, s)
			mu.Lock()
			defer mu.Unlock()
			if rr.Attempts != 2 || rr.Resumes != 1 || len(gets) != 2 {
				t.Fatalf("result %+v, server saw %d reads", rr, len(gets))
			}
			if gets[0].Fault != kind || gets[0].BytesOut != cutAt || gets[0].Range != "" {
				t.Fatalf("first read %+v", gets[0])
			}
			var from, to int64
			if _, err := fmt.Sscanf(gets[1].Range, "bytes=%d-%d", &from, &to); err != nil || gets[1].Status != 206 {
				t.Fatalf("second read: Range %q, status %d", gets[1].Range, gets[1].Status)
			}
			// A clean close delivers every byte sent, so the resume starts
			// exactly at the cut; a reset may lose some in flight.
			if (kind == localwalrus.FaultTruncate && from != cutAt) || from > cutAt || to != body.size-1 {
				t.Fatalf("resumed with %q after a cut at %d", gets[1].Range, cutAt)
			}
		})
	}
}

// deadURL returns the URL of a port nobody listens on.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestFailover(t *testing.T) {
	s := startServer(t, localwalrus.Config{})
	var mu sync.Mutex
	var attempts []walrus.Attempt
	dead := deadURL(t)
	c := newClient(t, s, walrus.Config{
		Publishers:  []string{dead, s.URL()},
		Aggregators: []string{dead, s.URL()},
		// A large backoff shows that failing over from a refused
		// connection does not wait for it.
		RetryWaitMin: time.Hour, RetryWaitMax: time.Hour,
		OnAttempt: func(a walrus.Attempt) { mu.Lock(); attempts = append(attempts, a); mu.Unlock() },
	})
	res, err := c.Store(t.Context(), walrus.BytesBody([]byte("failover")))
	if err != nil {
		t.Fatal(err)
	}
	if res.Publisher != s.URL() || res.Attempts != 2 {
		t.Fatalf("store %+v", res)
	}
	rr, err := c.Read(t.Context(), res.BlobID, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Aggregator != s.URL() || rr.Attempts != 2 {
		t.Fatalf("read %+v", rr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 4 {
		t.Fatalf("attempts %+v", attempts)
	}
	for i, a := range attempts {
		first := i%2 == 0
		if first && (a.Endpoint != dead || a.Err == nil || !a.Retry || a.Backoff != 0 || a.Status != 0) {
			t.Errorf("attempt %d: %+v", i, a)
		}
		if !first && (a.Endpoint != s.URL() || a.Err != nil || a.Retry || a.Status != 200 || a.N != 2) {
			t.Errorf("attempt %d: %+v", i, a)
		}
	}
	if attempts[1].Bytes != 8 || attempts[3].Bytes != 8 {
		t.Errorf("bytes: %d sent, %d received", attempts[1].Bytes, attempts[3].Bytes)
	}

	// With every endpoint down the client backs off instead of spinning.
	c2 := newClient(t, s, walrus.Config{Publishers: []string{dead}, RetryMax: 1, RetryWaitMin: time.Hour, RetryWaitMax: time.Hour, Timeout: 200 * time.Millisecond})
	_, err = c2.Store(t.Context(), walrus.BytesBody([]byte("x")))
	if !errors.Is(err, walrus.ErrTimeout) || walrus.Attempts(err) != 1 {
		t.Fatalf("all down: %v", err)
	}
}

func TestRetryAfterRespected(t *testing.T) {
	var mu sync.Mutex
	var puts []localwalrus.RequestInfo
	s := startServer(t, localwalrus.Config{OnRequest: func(ri localwalrus.RequestInfo) {
		mu.Lock()
		puts = append(puts, ri)
		mu.Unlock()
	}})
	c := newClient(t, s, walrus.Config{})
	s.InjectNext(localwalrus.RoutePublisher, localwalrus.Fault{Kind: localwalrus.FaultStatus, Status: 429, RetryAfter: "1"})
	res, err := c.Store(t.Context(), walrus.BytesBody([]byte("patience")))
	if err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	mu.Lock()
	defer mu.Unlock()
	if res.Attempts != 2 || len(puts) != 2 || puts[0].Status != 429 {
		t.Fatalf("result %+v, %d requests", res, len(puts))
	}
	// The server's own clock: the retry came no earlier than asked.
	if gap := puts[1].Start.Sub(puts[0].End); gap < time.Second {
		t.Fatalf("retried %s after a Retry-After of 1s", gap)
	}
}

func TestAttemptTimeout(t *testing.T) {
	// Few shards: the store's answer (the server encodes the blob for its
	// id) must come well within the 200 ms; and the Reed–Solomon tables
	// (built once per process) are built before.
	testBlobID(t, nil)
	s := startServer(t, localwalrus.Config{Shards: 4})
	var mu sync.Mutex
	var errs []error
	c := newClient(t, s, walrus.Config{AttemptTimeout: 200 * time.Millisecond, Shards: 4,
		OnAttempt: func(a walrus.Attempt) { mu.Lock(); errs = append(errs, a.Err); mu.Unlock() }})
	res, err := c.Store(t.Context(), walrus.BytesBody([]byte("slow")))
	if err != nil {
		t.Fatal(err)
	}
	s.InjectNext(localwalrus.RouteAggregator, localwalrus.Fault{Delay: time.Minute})
	rr, err := c.Read(t.Context(), res.BlobID, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if rr.Attempts != 2 || len(errs) != 3 || !errors.Is(errs[1], walrus.ErrAttemptTimeout) || errors.Is(errs[1], context.Canceled) {
		t.Fatalf("read %+v, attempt errors %v", rr, errs)
	}
}

// TestIdleTimeoutAndIgnoredRange uses an aggregator that stalls mid-body
// once and then ignores Range: the client must time out the stall, resume,
// and skip the bytes it already has.
func TestIdleTimeoutAndIgnoredRange(t *testing.T) {
	data := bytes.Repeat([]byte("abcdefghij"), 10_000)
	id := testBlobID(t, data)
	var mu sync.Mutex
	var ranges []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		n := len(ranges)
		mu.Unlock()
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(200)
		if n == 1 {
			w.Write(data[:40_000])
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
			return
		}
		w.Write(data)
	}))
	defer srv.Close()
	c, err := walrus.New(walrus.Config{Shards: testShards, Aggregators: []string{srv.URL}, IdleTimeout: time.Second, RetryWaitMin: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rr, err := c.Read(t.Context(), id, &buf)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Equal(buf.Bytes(), data) || rr.Resumes != 1 || len(ranges) != 2 || ranges[1] != fmt.Sprintf("bytes=40000-%d", len(data)-1) {
		t.Fatalf("read %d bytes, result %+v, ranges %q", buf.Len(), rr, ranges)
	}
}

func TestBearerToken(t *testing.T) {
	const secret = "s3cr3t-token"
	var mu sync.Mutex
	var auths []string
	s := startServer(t, localwalrus.Config{OnRequest: func(ri localwalrus.RequestInfo) {
		mu.Lock()
		auths = append(auths, ri.Header.Get("Authorization"))
		mu.Unlock()
	}})
	var logs bytes.Buffer
	n := 0
	c := newClient(t, s, walrus.Config{
		TokenSource: func(context.Context) (string, error) { n++; return fmt.Sprintf("%s-%d", secret, n), nil },
		Logger:      slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	s.InjectNext(localwalrus.RoutePublisher, localwalrus.Fault{Kind: localwalrus.FaultStatus, Status: 500})
	res, err := c.Store(t.Context(), walrus.BytesBody([]byte("authorized")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(t.Context(), res.BlobID, io.Discard); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	mu.Lock()
	defer mu.Unlock()
	// One fresh token per store attempt (publisher JWTs are single-use),
	// none on reads, and none in the logs.
	want := []string{"Bearer " + secret + "-1", "Bearer " + secret + "-2", ""}
	if fmt.Sprint(auths) != fmt.Sprint(want) {
		t.Fatalf("Authorization headers %q, want %q", auths, want)
	}
	if !strings.Contains(logs.String(), "retrying") || strings.Contains(logs.String(), secret) {
		t.Fatalf("logs:\n%s", logs.String())
	}
}

func TestReadToFileFailureLeavesNothing(t *testing.T) {
	s := startServer(t, localwalrus.Config{})
	c := newClient(t, s, walrus.Config{})
	dir := t.TempDir()
	if _, err := c.ReadToFile(t.Context(), testBlobID(t, []byte("absent")), filepath.Join(dir, "out")); !errors.Is(err, walrus.ErrNotFound) {
		t.Fatalf("error %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left behind %v", ents)
	}
}

func TestVerifyMismatch(t *testing.T) {
	s := startServer(t, localwalrus.Config{})
	c := newClient(t, s, walrus.Config{})
	res, err := c.Store(t.Context(), walrus.BytesBody([]byte("original")))
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256([]byte("tampered"))
	_, err = c.Verify(t.Context(), res.BlobID, want, 8)
	got := sha256.Sum256([]byte("original"))
	if !errors.Is(err, walrus.ErrMismatch) || !strings.Contains(err.Error(), fmt.Sprintf("%x", got)) || !strings.Contains(err.Error(), fmt.Sprintf("%x", want)) {
		t.Fatalf("error %v", err)
	}
}

func BenchmarkStoreRead(b *testing.B) {
	const size = 64 << 20
	s := startServer(b, localwalrus.Config{MaxBodySize: size})
	c := newClient(b, s, walrus.Config{MaxBlobSize: size})
	b.SetBytes(size)
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		i++
		body := genBody{seed: i, size: size}
		res, err := c.Store(b.Context(), body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(b.Context(), res.BlobID, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadRange reads 64 KiB ranges of a 16 MiB blob, one request
// each: the v3 reader's access pattern.
func BenchmarkReadRange(b *testing.B) {
	const size, span = 16 << 20, 64 << 10
	s := startServer(b, localwalrus.Config{MaxBodySize: size})
	c := newClient(b, s, walrus.Config{MaxBlobSize: size})
	res, err := c.Store(b.Context(), genBody{seed: 1, size: size})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(span)
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		if _, err := c.ReadRange(b.Context(), res.BlobID, off, span, io.Discard); err != nil {
			b.Fatal(err)
		}
		off = (off + 7*span) % (size - span)
	}
}

// TestRecoveredEndsBackoff: a retry waiting out its backoff goes at once
// when Config.Recovered says the store answers again (after a long
// outage the backoff alone would wait up to 50 s); a wait the server asked
// for (Retry-After) is kept.
func TestRecoveredEndsBackoff(t *testing.T) {
	const backoff = time.Minute // what the retry would wait without the wake
	s := startServer(t, localwalrus.Config{})
	var mu sync.Mutex
	back := make(chan struct{})
	recovered := func() <-chan struct{} { mu.Lock(); defer mu.Unlock(); return back }
	wake := func() { mu.Lock(); close(back); back = make(chan struct{}); mu.Unlock() }
	retrying := make(chan struct{}, 8)
	c := newClient(t, s, walrus.Config{RetryWaitMin: backoff, RetryWaitMax: backoff, Recovered: recovered,
		OnAttempt: func(a walrus.Attempt) {
			if a.Retry {
				retrying <- struct{}{}
			}
		}})

	for _, tc := range []struct {
		name  string
		fault localwalrus.Fault
		least time.Duration // the retry comes no earlier
	}{
		{"backoff", localwalrus.Fault{Kind: localwalrus.FaultStatus, Status: 503}, 0},
		{"Retry-After", localwalrus.Fault{Kind: localwalrus.FaultStatus, Status: 503, RetryAfter: "1"}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.InjectNext(localwalrus.RoutePublisher, tc.fault)
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := c.Store(t.Context(), walrus.BytesBody([]byte("after the outage "+tc.name)))
				done <- err
			}()
			<-retrying // the first attempt failed; the retry waits
			wake()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(backoff / 2):
				t.Fatalf("the retry still waits its backoff of %s after the store was back", backoff)
			}
			if took := time.Since(start); took < tc.least {
				t.Errorf("retried after %s; the server asked for %s", took, tc.least)
			}
		})
	}
}

// TestDefaultShards: at 1000 shards, mainnet's and testnet's (the
// default of both the client and the local server), a stored blob has
// Walrus's id and reads back checked.
func TestDefaultShards(t *testing.T) {
	s := startServer(t, localwalrus.Config{Shards: 1000})
	c := newClient(t, s, walrus.Config{Shards: walruscost.DefaultShards})
	data := []byte("a blob at 1000 shards")
	res, err := c.Store(t.Context(), walrus.BytesBody(data))
	if err != nil {
		t.Fatal(err)
	}
	if res.BlobID != localwalrus.BlobID(data) {
		t.Fatalf("id %s, want %s", res.BlobID, localwalrus.BlobID(data))
	}
	var buf bytes.Buffer
	if _, err := c.Read(t.Context(), res.BlobID, &buf); err != nil || !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("read: %v", err)
	}
	if def, err := walrus.New(walrus.Config{Aggregators: []string{s.URL()}}); err != nil {
		t.Fatal(err)
	} else if _, err := def.Read(t.Context(), res.BlobID, io.Discard); err != nil {
		t.Fatalf("a client with the default shard count: %v", err)
	}
}
