package sealserver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/sealserver"
)

var (
	pkg      = seal.MustParseAddress("0xabc")
	serverID = seal.MustParseAddress("0x5e1")
	// clock is the servers' fixed time: no test depends on the wall clock.
	clock = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
)

type fixture struct {
	srv     *sealserver.Server
	http    *httptest.Server
	mk      *seal.MasterKey
	allowed *seal.SuiKey
}

func newFixture(t testing.TB, mutate func(*sealserver.Config)) *fixture {
	t.Helper()
	mk, err := seal.GenerateMasterKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	user, err := seal.GenerateSuiKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sealserver.Config{ObjectID: serverID, MasterKey: mk, Policy: sealserver.Allowlist(user.Address()),
		Now: func() time.Time { return clock }}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := sealserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &fixture{srv: srv, http: hs, mk: mk, allowed: user}
}

func ptbFor(t testing.TB, p seal.Address, ids ...string) []byte {
	t.Helper()
	var bs [][]byte
	for _, id := range ids {
		bs = append(bs, []byte(id))
	}
	ptb, err := seal.Approve{Module: "allowlist"}.BuildPTB(p, bs)
	if err != nil {
		t.Fatal(err)
	}
	return ptb.MarshalBCS()
}

func session(t testing.TB, user *seal.SuiKey, p seal.Address, opts *seal.SessionOptions) *seal.SessionKey {
	t.Helper()
	if opts == nil {
		opts = &seal.SessionOptions{}
	}
	if opts.Now.IsZero() {
		opts.Now = clock
	}
	sk, err := seal.NewSessionKey(user, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return sk
}

func request(t testing.TB, sk *seal.SessionKey, ptb []byte) *seal.FetchKeyRequest {
	t.Helper()
	req, err := sk.FetchKeyRequest(ptb)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

type reply struct {
	status int
	header http.Header
	body   []byte
	kind   string
}

func post(t testing.TB, url string, body []byte, header map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/fetch_key", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Client-Sdk-Version", "1.0.0")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return do(t, req)
}

func do(t testing.TB, req *http.Request) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: b}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil {
		r.kind = e.Error
	}
	return r
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFetchKeyOK(t *testing.T) {
	f := newFixture(t, nil)
	sk := session(t, f.allowed, pkg, nil)
	r := post(t, f.http.URL, mustJSON(t, request(t, sk, ptbFor(t, pkg, "a", "bc"))), nil)
	if r.status != http.StatusOK || r.header.Get("X-KeyServer-Version") != sealserver.APIVersion {
		t.Fatalf("status %d, version %q: %s", r.status, r.header.Get("X-KeyServer-Version"), r.body)
	}
	var resp struct {
		DecryptionKeys []struct {
			ID           []int    `json:"id"`
			EncryptedKey []string `json:"encrypted_key"`
		} `json:"decryption_keys"`
	}
	if err := json.Unmarshal(r.body, &resp); err != nil || len(resp.DecryptionKeys) != 2 {
		t.Fatalf("body %s: %v", r.body, err)
	}
	for i, id := range []string{"a", "bc"} {
		dk := resp.DecryptionKeys[i]
		want := seal.FullID(pkg, []byte(id))
		if len(dk.ID) != len(want) {
			t.Fatalf("key %d: id %v", i, dk.ID)
		}
		for j := range want {
			if dk.ID[j] != int(want[j]) {
				t.Fatalf("key %d: id %v, want %v", i, dk.ID, want)
			}
		}
		for _, p := range dk.EncryptedKey {
			if b, err := base64.StdEncoding.DecodeString(p); err != nil || seal.CheckG1(b) != nil {
				t.Fatalf("key %d: ciphertext part %q", i, p)
			}
		}
		if len(dk.EncryptedKey) != 2 {
			t.Fatalf("key %d: %d parts", i, len(dk.EncryptedKey))
		}
	}
}

// Every refusal of the real server, with its status and error kind.
func TestFetchKeyRefusals(t *testing.T) {
	f := newFixture(t, func(c *sealserver.Config) { c.Packages = []seal.Address{pkg} })
	stranger, _ := seal.GenerateSuiKey(nil)
	good := func() *seal.FetchKeyRequest { return request(t, session(t, f.allowed, pkg, nil), ptbFor(t, pkg, "a")) }
	other := request(t, session(t, f.allowed, pkg, nil), ptbFor(t, pkg, "a"))
	identity := base64.StdEncoding.EncodeToString(append([]byte{0xc0}, make([]byte, 47)...))
	trailing := append(ptbFor(t, pkg, "a"), 0)

	cases := []struct {
		name   string
		body   func() []byte
		header map[string]string
		status int
		kind   string
	}{
		{"no SDK version", func() []byte { return mustJSON(t, good()) }, map[string]string{"Client-Sdk-Version": ""}, 400, "MissingRequiredHeader"},
		{"SDK version not semver", func() []byte { return mustJSON(t, good()) }, map[string]string{"Client-Sdk-Version": "1.0"}, 400, "InvalidSDKVersion"},
		{"SDK version leading zero", func() []byte { return mustJSON(t, good()) }, map[string]string{"Client-Sdk-Version": "01.0.0"}, 400, "InvalidSDKVersion"},
		{"not JSON content type", func() []byte { return mustJSON(t, good()) }, map[string]string{"Content-Type": "text/plain"}, 415, ""},
		{"bad JSON", func() []byte { return []byte("{") }, nil, 400, ""},
		{"wrong JSON type", func() []byte { return []byte(`{"ptb":1}`) }, nil, 422, ""},
		{"missing field", func() []byte {
			r := good()
			b := mustJSON(t, r)
			return bytes.Replace(b, []byte(`"enc_key"`), []byte(`"enc_kex"`), 1)
		}, nil, 422, ""},
		{"enc_key identity", func() []byte { r := good(); r.EncKey = identity; return mustJSON(t, r) }, nil, 422, ""},
		{"enc_verification_key is G1", func() []byte { r := good(); r.EncVerificationKey = r.EncKey; return mustJSON(t, r) }, nil, 422, ""},
		{"short request signature", func() []byte { r := good(); r.RequestSignature = "AAAA"; return mustJSON(t, r) }, nil, 422, ""},
		{"bad user address", func() []byte {
			r := good()
			b := bytes.Replace(mustJSON(t, r), []byte(r.Certificate.User.String()), []byte("nothex"), 1)
			return b
		}, nil, 422, ""},
		{"PTB not base64", func() []byte { r := good(); r.PTB = "!!"; return mustJSON(t, r) }, nil, 403, "InvalidPTB"},
		{"PTB with a trailing byte", func() []byte { r := good(); r.PTB = base64.StdEncoding.EncodeToString(trailing); return mustJSON(t, r) }, nil, 403, "InvalidPTB"},
		{"PTB calling approve", func() []byte {
			p, _ := seal.ParsePTB(ptbFor(t, pkg, "a"))
			p.Commands[0].Function = "approve"
			return mustJSON(t, request(t, session(t, f.allowed, pkg, nil), p.MarshalBCS()))
		}, nil, 403, "InvalidPTB"},
		{"unsupported package", func() []byte {
			return mustJSON(t, request(t, session(t, f.allowed, seal.Address{7}, nil), ptbFor(t, seal.Address{7}, "a")))
		}, nil, 400, "UnsupportedPackageId"},
		{"MVR name", func() []byte { r := good(); n := "@x/y"; r.Certificate.MVRName = &n; return mustJSON(t, r) }, nil, 403, "InvalidMVRName"},
		{"TTL above the maximum", func() []byte { r := good(); r.Certificate.TTLMin = 31; return mustJSON(t, r) }, nil, 403, "InvalidCertificate"},
		{"created in the future", func() []byte {
			return mustJSON(t, request(t, session(t, f.allowed, pkg, &seal.SessionOptions{Now: clock.Add(time.Second), ClockSkew: -1}), ptbFor(t, pkg, "a")))
		}, nil, 403, "InvalidCertificate"},
		{"expired", func() []byte {
			return mustJSON(t, request(t, session(t, f.allowed, pkg, &seal.SessionOptions{Now: clock.Add(-11 * time.Minute), ClockSkew: -1}), ptbFor(t, pkg, "a")))
		}, nil, 403, "InvalidCertificate"},
		{"user signature of another session", func() []byte {
			r := good()
			r.Certificate.Signature = other.Certificate.Signature
			return mustJSON(t, r)
		}, nil, 403, "InvalidSignature"},
		{"certificate claims another user", func() []byte { r := good(); r.Certificate.User = stranger.Address(); return mustJSON(t, r) }, nil, 403, "InvalidSignature"},
		{"session signs another package", func() []byte {
			r := request(t, session(t, f.allowed, seal.Address{7}, nil), ptbFor(t, pkg, "a"))
			return mustJSON(t, r)
		}, nil, 403, "InvalidSignature"},
		{"enc key swapped after signing", func() []byte {
			r := good()
			r.EncKey, r.EncVerificationKey = other.EncKey, other.EncVerificationKey
			return mustJSON(t, r)
		}, nil, 403, "InvalidSessionSignature"},
		{"PTB swapped after signing", func() []byte {
			r := good()
			r.PTB = base64.StdEncoding.EncodeToString(ptbFor(t, pkg, "b"))
			return mustJSON(t, r)
		}, nil, 403, "InvalidSessionSignature"},
		{"not on the allowlist", func() []byte { return mustJSON(t, request(t, session(t, stranger, pkg, nil), ptbFor(t, pkg, "a"))) }, nil, 403, "NoAccess"},
		{"body too large", func() []byte { return append([]byte(`{"ptb":"`), bytes.Repeat([]byte("A"), 200<<10)...) }, nil, 413, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, f.http.URL, c.body(), c.header)
			if r.status != c.status || r.kind != c.kind {
				t.Fatalf("status %d kind %q, want %d %q: %s", r.status, r.kind, c.status, c.kind, r.body)
			}
			if r.header.Get("X-KeyServer-Version") != sealserver.APIVersion || r.header.Get("X-KeyServer-GitVersion") == "" {
				t.Fatalf("missing version headers: %v", r.header)
			}
		})
	}
}

func TestServiceEndpoint(t *testing.T) {
	f := newFixture(t, nil)
	get := func(q string, version string) reply {
		req, _ := http.NewRequest(http.MethodGet, f.http.URL+"/v1/service"+q, nil)
		if version != "" {
			req.Header.Set("Client-Sdk-Version", version)
		}
		return do(t, req)
	}
	r := get("?service_id=0x5e1", "1.4.12")
	var resp struct {
		ServiceID string `json:"service_id"`
		PoP       string `json:"pop"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &resp) != nil || resp.ServiceID != serverID.String() {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	pop, _ := base64.StdEncoding.DecodeString(resp.PoP)
	if err := f.srv.PublicKey().VerifyProofOfPossession(serverID, pop); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ q, version, kind string }{
		{"?service_id=0x5e2", "1.0.0", "InvalidServiceId"},
		{"?service_id=5e1", "1.0.0", "InvalidServiceId"},
		{"", "1.0.0", "InvalidServiceId"},
		{"?service_id=0x5e1", "", "MissingRequiredHeader"},
	} {
		if r := get(c.q, c.version); r.status != 400 || r.kind != c.kind {
			t.Errorf("%q: status %d kind %q, want 400 %s", c.q, r.status, r.kind, c.kind)
		}
	}
	if r := do(t, mustReq(t, http.MethodGet, f.http.URL+"/v1/fetch_key")); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/fetch_key: %d", r.status)
	}
}

func mustReq(t testing.TB, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// The Go client against three local servers (2-of-3), one refusing.
func TestClientAgainstServers(t *testing.T) {
	user, _ := seal.GenerateSuiKey(nil)
	cfg := seal.Config{PackageID: pkg, Threshold: 2}
	for i := 0; i < 3; i++ {
		policy := sealserver.Allowlist(user.Address())
		if i == 1 {
			policy = sealserver.Allowlist()
		}
		mk, _ := seal.GenerateMasterKey(nil)
		srv, err := sealserver.New(sealserver.Config{ObjectID: seal.Address{31: byte(i + 1)}, MasterKey: mk, Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		cfg.Servers = append(cfg.Servers, srv.KeyServer(hs.URL))
	}
	obj, _, err := seal.Encrypt(&cfg, []byte("agent"), []byte("brain"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := seal.NewClient(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := seal.NewSessionKey(user, pkg, nil)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := c.Decrypt(t.Context(), obj, sk, seal.Approve{Module: "allowlist"}, &seal.DecryptOptions{CheckShareConsistency: true})
	if err != nil || string(pt) != "brain" {
		t.Fatalf("decrypt: %v", err)
	}
}

func TestNewRequiresKeyAndPolicy(t *testing.T) {
	mk, _ := seal.GenerateMasterKey(nil)
	if _, err := sealserver.New(sealserver.Config{Policy: sealserver.Open()}); err == nil {
		t.Error("no master key accepted")
	}
	if _, err := sealserver.New(sealserver.Config{MasterKey: mk}); err == nil {
		t.Error("no policy accepted")
	}
}

func TestServeLoopbackOnly(t *testing.T) {
	f := newFixture(t, nil)
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:2024", "example.com:2024", "nonsense"} {
		if err := f.srv.ListenAndServe(t.Context(), addr); err == nil || !strings.Contains(err.Error(), addr) {
			t.Errorf("ListenAndServe(%q) = %v, want a refusal", addr, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(ctx, ln) }()
	sk := session(t, f.allowed, pkg, nil)
	if r := post(t, "http://"+ln.Addr().String(), mustJSON(t, request(t, sk, ptbFor(t, pkg, "a"))), nil); r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}
