package ens

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/hermesd/hermesd/internal/redact"
)

// node is the client's only way to the Ethereum node. Every request goes
// through do: bounded by the RPC timeout, and failing with a *nodeError,
// whose text has the RPC URL's secrets scrubbed out and which says whether
// the node could not be reached (ErrUnavailable) or answered with an error.
//
// With an RPC URL the connection is made on first use, not by New, and a
// websocket connection that failed is dropped and dialled again by the next
// request (go-ethereum's client reconnects only when a write fails, and a
// request written to a half-dead socket waits for its deadline).
type node struct {
	fixed   Backend // Config.Backend: used as it is, never closed
	url     string
	ws      bool
	origin  string // scheme://host[:port] of url, for messages
	scrub   *redact.Scrubber
	timeout time.Duration
	log     *slog.Logger

	dialing chan struct{} // one dial at a time
	slots   chan struct{} // requests in flight, at most maxInFlight
	mu      sync.Mutex
	ec      *ethclient.Client // nil until dialled, and after a websocket broke
	closed  bool
}

// maxInFlight bounds the requests one node has in flight. A daemon of a
// thousand agents reads every pointer back at start, all at once; unbounded,
// each request dialled a connection of its own (~800 sockets at once, the
// standard transport keeping 2 of them idle after) against a provider that
// rate-limits far lower, and held their buffers and goroutines (~20 MB of
// the 1,000-agent start-up peak). The transport keeps as many idle.
const maxInFlight = 16

// maxResponse bounds one answer of the node (an eth_call result, a block
// header, a receipt, an error page). A larger one fails the request as
// unavailable: a node that sends it is not one to trust with anything.
const maxResponse = 8 << 20

var errResponseTooLarge = fmt.Errorf("response larger than %d bytes", maxResponse)

// errClosed is returned after Close.
var errClosed = errors.New("ens: client closed")

func (n *node) backend(ctx context.Context) (Backend, error) {
	if n.fixed != nil {
		return n.fixed, nil
	}
	if ec, err := n.current(); ec != nil || err != nil {
		return ec, err
	}
	select {
	case n.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-n.dialing }()
	if ec, err := n.current(); ec != nil || err != nil {
		return ec, err
	}
	opts := []rpc.ClientOption{rpc.WithWebsocketMessageSizeLimit(maxResponse)}
	if !n.ws {
		base := http.DefaultTransport
		if t, ok := base.(*http.Transport); ok {
			t = t.Clone() // its own connection pool
			t.MaxIdleConnsPerHost = maxInFlight
			base = t
		}
		opts = append(opts, rpc.WithHTTPClient(&http.Client{
			Transport: limitTransport{base},
			// JSON-RPC endpoints do not redirect; following one would
			// turn the POST into a GET to wherever the answer says.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}))
	}
	rc, err := rpc.DialOptions(ctx, n.url, opts...)
	if err != nil {
		return nil, &dialError{err}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		rc.Close()
		return nil, errClosed
	}
	n.ec = ethclient.NewClient(rc)
	if n.ws {
		n.log.DebugContext(ctx, "ens: connected", "rpc", n.origin)
	}
	return n.ec, nil
}

func (n *node) current() (*ethclient.Client, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errClosed
	}
	return n.ec, nil
}

// broken drops a websocket connection that failed, if it is still the
// current one, so that the next request dials afresh.
func (n *node) broken(b Backend) {
	ec, ok := b.(*ethclient.Client)
	if !ok || !n.ws || n.fixed != nil {
		return
	}
	n.mu.Lock()
	if n.ec != ec {
		n.mu.Unlock()
		return
	}
	n.ec = nil
	n.mu.Unlock()
	ec.Close()
	n.log.Debug("ens: connection dropped", "rpc", n.origin)
}

func (n *node) close() {
	n.mu.Lock()
	ec := n.ec
	n.ec, n.closed = nil, true
	n.mu.Unlock()
	if ec != nil {
		ec.Close()
	}
}

// do runs one request against the node.
func (n *node) do(ctx context.Context, method string, f func(context.Context, Backend) error) error {
	// A slot first: waiting for one is the daemon's queue, not the node's
	// time, so RPCTimeout starts after it.
	select {
	case n.slots <- struct{}{}:
	case <-ctx.Done():
		return &nodeError{method: method, origin: n.origin, msg: n.clean(ctx.Err().Error()), cause: ctx.Err()}
	}
	defer func() { <-n.slots }()
	rctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	b, err := n.backend(rctx)
	if err == nil {
		if err = f(rctx, b); err == nil {
			return nil
		}
	}
	e := &nodeError{method: method, origin: n.origin, msg: n.clean(err.Error())}
	var de rpc.DataError
	if errors.As(err, &de) {
		// A revert's data (hex), which CCIP-read and error reports decode;
		// anything else a node puts there is not kept.
		if s, ok := de.ErrorData().(string); ok && len(s) <= 2*maxResponse+2 {
			e.data = s
		}
	}
	switch {
	case ctx.Err() != nil:
		// The caller's deadline or cancellation, not the node's fault.
		e.cause = ctx.Err()
	case errors.Is(err, errClosed):
		e.cause = errClosed
	case rctx.Err() != nil:
		e.unavailable = true
		e.msg = fmt.Sprintf("no answer within %s", n.timeout)
	case unreachable(err):
		e.unavailable = true
	case errors.Is(err, ethereum.NotFound):
		e.cause = ethereum.NotFound
	}
	if e.unavailable {
		n.broken(b)
	}
	return e
}

// call is do for a request with a result.
func call[T any](n *node, ctx context.Context, method string, f func(Backend, context.Context) (T, error)) (T, error) {
	var v T
	err := n.do(ctx, method, func(ctx context.Context, b Backend) (err error) {
		v, err = f(b, ctx)
		return err
	})
	return v, err
}

// The requests the client makes; node implements bind.ContractCaller (for
// go-ens's bindings) and nonceSource with them.

func (n *node) ChainID(ctx context.Context) (*big.Int, error) {
	return call(n, ctx, "eth_chainId", Backend.ChainID)
}

func (n *node) CodeAt(ctx context.Context, addr common.Address, block *big.Int) ([]byte, error) {
	return call(n, ctx, "eth_getCode", func(b Backend, ctx context.Context) ([]byte, error) { return b.CodeAt(ctx, addr, block) })
}

func (n *node) CallContract(ctx context.Context, msg ethereum.CallMsg, block *big.Int) ([]byte, error) {
	return call(n, ctx, "eth_call", func(b Backend, ctx context.Context) ([]byte, error) { return b.CallContract(ctx, msg, block) })
}

func (n *node) HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error) {
	return call(n, ctx, "eth_getBlockByNumber", func(b Backend, ctx context.Context) (*types.Header, error) { return b.HeaderByNumber(ctx, number) })
}

func (n *node) SuggestGasTipCap(ctx context.Context) (*big.Int, error) {
	return call(n, ctx, "eth_maxPriorityFeePerGas", Backend.SuggestGasTipCap)
}

func (n *node) EstimateGas(ctx context.Context, msg ethereum.CallMsg) (uint64, error) {
	return call(n, ctx, "eth_estimateGas", func(b Backend, ctx context.Context) (uint64, error) { return b.EstimateGas(ctx, msg) })
}

func (n *node) PendingNonceAt(ctx context.Context, addr common.Address) (uint64, error) {
	return call(n, ctx, "eth_getTransactionCount", func(b Backend, ctx context.Context) (uint64, error) { return b.PendingNonceAt(ctx, addr) })
}

func (n *node) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	return n.do(ctx, "eth_sendRawTransaction", func(ctx context.Context, b Backend) error { return b.SendTransaction(ctx, tx) })
}

// errNoTxLookup: the backend cannot look a transaction up by hash.
var errNoTxLookup = errors.New("ens: the backend cannot look up transactions")

// TransactionKnown reports whether the node knows the transaction, mined
// or waiting in its pool.
func (n *node) TransactionKnown(ctx context.Context, hash common.Hash) (bool, error) {
	return call(n, ctx, "eth_getTransactionByHash", func(b Backend, ctx context.Context) (bool, error) {
		tb, ok := b.(interface {
			TransactionByHash(context.Context, common.Hash) (*types.Transaction, bool, error)
		})
		if !ok {
			return false, errNoTxLookup
		}
		_, _, err := tb.TransactionByHash(ctx, hash)
		if errors.Is(err, ethereum.NotFound) {
			return false, nil
		}
		return err == nil, err
	})
}

func (n *node) TransactionReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error) {
	return call(n, ctx, "eth_getTransactionReceipt", func(b Backend, ctx context.Context) (*types.Receipt, error) { return b.TransactionReceipt(ctx, hash) })
}

// nodeError is a failed request. Its text is scrubbed and cut to one
// line; it matches ErrUnavailable when the node could not be reached, and
// otherwise unwraps only to a sentinel the client branches on, never to
// the original error (whose text may hold the RPC URL).
type nodeError struct {
	method      string
	origin      string
	msg         string
	unavailable bool
	cause       error  // context.Canceled, context.DeadlineExceeded, ethereum.NotFound, errClosed or nil
	data        string // revert data ("0x…") of an eth_call that reverted
}

// ErrorData makes a revert's data available as rpc.DataError does (nil when
// there is none).
func (e *nodeError) ErrorData() any {
	if e.data == "" {
		return nil
	}
	return e.data
}

func (e *nodeError) Error() string {
	if e.unavailable {
		return fmt.Sprintf("%s: chain unreachable at %s: %s", e.method, e.origin, e.msg)
	}
	return e.method + ": " + e.msg
}

func (e *nodeError) Is(target error) bool { return target == ErrUnavailable && e.unavailable }
func (e *nodeError) Unwrap() error        { return e.cause }

// dialError marks a failed dial: whatever the reason, the node was not
// reached.
type dialError struct{ err error }

func (e *dialError) Error() string { return "connect: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// unreachable reports whether err means the node was not reached or did
// not answer usably: network errors, a cut connection, an HTTP 5xx, 408 or
// 429 (the provider is down or rate-limits), a provider's rate-limit code,
// an answer that is not JSON-RPC at all. Errors the node answered with
// (a revert, a bad nonce, 401 for a wrong API key) are not.
func unreachable(err error) bool {
	var (
		de  *dialError
		ne  net.Error
		he  rpc.HTTPError
		se  *json.SyntaxError
		re  rpc.Error
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &de), errors.As(err, &ne), errors.As(err, &se), errors.As(err, &ute):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, errResponseTooLarge),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed),
		errors.Is(err, rpc.ErrClientQuit): // a websocket dropped under a request in flight
		return true
	case errors.As(err, &he):
		return he.StatusCode >= 500 || he.StatusCode == http.StatusTooManyRequests || he.StatusCode == http.StatusRequestTimeout
	case errors.As(err, &re) && re.ErrorCode() == -32005: // "limit exceeded" (EIP-1474)
		return true
	}
	// go-ethereum's unexported "connection lost" and "client reconnected",
	// a websocket closed by the server (gorilla's CloseError) and body
	// limits met inside a decoder arrive as text only.
	msg := err.Error()
	for _, s := range []string{"connection lost", "client reconnected", "websocket: close ", errResponseTooLarge.Error()} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// maxErrText bounds the text a node's error contributes (a 5xx page can
// be anything).
const maxErrText = 300

// clean makes a node's error text fit for an error and a log line: no
// secret of the RPC URL, valid UTF-8, no control characters, one line, at
// most maxErrText bytes. Secrets go first, so no cut can split one.
func (n *node) clean(s string) string {
	return oneLine(n.scrub.String(s), maxErrText)
}

func oneLine(s string, max int) string {
	s = strings.ToValidUTF8(s, "�")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// limitTransport cuts every response body off at maxResponse.
type limitTransport struct{ base http.RoundTripper }

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxResponse + 1}
	return resp, nil
}

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left <= 0 {
		return n, errResponseTooLarge
	}
	return n, err
}
