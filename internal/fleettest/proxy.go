package fleettest

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
)

// writeLog is every write the nodes' proxies saw, with its moment.
type writeLog struct {
	mu     sync.Mutex
	writes []Write
	txs    map[string]sentTx // transaction hash (0x…) → who sent it
}

type sentTx struct {
	node string
	at   time.Time
}

func newWriteLog() *writeLog { return &writeLog{txs: map[string]sentTx{}} }

func (l *writeLog) add(w Write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
}

func (l *writeLog) addTx(node, kind string, hashes []string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range hashes {
		l.writes = append(l.writes, Write{Node: node, Kind: kind, At: at})
		if _, seen := l.txs[h]; !seen { // a resend of the same transaction keeps its first sender
			l.txs[h] = sentTx{node, at}
		}
	}
}

// count returns how many writes node sent since (of every kind).
func (l *writeLog) count(node string, since time.Time) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, w := range l.writes {
		if w.Node == node && !w.At.Before(since) {
			out[w.Kind]++
		}
	}
	return out
}

func (l *writeLog) snapshot() ([]Write, map[string]sentTx) {
	l.mu.Lock()
	defer l.mu.Unlock()
	txs := make(map[string]sentTx, len(l.txs))
	for k, v := range l.txs {
		txs[k] = v
	}
	return append([]Write(nil), l.writes...), txs
}

// Write kinds.
const (
	WalrusStore = "walrus store"
	L1Tx        = "L1 transaction"
	L2Tx        = "L2 transaction"
)

// walrusProxy passes everything to the Walrus server and records each
// store (PUT /v1/blobs, PUT /v1/quilts) as it arrives.
func walrusProxy(t testing.TB, target, node string, log *writeLog) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = discardLog
	rp.FlushInterval = -1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && (r.URL.Path == "/v1/blobs" || r.URL.Path == "/v1/quilts") {
			log.add(Write{Node: node, Kind: WalrusStore, At: time.Now()})
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

var discardLog = log.New(io.Discard, "", 0)

// ChainProxy stands in front of a chain's JSON-RPC for one node and
// records the hash of every transaction the node sends through it, at the
// moment the request arrives.
type ChainProxy struct {
	// URL is the proxy's address, the node's rpc.
	URL string
}

// maxRPCBody bounds a request body the proxy reads to find transactions.
const maxRPCBody = 16 << 20

func chainProxy(t testing.TB, target, node, kind string, log *writeLog) *ChainProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = discardLog
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRPCBody+1))
		if err != nil || len(body) > maxRPCBody {
			http.Error(w, "request body unreadable or too large", http.StatusRequestEntityTooLarge)
			return
		}
		log.addTx(node, kind, txHashes(body), time.Now())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &ChainProxy{URL: srv.URL}
}

// txHashes are the hashes of the transactions an eth_sendRawTransaction
// request (or a batch of requests) carries.
func txHashes(body []byte) []string {
	type req struct {
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	var reqs []req
	if b := strings.TrimSpace(string(body)); strings.HasPrefix(b, "[") {
		if json.Unmarshal(body, &reqs) != nil {
			return nil
		}
	} else {
		var one req
		if json.Unmarshal(body, &one) != nil {
			return nil
		}
		reqs = []req{one}
	}
	var out []string
	for _, r := range reqs {
		if r.Method != "eth_sendRawTransaction" || len(r.Params) == 0 {
			continue
		}
		var raw hexutil.Bytes
		if json.Unmarshal(r.Params[0], &raw) != nil {
			continue
		}
		var tx types.Transaction
		if tx.UnmarshalBinary(raw) != nil {
			continue
		}
		out = append(out, tx.Hash().Hex())
	}
	return out
}
