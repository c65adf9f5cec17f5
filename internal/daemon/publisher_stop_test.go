package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/wait"
)

// receiptGate is a JSON-RPC endpoint in front of a chain that, while
// closed, holds every eth_getTransactionReceipt until its caller gives up:
// a pointer transaction is sent and mined, and its writer is still waiting
// for the receipt when the daemon stops. A request given up opens the gate.
type receiptGate struct {
	closed  atomic.Bool
	waiting atomic.Int32
	srv     *httptest.Server
}

func newReceiptGate(t *testing.T, to string) *receiptGate {
	t.Helper()
	u, err := url.Parse(to)
	if err != nil {
		t.Fatal(err)
	}
	g := &receiptGate{}
	rp := httputil.NewSingleHostReverseProxy(u)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(b))
		if g.closed.Load() && bytes.Contains(b, []byte("eth_getTransactionReceipt")) {
			g.waiting.Add(1)
			<-r.Context().Done()
			g.closed.Store(false)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// lockedBuffer is a log shared by the daemon's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStopInterruptsPublishQuietly: a stop that cancels a pointer write
// in flight is not a failed publish — no error line, no failure counted,
// no backoff — and the shutdown flush publishes the pointer.
func TestStopInterruptsPublishQuietly(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
	seedBrain(t, w.brain("alpha"))
	gate := newReceiptGate(t, w.dn.Chain.URL())
	cfg := w.config(func(c *config.Config) { c.Chain.RPC = gate.srv.URL })
	var logs lockedBuffer
	d := w.startWith(cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	first := published(t, d, "alpha")

	gate.closed.Store(true)
	writeFile(t, filepath.Join(w.brain("alpha"), "skills/new.md"), "a new skill\n", 0o644)
	wait.For(t, "a pointer write waiting for its receipt", func() bool { return gate.waiting.Load() > 0 })
	a, _ := d.Agent("alpha")
	second := a.Status().Last.BlobID
	if second == first {
		t.Fatal("no second snapshot")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatalf("Close: %v\n%s", err, logs.String())
	}
	if got := readPointer(t, w, "alpha.hermes.eth"); got != second {
		t.Errorf("the record names %s after the stop, want %s", got, second)
	}
	out := logs.String()
	for _, bad := range []string{"level=ERROR", "pointer publish failed"} {
		if strings.Contains(out, bad) {
			t.Errorf("the stop logged %q:\n%s", bad, out)
		}
	}
	if n := d.metrics.failures.get("alpha", "publish"); n != 0 {
		t.Errorf("%v publish failures counted", n)
	}
	if !strings.Contains(out, "pointer publish interrupted by the stop") {
		t.Errorf("the interruption is not in the debug log:\n%s", out)
	}
}
