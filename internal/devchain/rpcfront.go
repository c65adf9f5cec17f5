package devchain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/rpc"
)

// HTTP limits of the JSON-RPC endpoint: go-ethereum's node defaults.
const (
	httpBodyLimit = 5 << 20
	// maxResponse bounds a response held back while a block is made
	// durable (node.DefaultConfig.BatchResponseMaxSize is 25 MB).
	maxResponse = 64 << 20
)

// front serves the chain's JSON-RPC over HTTP on 127.0.0.1. It replaces
// go-ethereum's node HTTP server so that, for a persistent chain, no
// response can show a block before the block is on disk (see durability).
type front struct {
	rpc     *rpc.Server
	srv     *http.Server
	url     string
	durable *durability // nil: in memory, nothing to wait for
	served  chan error
}

// startFront listens on 127.0.0.1:port and serves apis.
func startFront(port int, apis []rpc.API, d *durability) (*front, error) {
	rs := rpc.NewServer()
	rs.SetHTTPBodyLimit(httpBodyLimit)
	rs.SetBatchLimits(node.DefaultConfig.BatchRequestLimit, node.DefaultConfig.BatchResponseMaxSize)
	for _, api := range apis {
		if err := rs.RegisterName(api.Namespace, api.Service); err != nil {
			rs.Stop()
			return nil, fmt.Errorf("devchain: register %s API: %w", api.Namespace, err)
		}
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		rs.Stop()
		return nil, fmt.Errorf("devchain: listen: %w", err)
	}
	f := &front{
		rpc:     rs,
		url:     "http://" + ln.Addr().String(),
		durable: d,
		served:  make(chan error, 1),
	}
	t := rpc.DefaultHTTPTimeouts
	f.srv = &http.Server{
		Handler:           f,
		ReadTimeout:       t.ReadTimeout,
		ReadHeaderTimeout: t.ReadHeaderTimeout,
		WriteTimeout:      t.WriteTimeout,
		IdleTimeout:       t.IdleTimeout,
	}
	go func() { f.served <- f.srv.Serve(ln) }()
	return f, nil
}

// shutdownTimeout bounds the wait for requests in flight at close (geth's
// node waits as long).
const shutdownTimeout = 5 * time.Second

// close stops serving: the port is free and no request is running against
// the node when it returns.
func (f *front) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := f.srv.Shutdown(ctx)
	if err != nil {
		err = f.srv.Close() // cut off what is still running
	}
	if serr := <-f.served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	f.rpc.Stop()
	if err != nil {
		return fmt.Errorf("devchain: close RPC server: %w", err)
	}
	return nil
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	// As geth's virtual-host check: a page in a browser that resolves its
	// own name to 127.0.0.1 must not reach the chain (DNS rebinding).
	if !localHost(r.Host) {
		http.Error(w, "invalid host specified", http.StatusForbidden)
		return
	}
	if f.durable == nil {
		f.rpc.ServeHTTP(w, r)
		return
	}
	// Read the request whole before taking the shared lock and answer only
	// after releasing it: a slow client must never hold up sealing.
	body, err := io.ReadAll(io.LimitReader(r.Body, httpBodyLimit+1))
	if err != nil {
		http.Error(w, "read request: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body)) // over the limit: the RPC server answers 413
	buf := &heldResponse{header: make(http.Header)}
	if err := f.durable.view(func() { f.rpc.ServeHTTP(buf, r) }); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	buf.send(w)
}

// localHost accepts an empty Host, an IP address and localhost.
func localHost(hostport string) bool {
	if hostport == "" {
		return true
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	return net.ParseIP(strings.Trim(host, "[]")) != nil || strings.EqualFold(host, "localhost")
}

var errResponseTooLarge = errors.New("devchain: response too large")

// heldResponse holds a response in memory (at most maxResponse bytes).
type heldResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
	over   bool
}

func (h *heldResponse) Header() http.Header { return h.header }

func (h *heldResponse) WriteHeader(code int) {
	if h.code == 0 {
		h.code = code
	}
}

func (h *heldResponse) Write(p []byte) (int, error) {
	if h.body.Len()+len(p) > maxResponse {
		h.over = true
		return 0, errResponseTooLarge
	}
	return h.body.Write(p)
}

func (h *heldResponse) send(w http.ResponseWriter) {
	if h.over {
		http.Error(w, errResponseTooLarge.Error(), http.StatusInternalServerError)
		return
	}
	for k, v := range h.header {
		w.Header()[k] = v
	}
	if h.code != 0 {
		w.WriteHeader(h.code)
	}
	_, _ = w.Write(h.body.Bytes()) // a client gone away is its own problem
}

// web3API is the web3 namespace (geth's lives in package node, whose HTTP
// server the chain does not use).
type web3API struct{ version string }

// ClientVersion is web3_clientVersion.
func (w *web3API) ClientVersion() string { return w.version }

// Sha3 is web3_sha3: keccak256 of the input.
func (w *web3API) Sha3(input hexutil.Bytes) hexutil.Bytes { return crypto.Keccak256(input) }
