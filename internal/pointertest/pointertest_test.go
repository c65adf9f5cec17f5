package pointertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/wait"
)

// TestChainProxy: reads pass unless the proxy hangs; transactions follow
// the mode, and a held one whose sender gives up never reaches the chain.
func TestChainProxy(t *testing.T) {
	var reached atomic.Int64
	chain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":"0x1"}`))
	}))
	defer chain.Close()
	p := NewChainProxy(t, chain.URL)
	post := func(ctx context.Context, method string) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":[]}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	const tx, read = "eth_sendRawTransaction", "eth_call"
	expect := func(method string, status int, want Counts, chainSaw int64) {
		t.Helper()
		if got, err := post(t.Context(), method); err != nil || got != status {
			t.Fatalf("%s: %d, %v; want %d", method, got, err, status)
		}
		if c := p.Counts(); c != want || reached.Load() != chainSaw {
			t.Fatalf("after %s: %+v, chain saw %d; want %+v, %d", method, c, reached.Load(), want, chainSaw)
		}
	}
	expect(tx, 200, Counts{Sent: 1}, 1)
	p.Refuse()
	expect(read, 200, Counts{Sent: 1}, 2)
	expect(tx, 503, Counts{Refused: 1, Sent: 1}, 2)

	// Held until Pass, then forwarded.
	p.Hold()
	done := make(chan int)
	go func() { code, _ := post(context.Background(), tx); done <- code }()
	wait.For(t, "the proxy to hold a transaction", func() bool { return p.Counts().Held == 1 })
	expect(read, 200, Counts{Refused: 1, Held: 1, Sent: 1}, 3)
	p.Pass()
	if code := <-done; code != 200 {
		t.Fatalf("released transaction: %d", code)
	}
	if c := p.Counts(); c.Sent != 2 || reached.Load() != 4 {
		t.Fatalf("after release: %+v, chain saw %d", c, reached.Load())
	}

	// A held transaction whose sender gives up is dropped.
	p.Hold()
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		if !wait.Until(wait.Deadline, func() bool { return p.Counts().Held == 2 }) {
			t.Error("timed out waiting for the proxy to hold a second transaction")
		}
		cancel()
	}()
	if _, err := post(ctx, tx); err == nil {
		t.Fatal("a cancelled held transaction was answered")
	}
	wait.For(t, "the proxy to drop the abandoned transaction", func() bool { return p.Counts().Dropped == 1 })
	p.Pass()
	expect(read, 200, Counts{Refused: 1, Held: 2, Dropped: 1, Sent: 2}, 5)

	p.Delay(20 * time.Millisecond)
	expect(tx, 200, Counts{Refused: 1, Held: 2, Dropped: 1, Sent: 3}, 6)

	// Hang holds reads too, until the mode changes; nothing reaches the
	// chain meanwhile.
	p.Hang()
	got := make(chan int, 2)
	for _, m := range []string{read, tx} {
		go func() { code, _ := post(context.Background(), m); got <- code }()
	}
	wait.For(t, "both requests to hang", func() bool { return p.Counts().Hung == 2 })
	if reached.Load() != 6 {
		t.Fatalf("the chain saw %d requests while the proxy hung", reached.Load())
	}
	p.Pass()
	for range 2 {
		if code := <-got; code != 200 {
			t.Fatalf("released request: %d", code)
		}
	}
	if c := p.Counts(); c.Hung != 2 || c.Sent != 4 || reached.Load() != 8 {
		t.Fatalf("after the hang: %+v, chain saw %d", c, reached.Load())
	}
}
