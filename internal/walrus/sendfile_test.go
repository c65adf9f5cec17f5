//go:build linux

package walrus

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/localwalrus"
)

// pacedBody lets a handler read a request body only 32 KiB per tick.
type pacedBody struct {
	io.ReadCloser
	tick <-chan time.Time
}

func (b pacedBody) Read(p []byte) (int, error) {
	<-b.tick
	return b.ReadCloser.Read(p[:min(len(p), 32<<10)])
}

// smallBufListener gives accepted connections a small receive buffer, so
// that a sender waits on the reader.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(16 << 10)
	}
	return c, err
}

// TestStoreFileSendfile: a file body goes out with sendfile(2) over plain
// TCP, its bytes counted from the file's offset; and an upload that makes
// progress only inside sendfile, slower than the idle timeout allows
// between reads, is not taken for a stall: the watchdog probes the file's
// offset.
func TestStoreFileSendfile(t *testing.T) {
	srv, err := localwalrus.New(localwalrus.Config{Dir: t.TempDir(), MaxBodySize: 64 << 20, Shards: 100})
	if err != nil {
		t.Fatal(err)
	}
	var paced, stall atomic.Bool
	release := make(chan struct{}) // closed when the stalled upload has failed
	ticker := time.NewTicker(5 * time.Millisecond)
	defer ticker.Stop()
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if paced.Load() && r.Method == http.MethodPut {
			r.Body = pacedBody{r.Body, ticker.C}
		}
		if stall.Load() && r.Method == http.MethodPut {
			// Reads nothing until the client gave up (the server notices
			// a closed connection only once the body is read).
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		srv.ServeHTTP(w, r)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs.Listener = smallBufListener{ln}
	hs.Start()
	defer hs.Close()

	// The paced upload (32 KiB per 5 ms tick: 20 MiB in about 3.3 s) runs
	// past the idle timeout while making progress every tick; the timeout
	// leaves a loaded machine room for scheduling pauses far longer than a
	// tick. The read-back is not under test: its client keeps the default
	// idle timeout.
	const idle = 1500 * time.Millisecond
	var mu sync.Mutex
	var attempts []Attempt
	c, err := New(Config{Publishers: []string{hs.URL}, Aggregators: []string{hs.URL}, MaxBlobSize: 64 << 20, Shards: 100,
		IdleTimeout: idle, RetryWaitMin: time.Millisecond, RetryWaitMax: time.Millisecond, RetryMax: -1,
		OnAttempt: func(a Attempt) { mu.Lock(); attempts = append(attempts, a); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := New(Config{Publishers: []string{hs.URL}, Aggregators: []string{hs.URL}, MaxBlobSize: 64 << 20, Shards: 100})
	if err != nil {
		t.Fatal(err)
	}
	var viaFile atomic.Int64
	testHookFileSent = func(n int64) { viaFile.Add(n) }
	defer func() { testHookFileSent = nil }()

	for _, tc := range []struct {
		name  string
		size  int
		paced bool
	}{
		{"fast", 8 << 20, false},
		{"paced past the idle timeout", 20 << 20, true},
	} {
		if tc.paced && RaceEnabled {
			// Pacing is timing, not concurrency: the plain pass runs it (35 s
			// of waiting).
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			content := make([]byte, tc.size)
			for i := range content {
				content[i] = byte(rand.N(256))
			}
			path := filepath.Join(t.TempDir(), "blob")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			body, err := FileBody(path)
			if err != nil {
				t.Fatal(err)
			}
			viaFile.Store(0)
			mu.Lock()
			attempts = nil
			mu.Unlock()
			paced.Store(tc.paced)
			start := time.Now()
			res, err := c.Store(t.Context(), body)
			paced.Store(false)
			if err != nil {
				t.Fatalf("store: %v", err)
			}
			if tc.paced && time.Since(start) < idle {
				t.Logf("the paced upload took only %v: the idle timeout was not exercised", time.Since(start))
			}
			var got bytes.Buffer
			if _, err := reader.Read(t.Context(), res.BlobID, &got); err != nil || !bytes.Equal(got.Bytes(), content) {
				t.Fatalf("read back %d bytes, %v", got.Len(), err)
			}
			if v := viaFile.Load(); v < int64(tc.size)/2 {
				t.Errorf("sendfile moved %d of %d bytes", v, tc.size)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(attempts) == 0 || attempts[0].Op != "store" || attempts[0].Bytes != int64(tc.size) || attempts[0].Err != nil {
				t.Errorf("attempts %+v, want one store of %d bytes", attempts, tc.size)
			}
		})
	}

	// A server that stops reading: the watchdog ends the attempt and says
	// the upload stalled.
	t.Run("stalled", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "blob")
		if err := os.WriteFile(path, make([]byte, 20<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		body, err := FileBody(path)
		if err != nil {
			t.Fatal(err)
		}
		stall.Store(true)
		defer stall.Store(false)
		_, err = c.Store(t.Context(), body)
		close(release)
		if !errors.Is(err, ErrAttemptTimeout) || !strings.Contains(err.Error(), "upload stalled for "+idle.String()) {
			t.Fatalf("got %v, want the upload stalled", err)
		}
	})
}
