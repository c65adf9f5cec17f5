package seal_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/sealserver"
)

// fastRetry keeps the retry tests quick: the client still waits between
// attempts, only briefly.
var fastRetry = seal.RetryPolicy{Attempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond,
	InvalidParameterAttempts: 3, InvalidParameterDelay: time.Millisecond}

func newClient(t *testing.T, cfg seal.Config, opts *seal.ClientOptions) *seal.Client {
	t.Helper()
	if opts == nil {
		opts = &seal.ClientOptions{}
	}
	if opts.Retry == (seal.RetryPolicy{}) {
		opts.Retry = fastRetry
	}
	c, err := seal.NewClient(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// counting wraps a handler and counts its requests.
type counting struct {
	h http.Handler
	n atomic.Int64
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.h.ServeHTTP(w, r)
}

// swap replaces server i's handler (tn.https[i].Config.Handler).
func (tn *testNet) swap(i int, f func(real http.Handler) http.Handler) {
	tn.https[i].Config.Handler = f(tn.servers[i])
}

func encryptFor(t *testing.T, tn *testNet, id, msg string) []byte {
	t.Helper()
	obj, _, err := seal.Encrypt(&tn.cfg, []byte(id), []byte(msg), nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestClientRoundTrip(t *testing.T) {
	tn := newTestNet(t, []int{1, 1, 1}, 2, nil)
	msg := []byte("brain snapshot")
	obj, _, err := seal.Encrypt(&tn.cfg, []byte("agent-7"), msg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, tn.cfg, nil)
	pt, err := c.Decrypt(t.Context(), obj, tn.session(t), approve, &seal.DecryptOptions{CheckShareConsistency: true})
	if err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("decrypt: %q, %v", pt, err)
	}
}

// Escrow: a 32-byte agent key sealed with the Plain DEM is recovered with
// only the Sui identity, and equals the key Encrypt returned.
func TestClientEscrowPlain(t *testing.T) {
	tn := newTestNet(t, []int{1, 1, 1}, 2, func(_ int, user seal.Address) sealserver.Policy { return sealserver.Allowlist(user) })
	obj, key, err := seal.Encrypt(&tn.cfg, []byte("agent-key"), nil, &seal.EncryptOptions{DEM: seal.Plain})
	if err != nil {
		t.Fatal(err)
	}
	got, err := newClient(t, tn.cfg, nil).Decrypt(t.Context(), obj, tn.session(t), approve, nil)
	if err != nil || !bytes.Equal(got, key[:]) {
		t.Fatalf("escrowed key: %v", err)
	}
}

func TestClientServerDown(t *testing.T) {
	tn := newTestNet(t, []int{1, 1, 1}, 2, nil)
	obj := encryptFor(t, tn, "a", "msg")
	tn.https[0].Close()
	c := newClient(t, tn.cfg, nil)
	if pt, err := c.Decrypt(t.Context(), obj, tn.session(t), approve, nil); err != nil || string(pt) != "msg" {
		t.Fatalf("one server down: %v", err)
	}
	tn.https[1].Close()
	c = newClient(t, tn.cfg, nil)
	_, err := c.Decrypt(t.Context(), obj, tn.session(t), approve, nil)
	if !errors.Is(err, seal.ErrNotEnoughKeys) {
		t.Fatalf("two servers down: %v", err)
	}
	// One line per failed server, each naming it.
	for _, i := range []int{0, 1} {
		if !strings.Contains(err.Error(), tn.cfg.Servers[i].ObjectID.String()) || !strings.Contains(err.Error(), tn.https[i].URL) {
			t.Errorf("error does not name server %d: %v", i, err)
		}
	}
}

// A key server answering keys that do not verify against its public key
// is ignored when the others suffice, and is a clear error when they do
// not.
func TestClientWrongKey(t *testing.T) {
	tn := newTestNet(t, []int{1, 1, 1}, 2, nil)
	impostor, _ := seal.GenerateMasterKey(nil)
	bad, err := sealserver.New(sealserver.Config{ObjectID: tn.cfg.Servers[0].ObjectID, MasterKey: impostor, Policy: sealserver.Open()})
	if err != nil {
		t.Fatal(err)
	}
	tn.https[0].Config.Handler = bad
	obj := encryptFor(t, tn, "a", "msg")
	if pt, err := newClient(t, tn.cfg, nil).Decrypt(t.Context(), obj, tn.session(t), approve, nil); err != nil || string(pt) != "msg" {
		t.Fatalf("one wrong server among three: %v", err)
	}
	tn.https[1].Close()
	_, err = newClient(t, tn.cfg, nil).Decrypt(t.Context(), obj, tn.session(t), approve, nil)
	if !errors.Is(err, seal.ErrNotEnoughKeys) || !errors.Is(err, seal.ErrInvalidKey) {
		t.Fatalf("wrong server and a dead one: %v, want ErrNotEnoughKeys and ErrInvalidKey", err)
	}
}

func TestClientNoAccessIsFinal(t *testing.T) {
	tn := newTestNet(t, []int{1, 1}, 2, func(int, seal.Address) sealserver.Policy { return sealserver.Allowlist() })
	counters := make([]*counting, 2)
	for i := range counters {
		counters[i] = &counting{h: tn.servers[i]}
		tn.https[i].Config.Handler = counters[i]
	}
	obj := encryptFor(t, tn, "a", "msg")
	_, err := newClient(t, tn.cfg, nil).Decrypt(t.Context(), obj, tn.session(t), approve, nil)
	if !errors.Is(err, seal.ErrNoAccess) || !errors.Is(err, seal.ErrKeyServer) {
		t.Fatalf("%v, want ErrNoAccess", err)
	}
	var se *seal.ServerError
	if !errors.As(err, &se) || se.Status != http.StatusForbidden || se.Kind != "NoAccess" {
		t.Fatalf("ServerError = %+v", se)
	}
	// The first refusal puts the threshold out of reach, which may cancel
	// the other request; none is retried.
	total := int64(0)
	for i, c := range counters {
		n := c.n.Load()
		total += n
		if n > 1 {
			t.Errorf("server %d got %d requests; 403 NoAccess must not be retried", i, n)
		}
	}
	if total == 0 {
		t.Error("no request reached a server")
	}
}

// scripted answers a fixed sequence of error responses, then passes to the
// real server.
type scripted struct {
	real   http.Handler
	mu     sync.Mutex
	script []func(w http.ResponseWriter)
	n      int
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.n++
	var step func(http.ResponseWriter)
	if len(s.script) > 0 {
		step, s.script = s.script[0], s.script[1:]
	}
	s.mu.Unlock()
	if step != nil {
		io.Copy(io.Discard, r.Body)
		step(w)
		return
	}
	s.real.ServeHTTP(w, r)
}

func answer(status int, kind string, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": kind, "message": "scripted " + kind})
	}
}

func TestClientRetries(t *testing.T) {
	for _, c := range []struct {
		name     string
		script   []func(http.ResponseWriter)
		ok       bool
		requests int
		want     error
	}{
		{"503 then OK", []func(http.ResponseWriter){answer(503, "Failure"), answer(503, "Failure")}, true, 3, nil},
		{"429 with Retry-After then OK", []func(http.ResponseWriter){answer(429, "", "Retry-After", "1")}, true, 2, nil},
		{"InvalidParameter then OK", []func(http.ResponseWriter){answer(403, "InvalidParameter"), answer(403, "InvalidParameter")}, true, 3, nil},
		{"503 every time", []func(http.ResponseWriter){answer(503, "Failure"), answer(503, "Failure"), answer(503, "Failure")}, false, 3, seal.ErrKeyServer},
		{"InvalidParameter every time", []func(http.ResponseWriter){answer(403, "InvalidParameter"), answer(403, "InvalidParameter"), answer(403, "InvalidParameter")}, false, 3, seal.ErrKeyServer},
		{"InvalidPTB is final", []func(http.ResponseWriter){answer(403, "InvalidPTB")}, false, 1, seal.ErrInvalidPTB},
		{"400 is final", []func(http.ResponseWriter){answer(400, "InvalidSDKVersion")}, false, 1, seal.ErrKeyServer},
		{"InvalidCertificate is final", []func(http.ResponseWriter){answer(403, "InvalidCertificate")}, false, 1, seal.ErrSessionExpired},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := newTestNet(t, []int{1}, 1, nil)
			s := &scripted{real: tn.servers[0], script: c.script}
			tn.https[0].Config.Handler = s
			obj := encryptFor(t, tn, "a", "msg")
			_, err := newClient(t, tn.cfg, nil).Decrypt(t.Context(), obj, tn.session(t), approve, nil)
			if c.ok != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("err = %v", err)
			}
			if s.n != c.requests {
				t.Fatalf("%d requests, want %d", s.n, c.requests)
			}
		})
	}
}

// A key server's URL path and query may carry an API key: errors show only
// scheme://host:port.
func TestClientRedactsURLs(t *testing.T) {
	tn := newTestNet(t, []int{1}, 1, nil)
	const secretPath, secretQuery = "tenant-8f3a9c", "apikey=SUPERSECRET"
	var gotPath, gotKey string
	tn.https[0].Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotKey = r.URL.Path, r.URL.Query().Get("apikey")
		answer(http.StatusUnauthorized, "", "")(w)
	})
	cfg := tn.cfg
	cfg.Servers = append([]seal.KeyServer(nil), cfg.Servers...)
	cfg.Servers[0].URL = tn.https[0].URL + "/" + secretPath + "/?" + secretQuery
	obj := encryptFor(t, tn, "a", "msg")
	_, err := newClient(t, cfg, nil).Decrypt(t.Context(), obj, tn.session(t), approve, nil)
	if err == nil {
		t.Fatal("decrypt succeeded")
	}
	if gotPath != "/"+secretPath+"/v1/fetch_key" || gotKey != "SUPERSECRET" {
		t.Fatalf("request went to %q with key %q", gotPath, gotKey)
	}
	if strings.Contains(err.Error(), secretPath) || strings.Contains(err.Error(), "SUPERSECRET") || !strings.Contains(err.Error(), tn.https[0].URL) {
		t.Fatalf("error leaks the URL or lacks the host: %v", err)
	}
	// Transport errors too.
	tn.https[0].Close()
	_, err = newClient(t, cfg, nil).Decrypt(t.Context(), obj, tn.session(t), approve, nil)
	if err == nil || strings.Contains(err.Error(), secretPath) || strings.Contains(err.Error(), "SUPERSECRET") {
		t.Fatalf("transport error leaks the URL: %v", err)
	}
}

// A redirect is an error answer, not followed: it would carry the request
// and its API key to a host the configuration does not name.
func TestClientDoesNotFollowRedirects(t *testing.T) {
	tn := newTestNet(t, []int{1}, 1, nil)
	elsewhere := newTestNet(t, []int{1}, 1, nil)
	target := &counting{h: elsewhere.servers[0]}
	elsewhere.https[0].Config.Handler = target
	tn.https[0].Config.Handler = http.RedirectHandler(elsewhere.https[0].URL+"/v1/fetch_key", http.StatusTemporaryRedirect)
	obj := encryptFor(t, tn, "a", "msg")
	_, err := newClient(t, tn.cfg, nil).Decrypt(t.Context(), obj, tn.session(t), approve, nil)
	var se *seal.ServerError
	if !errors.As(err, &se) || se.Status != http.StatusTemporaryRedirect {
		t.Fatalf("%v, want a 307 ServerError", err)
	}
	if n := target.n.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests", n)
	}
}

func TestClientAPIKeyHeader(t *testing.T) {
	tn := newTestNet(t, []int{1}, 1, nil)
	tn.swap(0, func(real http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-API-Key") != "k-123" {
				answer(http.StatusUnauthorized, "", "")(w)
				return
			}
			real.ServeHTTP(w, r)
		})
	})
	cfg := tn.cfg
	cfg.Servers = append([]seal.KeyServer(nil), cfg.Servers...)
	cfg.Servers[0].APIKeyHeader, cfg.Servers[0].APIKey = "X-API-Key", seal.NewSecret("k-123")
	obj := encryptFor(t, tn, "a", "msg")
	if _, err := newClient(t, cfg, nil).Decrypt(t.Context(), obj, tn.session(t), approve, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(t, tn.cfg, nil).Decrypt(t.Context(), obj, tn.session(t), approve, nil); err == nil {
		t.Fatal("decrypted without the API key")
	}
}

func TestClientCache(t *testing.T) {
	tn := newTestNet(t, []int{1, 1}, 2, nil)
	counters := []*counting{{h: tn.servers[0]}, {h: tn.servers[1]}}
	for i := range counters {
		tn.https[i].Config.Handler = counters[i]
	}
	c := newClient(t, tn.cfg, &seal.ClientOptions{CacheEntries: 2})
	sk := tn.session(t)
	a1, a2, b := encryptFor(t, tn, "a", "one"), encryptFor(t, tn, "a", "two"), encryptFor(t, tn, "b", "three")
	requests := func() int64 { return counters[0].n.Load() + counters[1].n.Load() }
	for _, step := range []struct {
		obj   []byte
		want  string
		total int64
	}{
		{a1, "one", 2},  // fetched from both servers
		{a2, "two", 2},  // same identity: cached
		{b, "three", 4}, // another identity: fetched; the cache holds 2 entries, so a's are evicted
		{a1, "one", 6},  // fetched again
		{a1, "one", 6},  // cached
		{b, "three", 8}, // evicted by a
	} {
		pt, err := c.Decrypt(t.Context(), step.obj, sk, approve, nil)
		if err != nil || string(pt) != step.want {
			t.Fatalf("%s: %v", step.want, err)
		}
		if n := requests(); n != step.total {
			t.Fatalf("after %s: %d requests, want %d", step.want, n, step.total)
		}
	}
	c.ForgetKeys()
	if _, err := c.Decrypt(t.Context(), a1, sk, approve, nil); err != nil || requests() != 10 {
		t.Fatalf("after ForgetKeys: %v, %d requests", err, requests())
	}
}

func TestClientSessionChecks(t *testing.T) {
	tn := newTestNet(t, []int{1}, 1, nil)
	obj := encryptFor(t, tn, "a", "msg")
	sk := tn.session(t)
	later := newClient(t, tn.cfg, &seal.ClientOptions{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	if _, err := later.Decrypt(t.Context(), obj, sk, approve, nil); !errors.Is(err, seal.ErrSessionExpired) {
		t.Fatalf("expired session: %v", err)
	}
	other, err := seal.NewSessionKey(tn.user, seal.Address{1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(t, tn.cfg, nil).Decrypt(t.Context(), obj, other, approve, nil); !errors.Is(err, seal.ErrInvalidConfig) {
		t.Fatalf("session for another package: %v", err)
	}
	for _, ttl := range []time.Duration{-time.Minute, 31 * time.Minute, 90 * time.Second} {
		if _, err := seal.NewSessionKey(tn.user, tn.pkg, &seal.SessionOptions{TTL: ttl}); !errors.Is(err, seal.ErrInvalidConfig) {
			t.Errorf("TTL %v: %v", ttl, err)
		}
	}
}

// Hostile 200 answers: each makes that server fail with ErrMalformed.
func TestClientHostileResponses(t *testing.T) {
	for _, c := range []struct {
		name string
		body string
	}{
		{"not JSON", "<html>"},
		{"one ciphertext part", `{"decryption_keys":[{"id":[1],"encrypted_key":["AA=="]}]}`},
		{"not base64", `{"decryption_keys":[{"id":[1],"encrypted_key":["!!","!!"]}]}`},
		{"identity points", `{"decryption_keys":[{"id":[1],"encrypted_key":["wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"]}]}`},
		{"id byte out of range", `{"decryption_keys":[{"id":[256],"encrypted_key":["",""]}]}`},
		{"no keys", `{"decryption_keys":[]}`},
		{"too large", `{"decryption_keys":[],"pad":"` + strings.Repeat("x", 2<<20) + `"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := newTestNet(t, []int{1}, 1, nil)
			tn.https[0].Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, c.body)
			})
			obj := encryptFor(t, tn, "a", "msg")
			_, err := newClient(t, tn.cfg, nil).Decrypt(t.Context(), obj, tn.session(t), approve, nil)
			if !errors.Is(err, seal.ErrMalformed) || !errors.Is(err, seal.ErrNotEnoughKeys) {
				t.Fatalf("%v, want ErrMalformed", err)
			}
		})
	}
}

func TestClientConcurrentDecrypts(t *testing.T) {
	tn := newTestNet(t, []int{1, 1, 1}, 2, nil)
	c := newClient(t, tn.cfg, nil)
	sk := tn.session(t)
	var objs [][]byte
	for i := 0; i < 6; i++ {
		objs = append(objs, encryptFor(t, tn, string(rune('a'+i%3)), "m"))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(objs))
	for _, o := range objs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pt, err := c.Decrypt(t.Context(), o, sk, approve, nil)
			if err == nil && string(pt) != "m" {
				err = errors.New("wrong plaintext")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestFetchKeysThenDecryptOffline(t *testing.T) {
	tn := newTestNet(t, []int{2, 1}, 2, nil)
	c := newClient(t, tn.cfg, nil)
	sk := tn.session(t)
	if err := c.FetchKeys(t.Context(), sk, approve, [][]byte{[]byte("x"), []byte("y")}, 2); err != nil {
		t.Fatal(err)
	}
	// Every server is gone; the cached keys still decrypt both identities.
	for _, h := range tn.https {
		h.Close()
	}
	for _, id := range []string{"x", "y"} {
		if pt, err := c.Decrypt(t.Context(), encryptFor(t, tn, id, "ok"), sk, approve, nil); err != nil || string(pt) != "ok" {
			t.Fatalf("%s: %v", id, err)
		}
	}
	if err := c.FetchKeys(t.Context(), sk, approve, [][]byte{[]byte("z")}, 4); !errors.Is(err, seal.ErrNotEnoughKeys) {
		t.Fatalf("threshold above the configured weight: %v", err)
	}
}

func TestNewClientValidates(t *testing.T) {
	tn := newTestNet(t, []int{1}, 1, nil)
	for _, mutate := range []func(*seal.Config){
		func(c *seal.Config) { c.Servers[0].URL = "ftp://x" },
		func(c *seal.Config) { c.Servers[0].URL = "http://user:pw@h" },
		func(c *seal.Config) { c.Servers[0].URL = "" },
		func(c *seal.Config) { c.Servers[0].APIKeyHeader = "X-API-Key" },
		func(c *seal.Config) { c.Threshold = 2 },
	} {
		cfg := tn.cfg
		cfg.Servers = append([]seal.KeyServer(nil), cfg.Servers...)
		mutate(&cfg)
		if _, err := seal.NewClient(cfg, nil); !errors.Is(err, seal.ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg.Servers[0].URL, err)
		}
	}
}
