// Package pointertest is the test harness of the ENS pointer's life that
// the daemon's tests and the end-to-end tests of the binary share: another
// writer of an agent's record, a snapshot of an agent that its lineage
// does not know (a fork), and a proxy in front of the chain's JSON-RPC
// that passes reads and refuses, delays or holds transactions.
//
// Everything runs on the real devnet parts (the EVM with the real ENS
// contracts, the local Walrus server) on 127.0.0.1. Only tests import this
// package; internal/arch checks that no other code does.
package pointertest

import (
	"bytes"
	"crypto/ecdsa"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// Writer is a chain client on rpcURL signing with key, closed with the
// test.
func Writer(t testing.TB, rpcURL string, key *ecdsa.PrivateKey) *ens.Client {
	t.Helper()
	c, err := ens.New(t.Context(), ens.Config{RPCURL: rpcURL, Signer: ens.NewSigner(key), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// OtherWriter is a second key, funded and authorised by owner (the key
// that owns name) on the resolver to write name's records: another writer
// of the agent's pointer.
func OtherWriter(t testing.TB, ch *devchain.Chain, owner *ecdsa.PrivateKey, name string) *ens.Client {
	t.Helper()
	key := devchain.DeriveKey("another-writer")
	addr := crypto.PubkeyToAddress(key.PublicKey)
	if err := ch.Fund(t.Context(), new(big.Int).Mul(big.NewInt(1e18), big.NewInt(10)), addr); err != nil {
		t.Fatal(err)
	}
	data, err := ch.Artifacts().Resolver.ABI.Pack("setAuthorisation", devchain.NameHash(name), addr, true)
	if err != nil {
		t.Fatal(err)
	}
	res := ch.ResolverAddress()
	if _, err := ch.Transact(t.Context(), owner, devchain.Call{To: &res, Data: data, Gas: 200_000}); err != nil {
		t.Fatal(err)
	}
	return Writer(t, ch.URL(), key)
}

// Fork uploads a snapshot of agent id of cfg holding files (path →
// content) that the agent's own lineage does not know: the brain of
// another machine running the same agent. It returns the blob id.
func Fork(t testing.TB, cfg *config.Config, id string, files map[string]string) string {
	t.Helper()
	svc, err := compose.Build(t.Context(), cfg, nil, compose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ac, err := cfg.Agent(id)
	if err != nil {
		t.Fatal(err)
	}
	fork := *ac
	fork.BrainDir = filepath.Join(t.TempDir(), "fork")
	for p, c := range files {
		full := filepath.Join(fork.BrainDir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := hash.Dir(t.Context(), fork.BrainDir, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := svc.Pipeline(&fork, t.TempDir(), nil).Take(t.Context(), snapshot.Input{Want: h.Digest})
	if err != nil {
		t.Fatal(err)
	}
	return r.BlobID
}

// ChainProxy stands between a client and the chain's JSON-RPC. Reads
// pass unless the proxy hangs; a request that sends a transaction
// (eth_sendRawTransaction) is treated as the proxy's mode says when it
// arrives: passed, refused with 503 (a node that takes no writes),
// delayed, or held until the mode changes (a chain that takes
// transactions but mines nothing). Hang holds every request, reads too
// (a node that accepts connections and never answers). A held request
// whose sender gives up is dropped, never forwarded.
type ChainProxy struct {
	URL string

	srv *httptest.Server

	mu      sync.Mutex
	onSend  func(body []byte)
	mode    mode
	delay   time.Duration
	changed chan struct{} // closed and replaced when the mode changes
	closed  chan struct{}
	counts  Counts
}

type mode int

const (
	pass mode = iota
	refuse
	delay
	hold
	hang
)

// Counts are the transactions a ChainProxy saw since it started.
type Counts struct {
	Refused int // answered 503
	Held    int // waited for the mode to change
	Dropped int // given up by their sender while held or delayed
	Sent    int // forwarded to the chain
	Hung    int // requests (of any kind) held while the proxy hung
}

// NewChainProxy starts a proxy to rpcURL, passing everything; it stops
// with the test, answering the transactions it still holds with 503.
func NewChainProxy(t testing.TB, rpcURL string) *ChainProxy {
	t.Helper()
	u, err := url.Parse(rpcURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &ChainProxy{changed: make(chan struct{}), closed: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { w.WriteHeader(http.StatusBadGateway) }
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		if !p.hangs(w, r) {
			return
		}
		if bytes.Contains(body, []byte("eth_sendRawTransaction")) {
			p.mu.Lock()
			f := p.onSend
			p.mu.Unlock()
			if f != nil {
				f(body)
			}
			if !p.gate(w, r) {
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	p.URL = p.srv.URL
	t.Cleanup(func() {
		close(p.closed)
		p.srv.Close()
	})
	return p
}

// gate applies the mode to one transaction; it reports whether to forward
// it (having answered it otherwise).
func (p *ChainProxy) gate(w http.ResponseWriter, r *http.Request) bool {
	counted := false
	for {
		p.mu.Lock()
		m, d, changed := p.mode, p.delay, p.changed
		switch {
		case m == refuse:
			p.counts.Refused++
		case m == hold && !counted:
			p.counts.Held++
			counted = true
		case m == pass:
			p.counts.Sent++
		}
		p.mu.Unlock()
		switch m {
		case pass:
			return true
		case refuse:
			http.Error(w, "no writes now", http.StatusServiceUnavailable)
			return false
		case delay:
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				p.mu.Lock()
				p.counts.Sent++
				p.mu.Unlock()
				return true
			case <-r.Context().Done(): // the sender gave up: never forward
				p.dropped()
				return false
			}
		}
		select {
		case <-changed: // look at the new mode
		case <-r.Context().Done():
			p.dropped()
			return false
		case <-p.closed:
			http.Error(w, "chain unavailable", http.StatusServiceUnavailable)
			return false
		}
	}
}

// hangs holds a request while the proxy hangs; it reports whether to go
// on with it (having answered it otherwise).
func (p *ChainProxy) hangs(w http.ResponseWriter, r *http.Request) bool {
	counted := false
	for {
		p.mu.Lock()
		m, changed := p.mode, p.changed
		if m == hang && !counted {
			p.counts.Hung++
			counted = true
		}
		p.mu.Unlock()
		if m != hang {
			return true
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			p.dropped()
			return false
		case <-p.closed:
			http.Error(w, "chain unavailable", http.StatusServiceUnavailable)
			return false
		}
	}
}

func (p *ChainProxy) dropped() {
	p.mu.Lock()
	p.counts.Dropped++
	p.mu.Unlock()
}

func (p *ChainProxy) set(m mode, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.delay = m, d
	close(p.changed)
	p.changed = make(chan struct{})
}

// OnSend makes f see the JSON-RPC request of every transaction sent,
// as it arrives, before the mode applies to it.
func (p *ChainProxy) OnSend(f func(body []byte)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onSend = f
}

// Pass forwards transactions, the ones held until now included.
func (p *ChainProxy) Pass() { p.set(pass, 0) }

// Refuse answers transactions 503, the ones held until now included.
func (p *ChainProxy) Refuse() { p.set(refuse, 0) }

// Delay forwards each transaction d after it arrives (a slow chain).
func (p *ChainProxy) Delay(d time.Duration) { p.set(delay, d) }

// Hold keeps transactions waiting until the mode changes or their sender
// gives up (a chain that stopped mining).
func (p *ChainProxy) Hold() { p.set(hold, 0) }

// Hang holds every request, reads included, until the mode changes or
// the sender gives up: a node that takes connections and never answers.
func (p *ChainProxy) Hang() { p.set(hang, 0) }

// Counts returns what the proxy did so far.
func (p *ChainProxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts
}
