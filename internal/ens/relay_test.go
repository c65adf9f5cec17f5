package ens

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/rpc"
)

// wsRelay serves JSON-RPC over websocket on 127.0.0.1 and relays every
// request the client makes to the devchain's HTTP endpoint: the devchain
// serves HTTP only, and this is go-ethereum's own websocket server, so the
// client under test speaks real websocket JSON-RPC. drop cuts every open
// connection; down makes the upgrade fail with 503.
type wsRelay struct {
	srv      *httptest.Server
	upstream *rpc.Client
	mu       sync.Mutex
	cur      *rpc.Server
	down     atomic.Bool
	conns    atomic.Int64 // websocket connections accepted
}

func newWSRelay(t testing.TB, upstreamURL string) *wsRelay {
	t.Helper()
	up, err := rpc.Dial(upstreamURL)
	if err != nil {
		t.Fatal(err)
	}
	r := &wsRelay{upstream: up}
	r.cur = r.newServer(t)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		r.conns.Add(1)
		r.mu.Lock()
		s := r.cur
		r.mu.Unlock()
		s.WebsocketHandler([]string{"*"}).ServeHTTP(w, req)
	}))
	t.Cleanup(func() {
		r.srv.Close()
		r.mu.Lock()
		r.cur.Stop()
		r.mu.Unlock()
		up.Close()
	})
	return r
}

func (r *wsRelay) newServer(t testing.TB) *rpc.Server {
	s := rpc.NewServer()
	if err := s.RegisterName("eth", &ethRelay{c: r.upstream}); err != nil {
		t.Fatal(err)
	}
	return s
}

// URL is the relay's ws:// endpoint with path and query appended.
func (r *wsRelay) URL(suffix string) string { return "ws" + r.srv.URL[len("http"):] + suffix }

// drop closes every open websocket connection; new ones are served.
func (r *wsRelay) drop(t testing.TB) {
	r.mu.Lock()
	old := r.cur
	r.cur = r.newServer(t)
	r.mu.Unlock()
	old.Stop()
}

// ethRelay has the eth_ methods the ENS client calls, each passed on
// verbatim.
type ethRelay struct{ c *rpc.Client }

func (e *ethRelay) fwd(ctx context.Context, method string, args ...any) (json.RawMessage, error) {
	var out json.RawMessage
	err := e.c.CallContext(ctx, &out, method, args...)
	return out, err
}

func (e *ethRelay) ChainId(ctx context.Context) (json.RawMessage, error) {
	return e.fwd(ctx, "eth_chainId")
}

func (e *ethRelay) GetCode(ctx context.Context, a, b json.RawMessage) (json.RawMessage, error) {
	return e.fwd(ctx, "eth_getCode", a, b)
}

func (e *ethRelay) Call(ctx context.Context, a, b json.RawMessage) (json.RawMessage, error) {
	return e.fwd(ctx, "eth_call", a, b)
}

func (e *ethRelay) GetBlockByNumber(ctx context.Context, a, b json.RawMessage) (json.RawMessage, error) {
	return e.fwd(ctx, "eth_getBlockByNumber", a, b)
}

func (e *ethRelay) EstimateGas(ctx context.Context, a json.RawMessage) (json.RawMessage, error) {
	return e.fwd(ctx, "eth_estimateGas", a)
}

func (e *ethRelay) MaxPriorityFeePerGas(ctx context.Context) (json.RawMessage, error) {
	return e.fwd(ctx, "eth_maxPriorityFeePerGas")
}

func (e *ethRelay) GetTransactionCount(ctx context.Context, a, b json.RawMessage) (json.RawMessage, error) {
	return e.fwd(ctx, "eth_getTransactionCount", a, b)
}

func (e *ethRelay) SendRawTransaction(ctx context.Context, a json.RawMessage) (json.RawMessage, error) {
	return e.fwd(ctx, "eth_sendRawTransaction", a)
}

func (e *ethRelay) GetTransactionReceipt(ctx context.Context, a json.RawMessage) (json.RawMessage, error) {
	return e.fwd(ctx, "eth_getTransactionReceipt", a)
}
