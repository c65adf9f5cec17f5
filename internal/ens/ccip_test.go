package ens

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/devchain"
)

// The CCIP-read tests run real bytecode on the local chain: ENS's
// OffchainResolver (npm), the project's Universal-Resolver-compatible and
// wildcard resolvers (compiled from internal/devchain/contracts with a
// pinned solc), and gateways on 127.0.0.1. The artifacts are fetched and
// compiled by the set-up scripts, which the tests run themselves when they
// are missing.

// needCCIPArtifacts makes sure the CCIP-read contracts are there, running
// the set-up scripts once if they are not.
func needCCIPArtifacts(t testing.TB) {
	t.Helper()
	if _, err := devchain.NeedCCIPArtifacts(); err != nil {
		t.Fatalf("the CCIP-read contracts are needed: %v", err)
	}
}

var gatewayKey = devchain.DeriveKey("gateway")

// ccipWorld is a chain with every resolver layout:
//
//	agent.eth             PublicResolver (on chain)
//	offchain.eth          OffchainResolver, gateway by GET; its subnames resolve offchain
//	offchain-post.eth     OffchainResolver, gateway by POST
//	wild.eth              WildcardResolver (on-chain extended); its subnames resolve on chain
//	plain.eth             PublicResolver; subnames without a resolver are not found
//
// and a Universal Resolver (ur).
type ccipWorld struct {
	*env
	ur       common.Address
	wildcard common.Address
	records  *devchain.TextRecords
	gw       *httptest.Server
	gwHits   atomic.Int64
	offGet   common.Address
	offPost  common.Address
}

func newCCIPWorld(t testing.TB) *ccipWorld {
	t.Helper()
	needCCIPArtifacts(t)
	w := &ccipWorld{env: newEnv(t, "agent.eth"), records: &devchain.TextRecords{}}
	ctx := context.Background()
	g := &devchain.Gateway{Key: gatewayKey, Answer: w.records.Answer}
	mux := http.NewServeMux()
	mux.Handle("/gw/", http.StripPrefix("/gw", g))
	w.gw = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.gwHits.Add(1)
		mux.ServeHTTP(rw, r)
	}))
	t.Cleanup(w.gw.Close)
	signer := crypto.PubkeyToAddress(gatewayKey.PublicKey)
	var err error
	if w.offGet, err = w.chain.DeployOffchainResolver(ctx, w.gw.URL+"/gw/{sender}/{data}.json", signer); err != nil {
		t.Fatal(err)
	}
	if w.offPost, err = w.chain.DeployOffchainResolver(ctx, w.gw.URL+"/gw/", signer); err != nil {
		t.Fatal(err)
	}
	if w.wildcard, err = w.chain.DeployWildcardResolver(ctx); err != nil {
		t.Fatal(err)
	}
	if w.ur, err = w.chain.DeployUniversalResolver(ctx); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]common.Address{
		"offchain.eth": w.offGet, "offchain-post.eth": w.offPost, "wild.eth": w.wildcard,
	} {
		if err := w.chain.RegisterWithResolver(ctx, name, agentAddr, r); err != nil {
			t.Fatal(err)
		}
	}
	// plain.eth stays the dev key's, which registers names under it.
	for name, r := range map[string]common.Address{"plain.eth": w.chain.ResolverAddress()} {
		if err := w.chain.RegisterWithResolver(ctx, name, w.chain.DevAddress(), r); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// reader is a read-only client of the world's chain, through the
// Universal Resolver when ur is set.
func (w *ccipWorld) reader(t testing.TB, ur common.Address, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{RPCURL: w.chain.URL(), ChainID: w.chain.ChainID().Uint64(), UniversalResolver: ur}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// both returns a registry-walking and a Universal Resolver client.
func (w *ccipWorld) both(t testing.TB) map[string]*Client {
	return map[string]*Client{"registry": w.reader(t, common.Address{}, nil), "universal": w.reader(t, w.ur, nil)}
}

func TestResolveOnchainAndWildcard(t *testing.T) {
	w := newCCIPWorld(t)
	ctx := t.Context()
	if _, err := w.client.Write(ctx, "agent.eth", blobID(1), ""); err != nil {
		t.Fatal(err)
	}
	if err := w.chain.SetText(ctx, nil, w.wildcard, "agent.wild.eth", TextKey, blobID(2)); err != nil {
		t.Fatal(err)
	}
	if err := w.chain.RegisterWithResolver(ctx, "owned.plain.eth", agentAddr, common.Address{}); err != nil {
		t.Fatal(err)
	}
	for how, c := range w.both(t) {
		t.Run(how, func(t *testing.T) {
			res, err := c.Resolve(ctx, "Agent.eth")
			if err != nil || res.Value != blobID(1) || res.Resolver != w.chain.ResolverAddress() || res.Offchain() {
				t.Fatalf("agent.eth: %+v, %v", res, err)
			}
			if want := map[string]Path{"registry": PathOnchain, "universal": PathUniversal}[how]; res.Via != want {
				t.Errorf("agent.eth via %s, want %s", res.Via, want)
			}
			// ENSIP-10: no resolver of its own, the parent's is extended.
			res, err = c.Resolve(ctx, "agent.wild.eth")
			if err != nil || res.Value != blobID(2) || res.Resolver != w.wildcard {
				t.Fatalf("agent.wild.eth: %+v, %v", res, err)
			}
			if how == "registry" && (res.Via != PathWildcard || res.ResolverOf != "wild.eth") {
				t.Errorf("agent.wild.eth: via %s of %q", res.Via, res.ResolverOf)
			}
			if _, err := c.Read(ctx, "nothing.wild.eth"); !errors.Is(err, ErrNoPointer) {
				t.Errorf("empty wildcard record: %v", err)
			}
			// The parent's resolver is not extended: not found.
			if _, err := c.Read(ctx, "child.plain.eth"); !errors.Is(err, ErrNameNotFound) {
				t.Errorf("child.plain.eth: %v", err)
			}
			_, err = c.Read(ctx, "owned.plain.eth")
			if !errors.Is(err, ErrNoResolver) || how == "registry" && !strings.Contains(err.Error(), "does not support wildcard") {
				t.Errorf("owned.plain.eth: %v", err)
			}
			if _, err := c.Read(ctx, "nobody.eth"); !errors.Is(err, ErrNameNotFound) {
				t.Errorf("nobody.eth: %v", err)
			}
		})
	}
}

func TestResolveOffchain(t *testing.T) {
	w := newCCIPWorld(t)
	ctx := t.Context()
	w.records.Set("agent.offchain.eth", TextKey, blobID(3))
	w.records.Set("agent.offchain-post.eth", TextKey, blobID(4))
	w.records.Set("offchain.eth", TextKey, blobID(5))
	origin := w.gw.URL
	for how, c := range w.both(t) {
		for _, tc := range []struct {
			name, want string
			resolver   common.Address
			via        Path
		}{
			{"agent.offchain.eth", blobID(3), w.offGet, PathWildcard},
			{"agent.offchain-post.eth", blobID(4), w.offPost, PathWildcard},
			{"offchain.eth", blobID(5), w.offGet, PathExtended},
		} {
			t.Run(how+"/"+tc.name, func(t *testing.T) {
				res, err := c.Resolve(ctx, tc.name)
				if err != nil || res.Value != tc.want || res.Resolver != tc.resolver {
					t.Fatalf("%+v, %v", res, err)
				}
				if res.Lookups != 1 || len(res.Gateways) != 1 || res.Gateways[0] != origin {
					t.Errorf("lookups %d via %v, want 1 via %s", res.Lookups, res.Gateways, origin)
				}
				if how == "registry" && res.Via != tc.via {
					t.Errorf("via %s, want %s", res.Via, tc.via)
				}
			})
		}
		if _, err := c.Read(ctx, "none.offchain.eth"); !errors.Is(err, ErrNoPointer) {
			t.Errorf("%s: a record the gateway does not have: %v", how, err)
		}
	}
}

// A gateway can serve an older value; Read returns it as the record, and
// the agent's rollback handling (docs/design.md §7) decides what it is:
// the blob is verified as always, so an older value is the worst it can
// do besides denying service.
func TestGatewayServesOlderValue(t *testing.T) {
	w := newCCIPWorld(t)
	ctx := t.Context()
	c := w.reader(t, common.Address{}, nil)
	w.records.Set("agent.offchain.eth", TextKey, blobID(2))
	if v, err := c.Read(ctx, "agent.offchain.eth"); err != nil || v != blobID(2) {
		t.Fatalf("newest: %q, %v", v, err)
	}
	w.records.Set("agent.offchain.eth", TextKey, blobID(1))
	if v, err := c.Read(ctx, "agent.offchain.eth"); err != nil || v != blobID(1) {
		t.Fatalf("older: %q, %v", v, err)
	}
}

// hostile deploys a LoopResolver answering for loop.eth through urls.
func (w *ccipWorld) hostile(t testing.TB, sender common.Address, urls []string, rounds uint64) {
	t.Helper()
	r, err := w.chain.DeployLoopResolver(t.Context(), sender, urls, rounds)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.chain.RegisterWithResolver(t.Context(), "loop.eth", agentAddr, r); err != nil {
		t.Fatal(err)
	}
}

// offchain deploys an OffchainResolver for signers at url and makes it
// the resolver of name.
func (w *ccipWorld) offchain(t testing.TB, name, url string, signers ...common.Address) common.Address {
	t.Helper()
	r, err := w.chain.DeployOffchainResolver(t.Context(), url, signers...)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.chain.RegisterWithResolver(t.Context(), name, agentAddr, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// answer is a gateway handler that answers {"data": hex(value)}.
func answer(value string) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(map[string]string{"data": hexutil.Encode([]byte(value))})
	}
}

// oneLineErr fails unless err matches want and is one line that does not
// leak secret.
func oneLineErr(t *testing.T, err, want error, secret string) {
	t.Helper()
	switch {
	case !errors.Is(err, want):
		t.Fatalf("err = %v, want %v", err, want)
	case strings.ContainsAny(err.Error(), "\n\r"):
		t.Errorf("error is not one line: %q", err)
	case secret != "" && strings.Contains(err.Error(), secret):
		t.Errorf("error leaks %q: %v", secret, err)
	}
	t.Logf("%v", err)
}

func TestHostileGateways(t *testing.T) {
	w := newCCIPWorld(t)
	signer := crypto.PubkeyToAddress(gatewayKey.PublicKey)
	var okHits, notFoundHits atomic.Int64
	bodyDone := make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/s3cr3t-ok/", func(rw http.ResponseWriter, r *http.Request) { okHits.Add(1); answer("good")(rw, r) })
	mux.HandleFunc("/s3cr3t-500/", func(rw http.ResponseWriter, r *http.Request) { http.Error(rw, "boom", 500) })
	mux.HandleFunc("/s3cr3t-404/", func(rw http.ResponseWriter, r *http.Request) {
		notFoundHits.Add(1)
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(404)
		rw.Write([]byte(`{"message":"no such name\n\u001b[31mred"}`))
	})
	mux.HandleFunc("/s3cr3t-endless/", func(rw http.ResponseWriter, r *http.Request) {
		defer func() { bodyDone <- struct{}{} }()
		rw.Header().Set("Content-Type", "application/json")
		rw.Write([]byte(`{"data":"0x`))
		chunk := []byte(strings.Repeat("00", 32<<10))
		for r.Context().Err() == nil {
			if _, err := rw.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/s3cr3t-big/", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(rw, `{"data":"0x%s"}`, strings.Repeat("ab", DefaultGatewayMaxBody))
	})
	mux.HandleFunc("/s3cr3t-slow/", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		rw.Write([]byte(`{"data":"0x00`))
		rw.(http.Flusher).Flush()
		<-r.Context().Done() // never finishes; the client's timeout must end it
	})
	mux.HandleFunc("/s3cr3t-garbage/", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		rw.Write([]byte(`{"data":"not hex"}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u := func(path string) string { return srv.URL + "/s3cr3t-" + path + "/{data}" }
	down := fmt.Sprintf("http://127.0.0.1:%d/s3cr3t-down/{data}", freePort(t))
	ctx := t.Context()
	c := w.reader(t, common.Address{}, func(cfg *Config) { cfg.GatewayTimeout = 300 * time.Millisecond })

	t.Run("down, every URL", func(t *testing.T) {
		w.hostile(t, common.Address{}, []string{down, fmt.Sprintf("http://127.0.0.1:%d/x", freePort(t))}, 1)
		_, err := c.Read(ctx, "loop.eth")
		oneLineErr(t, err, ErrGatewayUnavailable, "s3cr3t")
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOffchain) || !strings.Contains(err.Error(), "2 gateway URLs tried") {
			t.Errorf("down: %v", err)
		}
	})
	t.Run("5xx then the next URL", func(t *testing.T) {
		w.hostile(t, common.Address{}, []string{u("500"), u("ok")}, 1)
		res, err := c.Resolve(ctx, "loop.eth")
		if err != nil || res.Value != "good" || len(res.Gateways) != 1 {
			t.Fatalf("%+v, %v", res, err)
		}
	})
	t.Run("4xx stops", func(t *testing.T) {
		okHits.Store(0)
		w.hostile(t, common.Address{}, []string{u("404"), u("ok")}, 1)
		_, err := c.Read(ctx, "loop.eth")
		oneLineErr(t, err, ErrGatewayRefused, "s3cr3t")
		if okHits.Load() != 0 || notFoundHits.Load() == 0 || !strings.Contains(err.Error(), "HTTP 404: no such name") || strings.Contains(err.Error(), "\x1b") {
			t.Errorf("ok hits %d, 404 hits %d: %q", okHits.Load(), notFoundHits.Load(), err)
		}
	})
	t.Run("signature the resolver rejects", func(t *testing.T) {
		rogue := &devchain.Gateway{Key: devchain.DeriveKey("rogue"), Answer: w.records.Answer}
		rs := httptest.NewServer(rogue)
		t.Cleanup(rs.Close)
		w.records.Set("x.rogue.eth", TextKey, "forged")
		w.offchain(t, "rogue.eth", rs.URL+"/{sender}/{data}.json", signer)
		for _, ur := range []common.Address{{}, w.ur} {
			_, err := w.reader(t, ur, nil).Read(ctx, "x.rogue.eth")
			oneLineErr(t, err, ErrAnswerRejected, "")
			if !errors.Is(err, ErrOffchain) || !strings.Contains(err.Error(), "Invalid sigature") {
				t.Errorf("ur %s: %v", ur, err)
			}
		}
	})
	t.Run("endless body", func(t *testing.T) {
		w.hostile(t, common.Address{}, []string{u("endless")}, 1)
		_, err := c.Read(ctx, "loop.eth")
		oneLineErr(t, err, ErrGatewayAnswer, "s3cr3t")
		if !strings.Contains(err.Error(), fmt.Sprintf("larger than %d bytes", DefaultGatewayMaxBody)) {
			t.Errorf("endless: %v", err)
		}
		// The client hung up: the server's writes fail and it returns.
		select {
		case <-bodyDone:
		case <-time.After(30 * time.Second):
			t.Fatal("the endless body is still being read")
		}
	})
	t.Run("oversized body", func(t *testing.T) {
		w.hostile(t, common.Address{}, []string{u("big")}, 1)
		_, err := c.Read(ctx, "loop.eth")
		oneLineErr(t, err, ErrGatewayAnswer, "s3cr3t")
	})
	t.Run("slow body", func(t *testing.T) {
		w.hostile(t, common.Address{}, []string{u("slow")}, 1)
		_, err := c.Read(ctx, "loop.eth")
		oneLineErr(t, err, ErrGatewayUnavailable, "s3cr3t")
		if !strings.Contains(err.Error(), "not complete within 300ms") {
			t.Errorf("slow: %v", err)
		}
	})
	t.Run("malformed answer", func(t *testing.T) {
		w.hostile(t, common.Address{}, []string{u("garbage")}, 1)
		_, err := c.Read(ctx, "loop.eth")
		oneLineErr(t, err, ErrGatewayAnswer, "s3cr3t")
	})
	t.Run("lookups within the bound", func(t *testing.T) {
		w.hostile(t, common.Address{}, []string{u("ok")}, MaxLookups)
		res, err := c.Resolve(ctx, "loop.eth")
		if err != nil || res.Value != "good" || res.Lookups != MaxLookups {
			t.Fatalf("%+v, %v", res, err)
		}
	})
	t.Run("a lookup past the bound", func(t *testing.T) {
		w.hostile(t, common.Address{}, []string{u("ok")}, MaxLookups+1)
		_, err := c.Read(ctx, "loop.eth")
		oneLineErr(t, err, ErrLookupLimit, "s3cr3t")
	})
	t.Run("sender mismatch", func(t *testing.T) {
		okHits.Store(0)
		w.hostile(t, common.HexToAddress("0x00000000000000000000000000000000000bad"), []string{u("ok")}, 1)
		_, err := c.Read(ctx, "loop.eth")
		oneLineErr(t, err, ErrLookupInvalid, "s3cr3t")
		if okHits.Load() != 0 || !strings.Contains(err.Error(), "names sender") {
			t.Errorf("hits %d: %v", okHits.Load(), err)
		}
	})
	for _, bad := range []string{"file:///etc/passwd", "ftp://127.0.0.1/{data}", "data:application/json,{\"data\":\"0x00\"}", "gopher://127.0.0.1/x", "//127.0.0.1/{data}", "http://user:pw@" + srv.Listener.Addr().String() + "/s3cr3t-ok/{data}"} {
		t.Run("refused URL "+bad[:min(len(bad), 12)], func(t *testing.T) {
			okHits.Store(0)
			w.offchain(t, "bad.eth", bad, signer)
			w.records.Set("a.bad.eth", TextKey, "x")
			_, err := c.Read(ctx, "a.bad.eth")
			oneLineErr(t, err, ErrLookupInvalid, "passwd")
			if okHits.Load() != 0 {
				t.Errorf("a request was made")
			}
		})
	}
}

// Through the Universal Resolver the lookups come back as a batch that
// hermesd runs itself: the same refusals, the same sentinels (not the
// Universal Resolver's encoding of them).
func TestHostileGatewaysThroughUniversalResolver(t *testing.T) {
	w := newCCIPWorld(t)
	ctx := t.Context()
	var okHits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/ok/", func(rw http.ResponseWriter, r *http.Request) { okHits.Add(1); answer("good")(rw, r) })
	mux.HandleFunc("/404/", func(rw http.ResponseWriter, r *http.Request) { http.Error(rw, "{}", 404) })
	mux.HandleFunc("/big/", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(rw, `{"data":"0x%s"}`, strings.Repeat("ab", 4<<10))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := w.reader(t, w.ur, func(cfg *Config) { cfg.GatewayMaxBody = 4 << 10 })
	down := fmt.Sprintf("http://127.0.0.1:%d/{data}", freePort(t))
	for _, tc := range []struct {
		name   string
		sender common.Address
		urls   []string
		rounds uint64
		want   error
	}{
		{"answers", common.Address{}, []string{srv.URL + "/ok/{data}"}, 1, nil},
		{"nested within the bound", common.Address{}, []string{srv.URL + "/ok/{data}"}, MaxLookups, nil},
		{"down", common.Address{}, []string{down}, 1, ErrGatewayUnavailable},
		{"down then the next URL", common.Address{}, []string{down, srv.URL + "/ok/{data}"}, 1, nil},
		{"4xx", common.Address{}, []string{srv.URL + "/404/{data}"}, 1, ErrGatewayRefused},
		{"oversized", common.Address{}, []string{srv.URL + "/big/{data}"}, 1, ErrGatewayAnswer},
		{"past the bound", common.Address{}, []string{srv.URL + "/ok/{data}"}, MaxLookups + 1, ErrLookupLimit},
		{"sender mismatch", common.HexToAddress("0xbad"), []string{srv.URL + "/ok/{data}"}, 1, ErrLookupInvalid},
		{"file URL", common.Address{}, []string{"file:///etc/passwd"}, 1, ErrLookupInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			okHits.Store(0)
			w.hostile(t, tc.sender, tc.urls, tc.rounds)
			res, err := c.Resolve(ctx, "loop.eth")
			if tc.want == nil {
				if err != nil || res.Value != "good" || res.Via != PathUniversal {
					t.Fatalf("%+v, %v", res, err)
				}
				return
			}
			oneLineErr(t, err, tc.want, "passwd")
			if tc.want == ErrLookupInvalid && okHits.Load() != 0 {
				t.Errorf("a refused lookup was fetched")
			}
		})
	}
}

// The gateway's signed answer verifies in the real OffchainResolver: the
// hash our test gateway signs is the one the contract computes.
func TestGatewaySignatureHash(t *testing.T) {
	w := newCCIPWorld(t)
	a, err := w.chain.CCIPArtifacts()
	if err != nil {
		t.Fatal(err)
	}
	target, req, result := w.offGet, []byte("request"), []byte("result")
	data, err := a.OffchainResolver.ABI.Pack("makeSignatureHash", target, uint64(1234), req, result)
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.rpc.CallContract(t.Context(), callMsg(w.offGet, data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := common.BytesToHash(out), devchain.SignatureHash(target, 1234, req, result); got != want {
		t.Fatalf("contract hash %s, gateway signs %s", got, want)
	}
}

func callMsg(to common.Address, data []byte) ethereum.CallMsg {
	return ethereum.CallMsg{To: &to, Data: data}
}
