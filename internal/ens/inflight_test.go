package ens

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hermesd/hermesd/internal/wait"
)

// TestNodeBoundsInFlight: a burst of requests far above maxInFlight (a
// thousand agents reading their pointers back at start) reaches the node
// at most maxInFlight at a time, over at most that many connections, and
// a second burst reuses them instead of dialling again.
func TestNodeBoundsInFlight(t *testing.T) {
	t.Parallel()
	var (
		inFlight, peak, conns atomic.Int32
		gate                  = make(chan struct{}, 3*maxInFlight)
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select {
		case <-gate:
		case <-r.Context().Done():
		}
		inFlight.Add(-1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":"0x539"}`, req.ID)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := New(t.Context(), Config{RPCURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	burst := func(round int) {
		const n = 3 * maxInFlight
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				id, err := c.node.ChainID(t.Context())
				if err == nil && id.Int64() != 1337 {
					err = fmt.Errorf("chain id %v", id)
				}
				errs <- err
			})
		}
		// Let them through one at a time once the node is full: none may
		// arrive beside the maxInFlight already there.
		wait.For(t, fmt.Sprintf("round %d: %d requests at the node", round, maxInFlight), func() bool { return inFlight.Load() >= maxInFlight })
		for range n {
			gate <- struct{}{}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if p := peak.Load(); p != maxInFlight {
			t.Fatalf("round %d: %d requests in flight at once, want at most (and here exactly) %d", round, p, maxInFlight)
		}
	}
	burst(1)
	first := conns.Load()
	if first > maxInFlight {
		t.Fatalf("%d connections for %d requests in flight", first, maxInFlight)
	}
	burst(2)
	if again := conns.Load(); again != first {
		t.Errorf("the second burst dialled %d connections more: the idle ones were not kept", again-first)
	}

	// A full node: a caller who gives up while waiting for a slot gets its
	// own cancellation back, not a node error.
	var held sync.WaitGroup
	for range maxInFlight {
		held.Go(func() { c.node.ChainID(t.Context()) })
	}
	wait.For(t, "a full node", func() bool { return inFlight.Load() == maxInFlight })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.node.ChainID(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Errorf("waiting for a slot, cancelled: %v", err)
	}
	for range maxInFlight {
		gate <- struct{}{}
	}
	held.Wait()
}
