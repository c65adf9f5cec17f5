package walrus_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/walrus"
)

// recorded collects what a localwalrus server saw, by route.
type recorded struct {
	mu   sync.Mutex
	reqs []localwalrus.RequestInfo
}

func (r *recorded) add(ri localwalrus.RequestInfo) {
	r.mu.Lock()
	r.reqs = append(r.reqs, ri)
	r.mu.Unlock()
}

func (r *recorded) of(route localwalrus.Route) []localwalrus.RequestInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []localwalrus.RequestInfo
	for _, ri := range r.reqs {
		if ri.Route == route {
			out = append(out, ri)
		}
	}
	// In the order they began: the server reports a request when it ends,
	// and a truncated answer's handler may end after the client's resumed
	// request (seen under the race detector).
	slices.SortStableFunc(out, func(a, b localwalrus.RequestInfo) int { return a.Start.Compare(b.Start) })
	return out
}

// fresh waits for the server to finish what earlier clients started, then
// forgets it.
func (r *recorded) fresh(t *testing.T, s *localwalrus.Server) {
	t.Helper()
	settle(t, s)
	r.mu.Lock()
	r.reqs = nil
	r.mu.Unlock()
}

// slack is what loopback socket buffers can swallow after a client stops
// reading: a bounded read may make the server write this much more.
const slack = 32 << 20

// TestEndlessBody: an aggregator that never stops sending (or announces
// 1 TiB) is cut off at the read's bound, at once and for good.
func TestEndlessBody(t *testing.T) {
	var rec recorded
	s := startServer(t, localwalrus.Config{OnRequest: rec.add})
	c := newClient(t, s, walrus.Config{MaxReadSize: 4 << 20})
	data := make([]byte, 10_000)
	for i := range data {
		data[i] = byte(i)
	}
	res, err := c.Store(t.Context(), walrus.BytesBody(data))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	endless := localwalrus.Fault{Kind: localwalrus.FaultEndless}
	huge := localwalrus.Fault{Kind: localwalrus.FaultEndless, Length: 1 << 40}

	tests := []struct {
		name  string
		fault localwalrus.Fault
		read  func(w io.Writer) error
		bound int64 // most bytes the writer may see
		also  error // another sentinel the error must match
	}{
		{"chunked, default limit", endless, func(w io.Writer) error {
			_, err := c.Read(t.Context(), res.BlobID, w)
			return err
		}, 4 << 20, nil},
		{"chunked, max size", endless, func(w io.Writer) error {
			_, err := c.Read(t.Context(), res.BlobID, w, walrus.WithMaxSize(1<<20))
			return err
		}, 1 << 20, nil},
		{"chunked, expected size", endless, func(w io.Writer) error {
			_, err := c.Read(t.Context(), res.BlobID, w, walrus.WithExpectedSize(int64(len(data))))
			return err
		}, int64(len(data)), walrus.ErrMismatch},
		{"chunked, verify", endless, func(io.Writer) error {
			_, err := c.Verify(t.Context(), res.BlobID, sum, int64(len(data)))
			return err
		}, 0, walrus.ErrMismatch},
		{"1 TiB Content-Length, default limit", huge, func(w io.Writer) error {
			_, err := c.Read(t.Context(), res.BlobID, w)
			return err
		}, 0, nil},
		{"1 TiB Content-Length, verify", huge, func(io.Writer) error {
			_, err := c.Verify(t.Context(), res.BlobID, sum, int64(len(data)))
			return err
		}, 0, walrus.ErrMismatch},
		{"1 TiB Content-Length, range", huge, func(w io.Writer) error {
			_, err := c.ReadRange(t.Context(), res.BlobID, 0, 10, w)
			return err
		}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.fresh(t, s)
			s.InjectNext(localwalrus.RouteAggregator, tt.fault)
			var got countWriter
			err := tt.read(&got)
			if !errors.Is(err, walrus.ErrBodyTooLarge) || (tt.also != nil && !errors.Is(err, tt.also)) || walrus.Attempts(err) != 1 {
				t.Fatalf("error %v (%d attempts)", err, walrus.Attempts(err))
			}
			if got.n > tt.bound {
				t.Fatalf("%d bytes written, bound %d", got.n, tt.bound)
			}
			settle(t, s)
			gets := rec.of(localwalrus.RouteAggregator)
			if len(gets) != 1 || gets[0].Fault != localwalrus.FaultEndless || gets[0].BytesOut > tt.bound+slack {
				t.Fatalf("server saw %d reads; first %+v", len(gets), gets[0])
			}
		})
	}

	t.Run("to file", func(t *testing.T) {
		dir := t.TempDir()
		s.InjectNext(localwalrus.RouteAggregator, endless)
		_, err := c.ReadToFile(t.Context(), res.BlobID, filepath.Join(dir, "blob"))
		if !errors.Is(err, walrus.ErrBodyTooLarge) || walrus.Attempts(err) != 1 {
			t.Fatalf("error %v", err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("left behind %v", ents)
		}
	})
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// TestLyingContentLength: a Content-Length that differs from the stored
// size fails before the body when the size is known, and a short body
// under a long claim resumes instead of passing as the blob.
func TestLyingContentLength(t *testing.T) {
	var rec recorded
	s := startServer(t, localwalrus.Config{OnRequest: rec.add})
	c := newClient(t, s, walrus.Config{})
	data := bytes.Repeat([]byte("0123456789"), 5_000)
	res, err := c.Store(t.Context(), walrus.BytesBody(data))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)

	t.Run("short claim, verify", func(t *testing.T) {
		rec.fresh(t, s)
		s.InjectNext(localwalrus.RouteAggregator, localwalrus.Fault{Kind: localwalrus.FaultLyingLength})
		_, err := c.Verify(t.Context(), res.BlobID, sum, int64(len(data)))
		if !errors.Is(err, walrus.ErrMismatch) || errors.Is(err, walrus.ErrBodyTooLarge) || walrus.Attempts(err) != 1 ||
			!strings.Contains(err.Error(), "Content-Length says the blob is 25000 bytes, 50000 expected") {
			t.Fatalf("error %v", err)
		}
		settle(t, s)
		if n := len(rec.of(localwalrus.RouteAggregator)); n != 1 {
			t.Fatalf("%d reads", n)
		}
	})
	t.Run("long claim, verify", func(t *testing.T) {
		s.InjectNext(localwalrus.RouteAggregator, localwalrus.Fault{Kind: localwalrus.FaultLyingLength, Length: int64(len(data)) + 1})
		_, err := c.Verify(t.Context(), res.BlobID, sum, int64(len(data)))
		if !errors.Is(err, walrus.ErrBodyTooLarge) || !errors.Is(err, walrus.ErrMismatch) || walrus.Attempts(err) != 1 {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("long claim, no size known", func(t *testing.T) {
		// The body falls short of the claim: a cut, resumed with a range
		// up to the claimed size, which the honest server refuses (416).
		rec.fresh(t, s)
		s.InjectNext(localwalrus.RouteAggregator, localwalrus.Fault{Kind: localwalrus.FaultLyingLength, Length: int64(len(data)) * 2})
		var buf bytes.Buffer
		_, err := c.Read(t.Context(), res.BlobID, &buf)
		if !errors.Is(err, walrus.ErrInvalidRange) || walrus.Attempts(err) != 2 || buf.Len() != 0 {
			t.Fatalf("error %v, %d bytes", err, buf.Len())
		}
		settle(t, s)
		if gets := rec.of(localwalrus.RouteAggregator); len(gets) != 2 || gets[1].Range != "bytes=50000-99999" || gets[1].Status != 416 {
			t.Fatalf("server saw %+v", gets)
		}
	})
	t.Run("range", func(t *testing.T) {
		s.InjectNext(localwalrus.RouteAggregator, localwalrus.Fault{Kind: localwalrus.FaultLyingLength})
		_, err := c.ReadRange(t.Context(), res.BlobID, 100, 1000, io.Discard)
		if !errors.Is(err, walrus.ErrProtocol) || walrus.Attempts(err) != 1 || !strings.Contains(err.Error(), "has Content-Length 500") {
			t.Fatalf("error %v", err)
		}
	})
}

// chunkedServer answers every GET with body, chunked (no Content-Length).
func chunkedServer(t *testing.T, body []byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)/2])
		http.NewResponseController(w).Flush() // forces chunked encoding
		w.Write(body[len(body)/2:])
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestChunkedBodyAgainstExpectedSize: without a Content-Length only the
// expected size tells a wrong body, by its clean end.
func TestChunkedBodyAgainstExpectedSize(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 1000)
	id := testBlobID(t, data)
	srv := chunkedServer(t, data)
	c, err := walrus.New(walrus.Config{Shards: testShards, Aggregators: []string{srv.URL}, RetryWaitMin: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		expected int64
		want     []error
		written  int
	}{
		// A failed read hands the caller none of its bytes: they are
		// checked against the blob id first.
		{1000, nil, 1000},
		{1001, []error{walrus.ErrMismatch}, 0},
		{999, []error{walrus.ErrMismatch, walrus.ErrBodyTooLarge}, 0},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		res, err := c.Read(t.Context(), id, &buf, walrus.WithExpectedSize(tt.expected))
		if buf.Len() != tt.written {
			t.Errorf("expected %d: %d bytes written", tt.expected, buf.Len())
		}
		if tt.want == nil {
			if err != nil || res.Size != 1000 || res.Total != 1000 {
				t.Errorf("expected %d: %+v, %v", tt.expected, res, err)
			}
			continue
		}
		for _, w := range tt.want {
			if !errors.Is(err, w) || walrus.Attempts(err) != 1 {
				t.Errorf("expected %d: error %v is not %v", tt.expected, err, w)
			}
		}
	}
	// Without any size, the body is the blob and its end tells the size.
	res, err := c.Read(t.Context(), id, io.Discard)
	if err != nil || res.Total != 1000 {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestNoSpace: a download that would not fit (plus the margin) is refused
// before a byte is written.
func TestNoSpace(t *testing.T) {
	dir := t.TempDir()
	if err := walrus.CheckFreeSpace(dir, 1<<20); err != nil {
		t.Fatalf("1 MiB: %v", err)
	}
	err := walrus.CheckFreeSpace(dir, 1<<60)
	if !errors.Is(err, walrus.ErrNoSpace) || !strings.Contains(err.Error(), dir+" has ") || !strings.Contains(err.Error(), "1.000 EiB are needed plus a margin of ") {
		t.Fatalf("1 EiB: %v", err)
	}
	if err := walrus.CheckFreeSpace(filepath.Join(dir, "missing"), 1); err == nil || errors.Is(err, walrus.ErrNoSpace) {
		t.Fatalf("missing dir: %v", err)
	}

	var rec recorded
	s := startServer(t, localwalrus.Config{OnRequest: rec.add})
	c := newClient(t, s, walrus.Config{MaxReadSize: 1 << 62})
	res, err := c.Store(t.Context(), walrus.BytesBody([]byte("small")))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("expected size", func(t *testing.T) {
		rec.fresh(t, s)
		_, err := c.ReadToFile(t.Context(), res.BlobID, filepath.Join(dir, "a"), walrus.WithExpectedSize(1<<60))
		if !errors.Is(err, walrus.ErrNoSpace) {
			t.Fatalf("error %v", err)
		}
		settle(t, s)
		if n := len(rec.of(localwalrus.RouteAggregator)); n != 0 {
			t.Fatalf("%d requests sent", n)
		}
	})
	t.Run("Content-Length", func(t *testing.T) {
		rec.fresh(t, s)
		s.InjectNext(localwalrus.RouteAggregator, localwalrus.Fault{Kind: localwalrus.FaultEndless, Length: 1 << 60})
		_, err := c.ReadToFile(t.Context(), res.BlobID, filepath.Join(dir, "b"))
		if !errors.Is(err, walrus.ErrNoSpace) || walrus.Attempts(err) != 1 {
			t.Fatalf("error %v", err)
		}
		settle(t, s)
		if gets := rec.of(localwalrus.RouteAggregator); len(gets) != 1 || gets[0].BytesOut > slack {
			t.Fatalf("server saw %+v", gets)
		}
	})
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left behind %v", ents)
	}
	if _, err := c.ReadToFile(t.Context(), res.BlobID, filepath.Join(dir, "c")); err != nil {
		t.Fatalf("a blob that fits: %v", err)
	}
}

// TestReadRange: closed ranges anywhere in the blob, resumed after cuts,
// with the blob's size reported.
func TestReadRange(t *testing.T) {
	var rec recorded
	s := startServer(t, localwalrus.Config{OnRequest: rec.add})
	c := newClient(t, s, walrus.Config{})
	data := make([]byte, 100_000)
	r := rand.New(rand.NewPCG(3, 3))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	size := int64(len(data))
	res, err := c.Store(t.Context(), walrus.BytesBody(data))
	if err != nil {
		t.Fatal(err)
	}
	id := res.BlobID
	tests := []struct {
		name        string
		off, length int64
		fault       *localwalrus.Fault
		resumeFrom  int64 // first byte of the resumed request, 0 for none
	}{
		{"first byte", 0, 1, nil, 0},
		{"whole blob", 0, size, nil, 0},
		{"last byte", size - 1, 1, nil, 0},
		{"tail", size - 4096, 4096, nil, 0},
		{"middle", 12_345, 54_321, nil, 0},
		{"truncated", 1000, 50_000, &localwalrus.Fault{Kind: localwalrus.FaultTruncate, CutAt: 7000}, 8000},
		{"reset", 1000, 50_000, &localwalrus.Fault{Kind: localwalrus.FaultReset, CutAt: 7000}, -1},
		{"503", 10, 20, &localwalrus.Fault{Kind: localwalrus.FaultStatus, Status: 503}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.fresh(t, s)
			if tt.fault != nil {
				s.InjectNext(localwalrus.RouteAggregator, *tt.fault)
			}
			var buf bytes.Buffer
			rr, err := c.ReadRange(t.Context(), id, tt.off, tt.length, &buf)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), data[tt.off:tt.off+tt.length]) || rr.Size != tt.length || rr.Total != size {
				t.Fatalf("read %d bytes, result %+v", buf.Len(), rr)
			}
			settle(t, s)
			gets := rec.of(localwalrus.RouteAggregator)
			want := fmt.Sprintf("bytes=%d-%d", tt.off, tt.off+tt.length-1)
			if gets[0].Range != want {
				t.Fatalf("first request Range %q, want %q", gets[0].Range, want)
			}
			if tt.fault == nil {
				if len(gets) != 1 || gets[0].Status != 206 || rr.Attempts != 1 {
					t.Fatalf("%d requests, status %d, %d attempts", len(gets), gets[0].Status, rr.Attempts)
				}
				return
			}
			if len(gets) != 2 || rr.Attempts != 2 || gets[1].Status != 206 {
				t.Fatalf("%d requests, %d attempts", len(gets), rr.Attempts)
			}
			var from, to int64
			if _, err := fmt.Sscanf(gets[1].Range, "bytes=%d-%d", &from, &to); err != nil || to != tt.off+tt.length-1 {
				t.Fatalf("second Range %q", gets[1].Range)
			}
			switch {
			case tt.resumeFrom > 0 && (from != tt.resumeFrom || rr.Resumes != 1):
				t.Fatalf("resumed at %d (%d resumes), want %d", from, rr.Resumes, tt.resumeFrom)
			case tt.resumeFrom < 0 && (from < tt.off || from > tt.off+7000):
				t.Fatalf("resumed at %d after a reset at %d", from, tt.off+7000)
			case tt.resumeFrom == 0 && from != tt.off:
				t.Fatalf("retry from %d", from)
			}
		})
	}

	bad := []struct {
		name        string
		off, length int64
		requests    int
		opts        []walrus.ReadOption
		want        error
	}{
		{"past the end", size - 1, 2, 1, nil, walrus.ErrInvalidRange},
		{"after the end", size, 1, 1, nil, walrus.ErrInvalidRange},
		{"zero length", 0, 0, 0, nil, walrus.ErrInvalidRange},
		{"negative offset", -1, 10, 0, nil, walrus.ErrInvalidRange},
		{"overflow", 1 << 62, 1 << 62, 0, nil, walrus.ErrInvalidRange},
		{"beyond the limit", 10, 1 << 20, 0, []walrus.ReadOption{walrus.WithMaxSize(1 << 20)}, walrus.ErrInvalidRange},
		{"wrong expected size", 0, 10, 1, []walrus.ReadOption{walrus.WithExpectedSize(size + 1)}, walrus.ErrMismatch},
		{"over the max size", 0, 10, 1, []walrus.ReadOption{walrus.WithMaxSize(size - 1)}, walrus.ErrBodyTooLarge},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			rec.fresh(t, s)
			var buf bytes.Buffer
			_, err := c.ReadRange(t.Context(), id, tt.off, tt.length, &buf, tt.opts...)
			if !errors.Is(err, tt.want) || buf.Len() != 0 {
				t.Fatalf("error %v, %d bytes", err, buf.Len())
			}
			settle(t, s)
			if n := len(rec.of(localwalrus.RouteAggregator)); n != tt.requests {
				t.Fatalf("%d requests, want %d", n, tt.requests)
			}
		})
	}
}

// TestReadRangeIgnoredRange: an aggregator that answers 200 with the whole
// blob serves a range only for a small blob; a large one fails over.
func TestReadRangeIgnoredRange(t *testing.T) {
	s := startServer(t, localwalrus.Config{MaxBodySize: 4 << 20})
	c0 := newClient(t, s, walrus.Config{MaxBlobSize: 4 << 20})
	small := bytes.Repeat([]byte("abcdefgh"), 1000)
	large := bytes.Repeat([]byte("ABCDEFGH"), 300_000)
	for _, b := range [][]byte{small, large} {
		if _, err := c0.Store(t.Context(), walrus.BytesBody(b)); err != nil {
			t.Fatal(err)
		}
	}
	// plain serves blobs from s but drops the Range header on the way.
	var plainGets atomic.Int32
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainGets.Add(1)
		r.Header.Del("Range")
		s.ServeHTTP(w, r)
	}))
	defer plain.Close()
	c := newClient(t, s, walrus.Config{Aggregators: []string{plain.URL, s.URL()}})

	var buf bytes.Buffer
	rr, err := c.ReadRange(t.Context(), testBlobID(t, small), 8000-3, 3, &buf)
	if err != nil || buf.String() != "fgh" || rr.Total != 8000 || rr.Attempts != 1 || rr.Aggregator != plain.URL {
		t.Fatalf("small: %q %+v %v", buf.String(), rr, err)
	}
	buf.Reset()
	rr, err = c.ReadRange(t.Context(), testBlobID(t, large), 8, 4, &buf)
	if err != nil || buf.String() != "ABCD" || rr.Attempts != 2 || rr.Aggregator != s.URL() || plainGets.Load() != 2 {
		t.Fatalf("large: %q %+v %v", buf.String(), rr, err)
	}
}

// TestHostileRangeAnswers: 206 answers that do not match the request.
func TestHostileRangeAnswers(t *testing.T) {
	data := []byte("0123456789")
	id := testBlobID(t, data)
	tests := []struct {
		name    string
		handler func(w http.ResponseWriter)
		errText string
	}{
		{"wrong range", func(w http.ResponseWriter) {
			w.Header().Set("Content-Range", "bytes 0-3/10")
			w.WriteHeader(206)
			w.Write(data[:4])
		}, "covers bytes 0-3/10, asked for 2-5"},
		{"no Content-Range", func(w http.ResponseWriter) {
			w.WriteHeader(206)
			w.Write(data[2:6])
		}, "is not a byte range"},
		{"chunked body too long", func(w http.ResponseWriter) {
			w.Header().Set("Content-Range", "bytes 2-5/10")
			w.WriteHeader(206)
			w.Write(data[2:4])
			http.NewResponseController(w).Flush()
			w.Write(data[4:])
		}, "goes on past the 4 bytes announced"},
		{"huge total", func(w http.ResponseWriter) {
			w.Header().Set("Content-Range", "bytes 2-5/999999999999999999")
			w.WriteHeader(206)
			w.Write(data[2:6])
		}, "over the read limit of 16.0 GiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				tt.handler(w)
			}))
			defer srv.Close()
			c, err := walrus.New(walrus.Config{Shards: testShards, Aggregators: []string{srv.URL}, RetryWaitMin: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, err = c.ReadRange(t.Context(), id, 2, 4, &buf)
			if err == nil || !strings.Contains(err.Error(), tt.errText) || walrus.Attempts(err) != 1 || n.Load() != 1 {
				t.Fatalf("error %v after %d requests", err, n.Load())
			}
		})
	}
}

// TestStoreAnswerBounded: a publisher's endless or lying answer ends the
// store at once.
func TestStoreAnswerBounded(t *testing.T) {
	var rec recorded
	s := startServer(t, localwalrus.Config{OnRequest: rec.add})
	c := newClient(t, s, walrus.Config{})
	tests := []struct {
		name  string
		fault localwalrus.Fault
		want  []error
		bound int64
	}{
		{"endless JSON", localwalrus.Fault{Kind: localwalrus.FaultEndless}, []error{walrus.ErrProtocol, walrus.ErrBodyTooLarge}, 1<<20 + slack},
		{"1 TiB JSON", localwalrus.Fault{Kind: localwalrus.FaultEndless, Length: 1 << 40}, []error{walrus.ErrProtocol, walrus.ErrBodyTooLarge}, slack},
		{"short Content-Length", localwalrus.Fault{Kind: localwalrus.FaultLyingLength}, []error{walrus.ErrProtocol}, 1 << 20},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.fresh(t, s)
			s.InjectNext(localwalrus.RoutePublisher, tt.fault)
			_, err := c.Store(t.Context(), walrus.BytesBody([]byte("store "+strconv.Itoa(i))))
			for _, w := range tt.want {
				if !errors.Is(err, w) || walrus.Attempts(err) != 1 {
					t.Fatalf("error %v, want %v", err, w)
				}
			}
			settle(t, s)
			if puts := rec.of(localwalrus.RoutePublisher); len(puts) != 1 || puts[0].BytesOut > tt.bound {
				t.Fatalf("server saw %+v", puts)
			}
		})
	}
}

// TestErrorBodyBounded: an endless error answer is read up to 64 KiB.
func TestErrorBodyBounded(t *testing.T) {
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		chunk := bytes.Repeat([]byte("error "), 10_000)
		for r.Context().Err() == nil {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c, err := walrus.New(walrus.Config{Shards: testShards, Publishers: []string{srv.URL}, Aggregators: []string{srv.URL}, RetryMax: 1, RetryWaitMin: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Store(t.Context(), walrus.BytesBody([]byte("x")))
	var se *walrus.StatusError
	if !errors.As(err, &se) || se.StatusCode != 500 || walrus.Attempts(err) != 2 || len([]rune(se.Message)) > 301 {
		t.Fatalf("store: %v", err)
	}
	_, err = c.Read(t.Context(), testBlobID(t, []byte("x")), io.Discard)
	if !errors.As(err, &se) || se.StatusCode != 500 || walrus.Attempts(err) != 2 {
		t.Fatalf("read: %v", err)
	}
	srv.Close() // waits for the handlers
	if w := written.Load(); w > 4*slack {
		t.Fatalf("the server wrote %d bytes into four error answers", w)
	}
}

// TestRedirects: uploads follow no redirect, so neither the blob nor the
// token reaches another origin; reads follow a few, without credentials
// once off the configured origin.
func TestRedirects(t *testing.T) {
	const token = "bearer-SECRET-token"
	type hit struct{ method, auth string }
	var mu sync.Mutex
	var hitsB []hit
	target := startServer(t, localwalrus.Config{})
	// b is another port of the same host, serving blobs and noting
	// credentials.
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hitsB = append(hitsB, hit{r.Method, r.Header.Get("Authorization")})
		mu.Unlock()
		target.ServeHTTP(w, r)
	}))
	defer b.Close()
	var hitsA atomic.Int32
	var code atomic.Int32
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hitsA.Add(1)
		http.Redirect(w, r, b.URL+r.URL.RequestURI(), int(code.Load()))
	}))
	defer a.Close()
	seenB := func() []hit { mu.Lock(); defer mu.Unlock(); return append([]hit(nil), hitsB...) }

	for _, status := range []int{301, 302, 303, 307, 308} {
		for _, tokens := range []string{"fixed", "jwt"} {
			t.Run(fmt.Sprintf("store %d %s", status, tokens), func(t *testing.T) {
				code.Store(int32(status))
				hitsA.Store(0)
				cfg := walrus.Config{Publishers: []string{a.URL}, RetryWaitMin: time.Millisecond}
				if tokens == "fixed" {
					cfg.BearerToken = token
				} else {
					cfg.TokenSource = walrus.HS256Tokens([]byte("k"), time.Minute, "", nil)
				}
				c, err := walrus.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.Store(t.Context(), walrus.BytesBody([]byte("redirected upload")))
				if !errors.Is(err, walrus.ErrRedirect) || walrus.Attempts(err) != 1 || hitsA.Load() != 1 ||
					!strings.Contains(err.Error(), "redirected to "+b.URL) {
					t.Fatalf("error %v, %d requests", err, hitsA.Load())
				}
				if h := seenB(); len(h) != 0 {
					t.Fatalf("the other origin saw %+v", h)
				}
			})
		}
	}
	t.Run("store to localwalrus redirect fault", func(t *testing.T) {
		c := newClient(t, target, walrus.Config{BearerToken: token})
		target.InjectNext(localwalrus.RoutePublisher, localwalrus.Fault{Kind: localwalrus.FaultRedirect})
		body := []byte("redirected to localhost")
		_, err := c.Store(t.Context(), walrus.BytesBody(body))
		if !errors.Is(err, walrus.ErrRedirect) || !strings.Contains(err.Error(), "http://localhost:") {
			t.Fatalf("error %v", err)
		}
		if _, err := c.Read(t.Context(), testBlobID(t, body), io.Discard); !errors.Is(err, walrus.ErrNotFound) {
			t.Fatalf("the blob was stored: %v", err)
		}
	})

	data := []byte("blob behind a redirect")
	if _, err := newClient(t, target, walrus.Config{}).Store(t.Context(), walrus.BytesBody(data)); err != nil {
		t.Fatal(err)
	}
	t.Run("read follows without credentials", func(t *testing.T) {
		code.Store(307)
		mu.Lock()
		hitsB = nil
		mu.Unlock()
		withUser := strings.Replace(a.URL, "http://", "http://reader:PASSWORD@", 1)
		c, err := walrus.New(walrus.Config{Shards: testShards, Aggregators: []string{withUser}})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		rr, err := c.ReadRange(t.Context(), testBlobID(t, data), 5, 6, &buf)
		if err != nil || buf.String() != "behind" || rr.Attempts != 1 {
			t.Fatalf("%q %+v %v", buf.String(), rr, err)
		}
		if h := seenB(); len(h) != 1 || h[0].auth != "" {
			t.Fatalf("the other origin saw %+v", h)
		}
	})
	t.Run("read redirect loop", func(t *testing.T) {
		var n atomic.Int32
		var loop *httptest.Server
		loop = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			http.Redirect(w, r, loop.URL+r.URL.Path, http.StatusFound)
		}))
		defer loop.Close()
		c, err := walrus.New(walrus.Config{Shards: testShards, Aggregators: []string{loop.URL}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Read(t.Context(), testBlobID(t, data), io.Discard)
		if !errors.Is(err, walrus.ErrRedirect) || walrus.Attempts(err) != 1 || n.Load() != walrus.MaxRedirects+1 {
			t.Fatalf("error %v after %d requests", err, n.Load())
		}
	})
	t.Run("read of localwalrus redirect fault", func(t *testing.T) {
		c := newClient(t, target, walrus.Config{})
		target.InjectNext(localwalrus.RouteAggregator, localwalrus.Fault{Kind: localwalrus.FaultRedirect})
		var buf bytes.Buffer
		if _, err := c.Read(t.Context(), testBlobID(t, data), &buf); err != nil || !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("%q %v", buf.Bytes(), err)
		}
	})
}

// TestNoSecretsLeak configures endpoints with keys in their path, userinfo
// and query, drives every failure it can, and looks for the keys in every
// error, log line, attempt report and result.
func TestNoSecretsLeak(t *testing.T) {
	secrets := []string{"PATHKEY", "USERNAME", "PASSWORD", "QUERYKEY"}
	var logs syncBuffer
	var mu sync.Mutex
	var seen []string // every error text, attempt and result
	note := func(v ...any) {
		mu.Lock()
		defer mu.Unlock()
		for _, x := range v {
			seen = append(seen, fmt.Sprintf("%v | %+v", x, x))
		}
	}
	check := func(t *testing.T) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		all := strings.Join(seen, "\n") + "\n" + logs.String()
		for _, s := range secrets {
			if strings.Contains(all, s) {
				for _, line := range strings.Split(all, "\n") {
					if strings.Contains(line, s) {
						t.Errorf("%s leaked: %s", s, line)
					}
				}
			}
		}
	}
	withSecrets := func(base string) string {
		return strings.Replace(base, "http://", "http://USERNAME:PASSWORD@", 1) + "/v3/PATHKEY"
	}

	// A working service behind the key path, a gateway that echoes the
	// path into its errors, and misbehaving ones.
	s := startServer(t, localwalrus.Config{})
	good := httptest.NewServer(http.StripPrefix("/v3/PATHKEY", s))
	defer good.Close()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut:
			w.Header().Set("Content-Type", "application/json")
			// 200 with nonsense quoting the request.
			fmt.Fprintf(w, `{"unexpected": %q, "padding": %q}`, r.URL.String(), strings.Repeat("x", 190))
		case strings.Contains(r.URL.Path, "notfound"):
			http.Error(w, "Cannot GET "+r.URL.String()+" (no route)", http.StatusNotFound)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"error":{"code":503,"status":"UNAVAILABLE","message":"upstream %s is down","details":[{"@type":"ErrorInfo","reason":"%s"}]}}`,
				strings.Repeat("y", 280)+r.URL.Path, r.URL.Path)
		}
	}))
	defer echo.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://USERNAME:PASSWORD@"+r.Host+r.URL.Path+"?token=QUERYKEY", http.StatusFound)
	}))
	defer redirector.Close()
	dead := deadURL(t)

	newC := func(t *testing.T, endpoint string, cfg walrus.Config) *walrus.Client {
		cfg.Publishers = []string{withSecrets(endpoint)}
		cfg.Aggregators = []string{withSecrets(endpoint)}
		cfg.Logger = logs.logger()
		cfg.OnAttempt = func(a walrus.Attempt) { note(a, a.Err) }
		if cfg.RetryWaitMin == 0 {
			cfg.RetryWaitMin, cfg.RetryWaitMax = time.Millisecond, 2*time.Millisecond
		}
		if cfg.RetryMax == 0 {
			cfg.RetryMax = 1
		}
		cfg.Shards = testShards
		c, err := walrus.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		note(c.Publishers(), c.Aggregators())
		return c
	}
	blob := []byte("a blob for the leak test")
	id := testBlobID(t, blob)
	expectErr := func(t *testing.T, what string, err error, sentinel error) {
		t.Helper()
		if err == nil || (sentinel != nil && !errors.Is(err, sentinel)) {
			t.Errorf("%s: error %v, want %v", what, err, sentinel)
		}
		note(err)
		for e := err; e != nil; e = errors.Unwrap(e) {
			note(e)
		}
		var se *walrus.StatusError
		if errors.As(err, &se) {
			note(se.URL, se.Message, se.Status, se.Reason)
		}
	}

	t.Run("success", func(t *testing.T) {
		c := newC(t, good.URL, walrus.Config{})
		res, err := c.Store(t.Context(), walrus.BytesBody(blob))
		if err != nil {
			t.Fatal(err)
		}
		note(res)
		rr, err := c.Verify(t.Context(), res.BlobID, sha256.Sum256(blob), int64(len(blob)))
		if err != nil {
			t.Fatal(err)
		}
		note(rr)
		if res.Publisher != good.URL || rr.Aggregator != good.URL {
			t.Errorf("results name %q and %q, want %q", res.Publisher, rr.Aggregator, good.URL)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		c := newC(t, dead, walrus.Config{})
		_, err := c.Store(t.Context(), walrus.BytesBody(blob))
		expectErr(t, "store", err, nil)
		_, err = c.Read(t.Context(), id, io.Discard)
		expectErr(t, "read", err, nil)
	})
	t.Run("operation timeout", func(t *testing.T) {
		c := newC(t, dead, walrus.Config{RetryMax: 5, RetryWaitMin: time.Hour, RetryWaitMax: time.Hour, Timeout: 100 * time.Millisecond})
		_, err := c.Read(t.Context(), id, io.Discard)
		expectErr(t, "read", err, walrus.ErrTimeout)
	})
	t.Run("status errors echoing the path", func(t *testing.T) {
		c := newC(t, echo.URL, walrus.Config{})
		_, err := c.Read(t.Context(), id, io.Discard)
		expectErr(t, "503", err, nil)
		_, err = c.Read(t.Context(), "notfound"+strings.Repeat("A", 35), io.Discard)
		expectErr(t, "404", err, walrus.ErrNotFound)
		_, err = c.Store(t.Context(), walrus.BytesBody(blob))
		expectErr(t, "bad JSON", err, walrus.ErrProtocol)
	})
	t.Run("attempt timeout", func(t *testing.T) {
		c := newC(t, good.URL, walrus.Config{AttemptTimeout: 50 * time.Millisecond, RetryMax: -1})
		s.InjectNext(localwalrus.RouteAggregator, localwalrus.Fault{Delay: time.Minute})
		_, err := c.Read(t.Context(), id, io.Discard)
		expectErr(t, "read", err, walrus.ErrAttemptTimeout)
	})
	t.Run("redirects", func(t *testing.T) {
		c := newC(t, redirector.URL, walrus.Config{})
		_, err := c.Store(t.Context(), walrus.BytesBody(blob))
		expectErr(t, "store", err, walrus.ErrRedirect)
		_, err = c.Read(t.Context(), id, io.Discard)
		expectErr(t, "read", err, walrus.ErrRedirect)
	})
	t.Run("too large", func(t *testing.T) {
		c := newC(t, good.URL, walrus.Config{})
		s.InjectNext(localwalrus.RouteAggregator, localwalrus.Fault{Kind: localwalrus.FaultEndless})
		_, err := c.Read(t.Context(), id, io.Discard, walrus.WithMaxSize(1<<16))
		expectErr(t, "read", err, walrus.ErrBodyTooLarge)
		_, err = c.ReadToFile(t.Context(), id, filepath.Join(t.TempDir(), "x"), walrus.WithExpectedSize(1<<60), walrus.WithMaxSize(1<<61))
		expectErr(t, "no space", err, walrus.ErrNoSpace)
	})
	t.Run("bad configuration", func(t *testing.T) {
		for _, u := range []string{
			"http://USERNAME:PASSWORD@127.0.0.1:1/v3/PATHKEY?apikey=QUERYKEY",
			"ftp://USERNAME:PASSWORD@127.0.0.1/v3/PATHKEY",
			"http://USERNAME:PASSWORD@127.0.0.1:1/v3/PATHKEY#QUERYKEY",
			"http://USERNAME:PASSWORD@[::1/v3/PATHKEY?QUERYKEY",
			"http://USERNAME:PASSWORD@127.0.0.1:1/v3/PATHKEY%zzQUERYKEY",
		} {
			_, err := walrus.New(walrus.Config{Shards: testShards, Publishers: []string{u}, Aggregators: []string{u}})
			expectErr(t, u, err, walrus.ErrConfig)
		}
	})
	check(t)
	if !strings.Contains(logs.String(), "retrying") {
		t.Fatalf("no retry was logged:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer for a logger shared by goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
