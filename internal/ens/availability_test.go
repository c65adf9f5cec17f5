package ens

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/redact"
)

// freePort returns a port on 127.0.0.1 that nothing listens on.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// TestStartWithoutChain: New does no I/O and succeeds while the node is
// down; every call fails with ErrUnavailable until the node is up, and then
// the same client works, chain checks included.
func TestStartWithoutChain(t *testing.T) {
	ctx := t.Context()
	// A listener that counts connections: New must make none.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conn.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	clients := map[string]*Client{}
	for _, scheme := range []string{"http", "ws"} {
		c, err := New(ctx, Config{
			RPCURL:       fmt.Sprintf("%s://127.0.0.1:%d", scheme, port),
			Signer:       NewSigner(agentKey),
			ChainID:      devchain.DefaultChainID,
			RPCTimeout:   5 * time.Second,
			TxTimeout:    30 * time.Second,
			PollInterval: 20 * time.Millisecond,
		})
		if err != nil {
			t.Fatalf("New(%s) with the node down: %v", scheme, err)
		}
		t.Cleanup(c.Close)
		clients[scheme] = c
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("New made %d connections", n)
	}
	l.Close()

	for scheme, c := range clients {
		if err := c.Ping(ctx); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s: Ping with the node down: %v", scheme, err)
		}
		if _, err := c.Read(ctx, "agent.eth"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s: Read: %v", scheme, err)
		}
		if _, err := c.Write(ctx, "agent.eth", blobID(1), ""); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s: Write: %v", scheme, err)
		}
		if _, err := c.Transfer(ctx, "agent.eth", agentAddr); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s: Transfer: %v", scheme, err)
		}
		if c.ChainID() != nil {
			t.Fatalf("%s: chain id known without a node: %v", scheme, c.ChainID())
		}
	}

	// The node comes up on that port: the same clients recover.
	chain, err := devchain.Start(ctx, devchain.Config{Port: port, Fund: []common.Address{agentAddr},
		Names: []devchain.Name{{Name: "agent.eth", Owner: agentAddr}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { chain.Close() })
	hc := clients["http"]
	if err := hc.Ping(ctx); err != nil {
		t.Fatalf("Ping with the node up: %v", err)
	}
	if hc.ChainID().Cmp(chain.ChainID()) != 0 {
		t.Fatalf("chain id %v", hc.ChainID())
	}
	if _, err := hc.Write(ctx, "agent.eth", blobID(1), ""); err != nil {
		t.Fatalf("Write after recovery: %v", err)
	}
	if got, err := hc.Read(ctx, "agent.eth"); err != nil || got != blobID(1) {
		t.Fatalf("Read after recovery: %q, %v", got, err)
	}
}

// TestWebsocketRedials: a ws client starts while the endpoint refuses,
// connects when it accepts, and dials again after its connection is cut.
func TestWebsocketRedials(t *testing.T) {
	e := newEnv(t, "agent.eth")
	ctx := t.Context()
	relay := newWSRelay(t, e.chain.URL())
	relay.down.Store(true)
	c, err := New(ctx, Config{
		RPCURL:       relay.URL("/"),
		Signer:       NewSigner(agentKey),
		ChainID:      e.chain.ChainID().Uint64(),
		RPCTimeout:   2 * time.Second,
		TxTimeout:    30 * time.Second,
		PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ping while the endpoint answers 503: %v", err)
	}
	relay.down.Store(false)
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping once the endpoint is up: %v", err)
	}
	if _, err := c.Write(ctx, "agent.eth", blobID(1), ""); err != nil {
		t.Fatal(err)
	}
	dials := relay.conns.Load()

	relay.drop(t)
	// The connection the client holds is dead. The next request either
	// fails as unavailable (and drops it) or already goes through a new
	// one; the request after that works.
	if err := c.Ping(ctx); err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("first Ping after the drop: %v", err)
		}
		t.Logf("first Ping after the drop: %v", err)
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("second Ping after the drop: %v", err)
		}
	}
	if _, err := c.Write(ctx, "agent.eth", blobID(2), blobID(1)); err != nil {
		t.Fatalf("Write after the drop: %v", err)
	}
	e.mustRead(t, "agent.eth", blobID(2))
	if relay.conns.Load() <= dials {
		t.Fatalf("no new websocket connection after the drop (%d before, %d after)", dials, relay.conns.Load())
	}
}

// syncBuffer is a bytes.Buffer for a slog handler used from several
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// errorTexts is the text of err and of everything it wraps.
func errorTexts(err error) []string {
	texts := []string{fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)}
	var walk func(error, int)
	walk = func(err error, depth int) {
		if err == nil || depth > 32 {
			return
		}
		texts = append(texts, err.Error())
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			walk(x.Unwrap(), depth+1)
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				walk(e, depth+1)
			}
		}
	}
	walk(err, 0)
	return texts
}

// TestNoSecretInErrorsOrLogs points clients whose RPC URL carries API keys
// in its path and query at endpoints that fail in every way, and checks
// that no error and no log line shows either key, and that every failure
// is ErrUnavailable.
func TestNoSecretInErrorsOrLogs(t *testing.T) {
	const secret1, secret2 = "SUPERSECRET", "SUPERSECRET2"
	suffix := "/v3/" + secret1 + "?key=" + secret2
	stop := make(chan struct{})
	garbage := []byte("\x00\xff\xfe\n\r\x1b[31m" + strings.Repeat("junk ", 200))
	serve := func(status int) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
			w.WriteHeader(status)
			// Echo the key the way a provider's error page might.
			fmt.Fprintf(w, "<html>bad request to %s, key %s\n", r.URL.RequestURI(), secret1)
			_, _ = w.Write(garbage)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	// Unblock the handlers before the server waits for them.
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(stop) })
	hosts := map[string]string{
		"closed port":     fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"500 and garbage": serve(http.StatusInternalServerError).Listener.Addr().String(),
		"200 and garbage": serve(http.StatusOK).Listener.Addr().String(),
		"hangs":           hang.Listener.Addr().String(),
	}

	// Without the client's scrubbing, go-ethereum's errors do carry the
	// keys: the test below can fail.
	raw, err := ethclient.Dial("http://" + hosts["closed port"] + suffix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ChainID(t.Context()); err == nil || !strings.Contains(err.Error(), secret2) {
		t.Fatalf("go-ethereum's own error has no key to hide: %v", err)
	}
	raw.Close()

	for what, host := range hosts {
		for _, scheme := range []string{"http", "ws"} {
			t.Run(what+"/"+scheme, func(t *testing.T) {
				t.Parallel()
				var logs syncBuffer
				c, err := New(t.Context(), Config{
					RPCURL:       scheme + "://" + host + suffix,
					Signer:       NewSigner(agentKey),
					RPCTimeout:   300 * time.Millisecond,
					TxTimeout:    time.Second,
					PollInterval: 20 * time.Millisecond,
					Logger:       slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				ctx := t.Context()
				var errs []error
				note := func(err error) { errs = append(errs, err) }
				note(c.Ping(ctx))
				_, err = c.Read(ctx, "agent.eth")
				note(err)
				_, err = c.Lookup(ctx, "agent.eth")
				note(err)
				_, err = c.Owner(ctx, "agent.eth")
				note(err)
				_, err = c.Write(ctx, "agent.eth", blobID(1), "")
				note(err)
				_, err = c.WriteMany(ctx, []Update{{Name: "a.eth", Value: "x"}, {Name: "b.eth", Value: "y"}})
				note(err)
				_, err = c.Transfer(ctx, "agent.eth", agentAddr)
				note(err)
				_, err = c.WaitTx(ctx, common.HexToHash("0x01"))
				note(err)
				results := 0
				note(c.WriteBatches(ctx, []Update{{Name: "a.eth", Value: "x"}, {Name: "b.eth", Value: "y"}}, func(r UpdateResult) {
					results++
					if r.Outcome != Retry {
						t.Errorf("WriteBatches: %s is %s, want retry", r.Update.Name, r.Outcome)
					}
					note(r.Err)
				}))
				if results != 2 {
					t.Errorf("WriteBatches reported %d results, want 2", results)
				}
				for i, err := range errs {
					if !errors.Is(err, ErrUnavailable) {
						t.Errorf("error %d is not ErrUnavailable: %v", i, err)
					}
					for _, text := range errorTexts(err) {
						if strings.Contains(text, secret1) {
							t.Errorf("error %d shows the key: %s", i, text)
						}
					}
				}
				if l := logs.String(); strings.Contains(l, secret1) {
					t.Errorf("a log line shows the key:\n%s", l)
				}
				t.Logf("e.g. %v", errs[0])
			})
		}
	}

	// Configuration errors do not quote the URL either.
	for _, bad := range []string{"ftp://host/v3/" + secret1, "http://[::1" + suffix, "http://" + suffix} {
		_, err := New(t.Context(), Config{RPCURL: bad})
		if err == nil || strings.Contains(err.Error(), secret1) {
			t.Errorf("New(%q): %v", bad, err)
		}
	}
}

// FuzzOneLine checks the cleaning of a node's error text: whatever the
// node sent, the result is one line of valid UTF-8 within the bound, with
// no secret of the RPC URL.
func FuzzOneLine(f *testing.F) {
	f.Add("500 Internal Server Error: <html>\n\x00\xff SUPERSECRET", 40)
	f.Add("héllo wörld\u2028next", 7)
	f.Add("", 0)
	const secret = "SUPERSECRET"
	n := &node{scrub: redact.NewScrubber("https://h.example/v3/" + secret)}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = int(uint(max)%400) + 1
		got := oneLine(s, max)
		if len(got) > max+len("…") || !utf8.ValidString(got) || strings.ContainsAny(got, "\n\r\x00\u2028") {
			t.Fatalf("oneLine(%q, %d) = %q", s, max, got)
		}
		// Wherever the URL's secret is in the text, it does not survive
		// (the text around it is lower-cased, so it cannot form it).
		text := strings.ToLower(s)
		got = n.clean(text[:len(text)/2] + secret + text[len(text)/2:])
		if strings.Contains(got, secret) {
			t.Fatalf("secret survives: %q", got)
		}
	})
}
