package daemon

// Tests of the HTTP API against a real daemon on a devnet, over loopback
// TCP and a Unix socket: who may post receipts, what a hostile client can
// make the daemon hold, spend or keep, and what readiness says when a
// snapshot fails.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/wait"
)

// withToken configures http.token from a 0600 file and returns the token.
func withToken(t *testing.T, cfg *config.Config) string {
	t.Helper()
	tok := "tok-" + strings.Repeat("0123456789", 3)
	p := filepath.Join(t.TempDir(), "http.token")
	if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.Token = config.SecretRef{File: p}
	return tok
}

// withSocket configures http.socket with mode and returns its path.
func withSocket(t *testing.T, cfg *config.Config, mode fs.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hermesd.sock")
	cfg.HTTP.Socket, cfg.HTTP.SocketMode = p, config.FileMode(mode)
	return p
}

// startDaemon runs a daemon on the devnet's configuration; tune, if not
// nil, sees it before it starts serving.
func startDaemon(t *testing.T, w *world, tune func(*Daemon)) *Daemon {
	t.Helper()
	log := testLogger(t)
	d, err := New(t.Context(), w.dn.Config, log, compose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(d)
	}
	d.Start(context.Background())
	t.Cleanup(func() { closeAtCleanup(d) })
	return d
}

// call is one HTTP request to the daemon.
type call struct {
	method string // default POST
	path   string
	body   io.Reader
	ctype  string // Content-Type; "" sends none
	auth   string // Authorization; "" sends none
	host   string // Host header; "" = the address dialled
	header map[string]string
	socket string // dial this Unix socket instead of TCP
}

type answer struct {
	code int
	body []byte
	size int64 // the whole body, also past what was kept
}

// maxKept bounds what a test keeps of an answer.
const maxKept = 1 << 20

func do(t *testing.T, d *Daemon, c call) answer {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	base := "http://" + d.Addr()
	if c.socket != "" {
		sock := c.socket
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", sock)
		}
		base = "http://hermesd"
	}
	client := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	if c.method == "" {
		c.method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(t.Context(), c.method, base+c.path, c.body)
	if err != nil {
		t.Fatal(err)
	}
	if c.ctype != "" {
		req.Header.Set("Content-Type", c.ctype)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	if c.host != "" {
		req.Host = c.host
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKept))
	if err != nil {
		t.Fatal(err)
	}
	rest, _ := io.Copy(io.Discard, resp.Body)
	return answer{code: resp.StatusCode, body: body, size: int64(len(body)) + rest}
}

// receiptLine is a runtime receipt (stratum/receipt/v2) signed by key.
func receiptLine(t *testing.T, callID string, ts int64, key *ecdsa.PrivateKey) string {
	t.Helper()
	f := receipts.DigestFields{CallID: callID, TokenID: "1", Subscriber: "0x9F2dC1b0E5bA3c47d1F08e6A2B4c5D7e8F901234",
		OutputHash: "0x" + strings.Repeat("bb", 32), StateDeltaHash: "0x" + strings.Repeat("33", 32), TS: ts}
	sig, err := receipts.Sign(f, key)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"schemaVersion":"stratum/receipt/v2","tokenId":1,"subscriber":%q,"callId":%q,"outputHash":%q,`+
		`"stateDeltaHash":%q,"ts":%d,"signature":%q}`, f.Subscriber, callID, f.OutputHash, f.StateDeltaHash, ts, sig)
}

// forgedLines are n receipts no trusted operator signed: even i signed by
// a stranger, odd i signed by trusted and then tampered with (one
// signature byte changed).
func forgedLines(t *testing.T, n int, trusted *ecdsa.PrivateKey) []string {
	t.Helper()
	stranger, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, n)
	for i := range out {
		if i%2 == 0 {
			out[i] = receiptLine(t, fmt.Sprintf("forged-%d", i), int64(1700000000+i), stranger)
			continue
		}
		l := receiptLine(t, fmt.Sprintf("forged-%d", i), int64(1700000000+i), trusted)
		j := strings.LastIndex(l, `"signature":"0x`) + len(`"signature":"0x`) + 10
		c := byte('0')
		if l[j] == '0' {
			c = '1'
		}
		out[i] = l[:j] + string(c) + l[j+1:]
	}
	return out
}

func importReport(t *testing.T, a answer) receipts.ImportReport {
	t.Helper()
	var rep receipts.ImportReport
	if err := json.Unmarshal(a.body, &rep); err != nil {
		t.Fatalf("import answer (HTTP %d) is not a report: %v: %.300s", a.code, err, a.body)
	}
	return rep
}

func errorOf(a answer) string {
	var e struct{ Error string }
	json.Unmarshal(a.body, &e)
	return e.Error
}

// TestReceiptsEndpointGuards: a state-changing request needs the bearer
// token over TCP (or the Unix socket), must name this server in Host,
// must not come from a browser (Origin, Sec-Fetch-Site) and must declare a
// JSON body; anything else is refused before the body is read, and
// changes nothing.
func TestReceiptsEndpointGuards(t *testing.T) {
	t.Parallel()
	tok := uint64(1)
	w := newWorld(t, devnet.Agent{ID: "alpha", TokenID: &tok})
	seedBrain(t, w.brain("alpha"))
	token := withToken(t, w.dn.Config)
	sock := withSocket(t, w.dn.Config, 0o660)
	d := startDaemon(t, w, nil)
	a, _ := d.Agent("alpha")
	key := w.dn.SignerKey
	_, port, _ := net.SplitHostPort(d.Addr())
	bearer := "Bearer " + token
	const nd = "application/x-ndjson"

	st, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Type() != fs.ModeSocket || st.Mode().Perm() != 0o660 {
		t.Fatalf("socket %s: mode %v, want a socket with 0660", sock, st.Mode())
	}

	cases := []struct {
		name   string
		c      call
		want   int
		reason string // in the error message
	}{
		{"no token", call{ctype: nd}, http.StatusUnauthorized, "bearer token"},
		{"wrong token", call{ctype: nd, auth: "Bearer " + strings.Repeat("x", len(token))}, http.StatusUnauthorized, "bearer token"},
		{"token prefix", call{ctype: nd, auth: bearer[:len(bearer)-1]}, http.StatusUnauthorized, "bearer token"},
		{"token and more", call{ctype: nd, auth: bearer + "x"}, http.StatusUnauthorized, "bearer token"},
		{"basic auth", call{ctype: nd, auth: "Basic " + token}, http.StatusUnauthorized, "bearer token"},
		{"text/plain", call{ctype: "text/plain", auth: bearer}, http.StatusUnsupportedMediaType, "Content-Type"},
		{"form", call{ctype: "application/x-www-form-urlencoded", auth: bearer}, http.StatusUnsupportedMediaType, "Content-Type"},
		{"multipart", call{ctype: "multipart/form-data; boundary=x", auth: bearer}, http.StatusUnsupportedMediaType, "Content-Type"},
		{"no content type", call{auth: bearer}, http.StatusUnsupportedMediaType, "Content-Type"},
		{"foreign host", call{ctype: nd, auth: bearer, host: "evil.example:" + port}, http.StatusMisdirectedRequest, "Host"},
		{"foreign host, no port", call{ctype: nd, auth: bearer, host: "evil.example"}, http.StatusMisdirectedRequest, "Host"},
		{"our host, other port", call{ctype: nd, auth: bearer, host: "127.0.0.1:1"}, http.StatusMisdirectedRequest, "Host"},
		{"origin", call{ctype: nd, auth: bearer, header: map[string]string{"Origin": "http://evil.example"}}, http.StatusForbidden, "cross-origin"},
		{"origin null", call{ctype: nd, auth: bearer, header: map[string]string{"Origin": "null"}}, http.StatusForbidden, "cross-origin"},
		{"same origin", call{ctype: nd, auth: bearer, header: map[string]string{"Origin": "http://" + d.Addr()}}, http.StatusForbidden, "cross-origin"},
		{"cross-site fetch", call{ctype: nd, auth: bearer, header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, http.StatusForbidden, "cross-origin"},
		{"socket, origin", call{ctype: nd, socket: sock, header: map[string]string{"Origin": "http://evil.example"}}, http.StatusForbidden, "cross-origin"},
		{"socket, text/plain", call{ctype: "text/plain", socket: sock}, http.StatusUnsupportedMediaType, "Content-Type"},
		{"unknown agent", call{ctype: nd, auth: bearer, path: "/v1/agents/nobody/receipts"}, http.StatusNotFound, "no agent"},
		{"purge, no token", call{ctype: "application/json", path: "/v1/agents/alpha/quarantine/purge"}, http.StatusUnauthorized, "bearer token"},
		{"purge, text/plain", call{ctype: "text/plain", auth: bearer, path: "/v1/agents/alpha/quarantine/purge"}, http.StatusUnsupportedMediaType, "Content-Type"},
		{"purge, origin", call{ctype: "application/json", auth: bearer, path: "/v1/agents/alpha/quarantine/purge",
			header: map[string]string{"Origin": "http://evil.example"}}, http.StatusForbidden, "cross-origin"},
		{"adopt, no token", call{ctype: "application/json", path: "/v1/agents/alpha/pointer/adopt"}, http.StatusUnauthorized, "bearer token"},
		// DNS rebinding: a page that resolved its own name to 127.0.0.1
		// reads nothing either.
		{"status, foreign host", call{method: http.MethodGet, path: "/v1/status", host: "evil.example:" + port}, http.StatusMisdirectedRequest, "Host"},
		{"metrics, foreign host", call{method: http.MethodGet, path: "/metrics", host: "evil.example:" + port}, http.StatusMisdirectedRequest, "Host"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("refused-%d", i)
			c := tc.c
			if c.path == "" {
				c.path = "/v1/agents/alpha/receipts"
			}
			c.body = strings.NewReader(receiptLine(t, id, 1700000000, key))
			ans := do(t, d, c)
			if ans.code != tc.want || !strings.Contains(errorOf(ans), tc.reason) {
				t.Errorf("HTTP %d %q, want %d and a reason mentioning %q", ans.code, errorOf(ans), tc.want, tc.reason)
			}
			if a.Receipts().Has(id) {
				t.Errorf("the refused request imported %s", id)
			}
		})
	}

	// What is allowed: the token over TCP (with the listener's own name or
	// localhost), and the socket without one.
	for _, ok := range []struct {
		name string
		c    call
	}{
		{"token", call{ctype: nd, auth: bearer}},
		{"token, localhost", call{ctype: "application/json; charset=utf-8", auth: bearer, host: "localhost:" + port}},
		{"token, same-origin fetch", call{ctype: nd, auth: bearer, header: map[string]string{"Sec-Fetch-Site": "same-origin"}}},
		{"socket", call{ctype: nd, socket: sock}},
	} {
		id := "accepted-" + strings.ReplaceAll(ok.name, " ", "")
		c := ok.c
		c.path = "/v1/agents/alpha/receipts"
		c.body = strings.NewReader(receiptLine(t, id, 1700000001, key))
		ans := do(t, d, c)
		if ans.code != http.StatusOK || importReport(t, ans).Imported != 1 || !a.Receipts().Has(id) {
			t.Errorf("%s: HTTP %d %s; want the receipt imported", ok.name, ans.code, ans.body)
		}
	}
	if ans := do(t, d, call{method: http.MethodGet, path: "/v1/status"}); ans.code != http.StatusOK {
		t.Errorf("status from loopback: HTTP %d", ans.code)
	}

	// Without http.token no TCP client may change anything, whatever it
	// sends; the socket still works.
	stop(t, d)
	w.dn.Config.HTTP.Token = config.SecretRef{}
	d = startDaemon(t, w, nil)
	a, _ = d.Agent("alpha")
	ans := do(t, d, call{path: "/v1/agents/alpha/receipts", ctype: nd, auth: bearer,
		body: strings.NewReader(receiptLine(t, "no-token-configured", 1700000002, key))})
	if ans.code != http.StatusForbidden || !strings.Contains(errorOf(ans), "http.token") || a.Receipts().Has("no-token-configured") {
		t.Errorf("TCP post without a configured token: HTTP %d %s", ans.code, ans.body)
	}
	ans = do(t, d, call{path: "/v1/agents/alpha/receipts", ctype: nd, socket: sock,
		body: strings.NewReader(receiptLine(t, "via-socket", 1700000003, key))})
	if ans.code != http.StatusOK || !a.Receipts().Has("via-socket") {
		t.Errorf("socket post: HTTP %d %s", ans.code, ans.body)
	}
}

// slowConn opens a raw connection to the daemon and sends head.
func slowConn(t *testing.T, d *Daemon, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", d.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	return c
}

// trickle writes one byte of s at a time until the server closes the
// connection (a write fails) or stop is closed.
func trickle(c net.Conn, s string, stop <-chan struct{}) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i = (i + 1) % len(s) {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return
		}
	}
}

// spooled lists the receipt bodies being spooled.
func spooled(t *testing.T, w *world) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(w.dn.Config.StateDir, "spool", "receipts-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSlowClientsCannotHoldTheImport: a client that trickles its headers
// or its body holds nothing another import needs (the body is spooled
// before the log is touched), and the server's timeouts end it.
func TestSlowClientsCannotHoldTheImport(t *testing.T) {
	t.Parallel()
	tok := uint64(1)
	w := newWorld(t, devnet.Agent{ID: "alpha", TokenID: &tok})
	seedBrain(t, w.brain("alpha"))
	token := withToken(t, w.dn.Config)
	key := w.dn.SignerKey
	post := func(t *testing.T, d *Daemon, id string) answer {
		return do(t, d, call{path: "/v1/agents/alpha/receipts", ctype: "application/x-ndjson", auth: "Bearer " + token,
			body: strings.NewReader(receiptLine(t, id, 1700000000, key))})
	}
	head := func(d *Daemon) string {
		return "POST /v1/agents/alpha/receipts HTTP/1.1\r\nHost: " + d.Addr() + "\r\nAuthorization: Bearer " + token +
			"\r\nContent-Type: application/x-ndjson\r\n"
	}
	body := receiptLine(t, "slow-body", 1700000000, key) + "\n"

	t.Run("others proceed meanwhile", func(t *testing.T) {
		// The daemon's own timeouts: the slow clients stay connected
		// while the test imports, because the test holds them.
		d := startDaemon(t, w, nil)
		a, _ := d.Agent("alpha")
		stopSlow := make(chan struct{})
		defer close(stopSlow)
		hc := slowConn(t, d, head(d))
		go trickle(hc, "X-Slow: 1\r\n", stopSlow)
		bc := slowConn(t, d, head(d)+fmt.Sprintf("Content-Length: %d\r\n\r\n", 1<<20)+body[:10])
		go trickle(bc, body, stopSlow)
		// The body is being spooled.
		wait.For(t, "the slow body to be spooled", func() bool { return len(spooled(t, w)) == 1 })
		for i := range 3 {
			id := fmt.Sprintf("meanwhile-%d", i)
			if ans := post(t, d, id); ans.code != http.StatusOK || !a.Receipts().Has(id) {
				t.Fatalf("import beside the slow clients: HTTP %d %s", ans.code, ans.body)
			}
		}
		stop(t, d)
	})

	t.Run("timeouts end them", func(t *testing.T) {
		d := startDaemon(t, w, func(d *Daemon) {
			for _, s := range d.servers {
				s.ReadHeaderTimeout = 200 * time.Millisecond
				s.ReadTimeout = time.Second
			}
		})
		a, _ := d.Agent("alpha")
		for _, slow := range []struct {
			name    string
			head    string
			trickle string
		}{
			{"headers", head(d), "X-Slow: 1\r\n"},
			{"body", head(d) + fmt.Sprintf("Content-Length: %d\r\n\r\n", 1<<20), body},
		} {
			t.Run(slow.name, func(t *testing.T) {
				c := slowConn(t, d, slow.head)
				stopSlow := make(chan struct{})
				defer close(stopSlow)
				go trickle(c, slow.trickle, stopSlow)
				// The client would go on for ever; the server must end
				// it. The deadline only keeps a broken server from
				// hanging the test.
				c.SetReadDeadline(time.Now().Add(30 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						t.Fatalf("the slow request was served: HTTP %d", resp.StatusCode)
					}
					_, err = c.Read(make([]byte, 1))
				}
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("the server did not end the slow client: %v", err)
				}
				t.Logf("slow %s: ended by the server (%v)", slow.name, err)
			})
		}
		wait.For(t, "the spool to be cleaned", func() bool { return len(spooled(t, w)) == 0 })
		if a.Receipts().Has("slow-body") {
			t.Error("a body the server cut off was imported")
		}
		if ans := post(t, d, "after-timeouts"); ans.code != http.StatusOK {
			t.Errorf("import after the slow clients: HTTP %d %s", ans.code, ans.body)
		}
	})
}

// readyz fetches /readyz.
func readyz(t *testing.T, d *Daemon) (int, readyAnswer) {
	t.Helper()
	ans := do(t, d, call{method: http.MethodGet, path: "/readyz"})
	var r readyAnswer
	if err := json.Unmarshal(ans.body, &r); err != nil {
		t.Fatalf("readyz: %v: %s", err, ans.body)
	}
	return ans.code, r
}

type readyAnswer struct {
	Ready  bool
	Agents []AgentReady
}

func (r readyAnswer) agent(id string) AgentReady {
	for _, a := range r.Agents {
		if a.ID == id {
			return a
		}
	}
	return AgentReady{}
}

// restoredReceipts decrypts blob with the agent's key and returns the
// lines of the receipts.ndjson inside it.
func restoredReceipts(t *testing.T, w *world, id, blob string) []string {
	t.Helper()
	svc, err := compose.Build(t.Context(), w.dn.Config, nil, compose.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ac, err := w.dn.Config.Agent(id)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := svc.Pipeline(ac, t.TempDir(), nil).Restore(t.Context(), blob, dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "receipts.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\n")
}

// checkAllTrusted verifies every line against the devnet's operator.
func checkAllTrusted(t *testing.T, what string, lines []string, trusted common.Address) {
	t.Helper()
	tally, err := receipts.VerifyLines(t.Context(), strings.NewReader(strings.Join(lines, "\n")), []common.Address{trusted}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tally.Trusted != len(lines) || tally.Failed != 0 || tally.Unknown != 0 {
		t.Errorf("%s: %+v; every line must be a trusted receipt", what, tally)
	}
	for _, l := range lines {
		if strings.Contains(l, "forged-") {
			t.Errorf("%s holds a forged receipt: %.120s", what, l)
		}
	}
}

// TestForgedReceiptsNeverReachASnapshot: 20,000 receipts no trusted
// operator signed (unknown signer, tampered signature) are quarantined up
// to the configured count and dropped beyond it, or rejected; none enters
// the log, the brain's receipts.ndjson or the next snapshot, and the agent
// stays ready and keeps publishing.
func TestForgedReceiptsNeverReachASnapshot(t *testing.T) {
	t.Parallel()
	const forged, maxCount = 20_000, 500
	tok := uint64(1)
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth", TokenID: &tok})
	seedBrain(t, w.brain("alpha"))
	token := withToken(t, w.dn.Config)
	w.dn.Config.Receipts.QuarantineMaxCount = maxCount
	w.dn.Config.Receipts.QuarantineMaxBytes = 4 << 20
	d := startDaemon(t, w, nil)
	a, _ := d.Agent("alpha")
	first := published(t, d, "alpha")
	key := w.dn.SignerKey
	lines := forgedLines(t, forged, key)
	legit := []string{receiptLine(t, "legit-1", 1800000000, key), receiptLine(t, "legit-2", 1800000001, key)}
	body := strings.Join(append(append([]string{legit[0]}, lines...), legit[1]), "\n")
	post := func(body string) answer {
		return do(t, d, call{path: "/v1/agents/alpha/receipts", ctype: "application/x-ndjson", auth: "Bearer " + token,
			body: strings.NewReader(body)})
	}

	ans := post(body)
	rep := importReport(t, ans)
	if ans.code != http.StatusOK || rep.Lines != forged+2 || rep.Imported != 2 || rep.Quarantined != maxCount ||
		rep.Dropped != forged-maxCount || len(rep.Problems) > receipts.MaxProblems {
		t.Fatalf("HTTP %d, report %d lines, %d imported, %d quarantined, %d dropped, %d problems",
			ans.code, rep.Lines, rep.Imported, rep.Quarantined, rep.Dropped, len(rep.Problems))
	}
	t.Logf("%d forged receipts: %d quarantined, %d dropped; answer %d bytes", forged, rep.Quarantined, rep.Dropped, ans.size)
	q, err := a.Receipts().Quarantine()
	if err != nil {
		t.Fatal(err)
	}
	if q.Count != maxCount || q.Bytes > 4<<20 {
		t.Fatalf("quarantine %+v, want %d records within 4 MiB", q, maxCount)
	}
	// Again: the quarantine is full and stays so.
	if rep := importReport(t, post(body)); rep.Quarantined != 0 || rep.Dropped != forged || rep.Duplicates != 2 {
		t.Fatalf("second post: %+v", rep)
	}
	if q2, _ := a.Receipts().Quarantine(); q2 != q {
		t.Fatalf("the full quarantine changed: %+v, was %+v", q2, q)
	}

	// The next snapshot carries the trusted receipts and nothing else.
	writeFile(t, filepath.Join(w.brain("alpha"), "after-the-attack.md"), "still backed up\n", 0o644)
	var next string
	wait.For(t, "a snapshot after the attack", func() bool {
		next = published(t, d, "alpha")
		return next != first
	})
	if code, r := readyz(t, d); code != http.StatusOK || !r.agent("alpha").Ready {
		t.Errorf("readyz after the attack: %d %+v", code, r)
	}
	inBlob := restoredReceipts(t, w, "alpha", next)
	owner := crypto.PubkeyToAddress(key.PublicKey)
	checkAllTrusted(t, "the snapshot's receipts.ndjson", inBlob, owner)
	if len(inBlob) != a.Receipts().Len() || !strings.Contains(strings.Join(inBlob, "\n"), `"callId":"legit-2"`) {
		t.Errorf("the snapshot holds %d receipts, the log %d; legit ones missing?", len(inBlob), a.Receipts().Len())
	}
	b, err := os.ReadFile(filepath.Join(w.brain("alpha"), "receipts.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	checkAllTrusted(t, "the brain's receipts.ndjson", strings.Split(string(b), "\n"), owner)

	// Under reject the whole post is refused, trusted lines included.
	stop(t, d)
	w.dn.Config.Receipts.ImportPolicy = "reject"
	d = startDaemon(t, w, nil)
	a, _ = d.Agent("alpha")
	n := a.Receipts().Len()
	ans = post(receiptLine(t, "legit-3", 1800000002, key) + "\n" + strings.Join(lines[:100], "\n"))
	var refused struct {
		Error  string
		Report receipts.ImportReport
	}
	if err := json.Unmarshal(ans.body, &refused); err != nil || ans.code != http.StatusUnprocessableEntity ||
		refused.Report.Rejected != 100 || refused.Report.Imported != 0 || refused.Error == "" {
		t.Fatalf("reject: HTTP %d %.300s", ans.code, ans.body)
	}
	if a.Receipts().Len() != n || a.Receipts().Has("legit-3") {
		t.Fatal("a rejected post changed the log")
	}
	if q3, _ := a.Receipts().Quarantine(); q3.Count != q.Count {
		t.Fatalf("reject quarantined: %+v", q3)
	}
}

// junkBody is size bytes of lines that are not receipts: binary noise,
// control characters (escaped six-fold in JSON), and one line of a
// megabyte.
type junkBody struct {
	n, size int64
}

func (j *junkBody) Read(p []byte) (int, error) {
	if j.n >= j.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), j.size-j.n)]
	for i := range p {
		k := j.n + int64(i)
		switch {
		case k < 1<<20:
			p[i] = 0x01 // one long line of control characters
		case k%997 == 0:
			p[i] = '\n'
		case k%3 == 0:
			p[i] = byte(k * 7)
		default:
			p[i] = '{'
		}
	}
	j.n += int64(len(p))
	return len(p), nil
}

// TestJunkBodyBounded: 8 MiB of junk lines cost a bounded quarantine
// file and a bounded answer; a body past the limit is refused outright.
func TestJunkBodyBounded(t *testing.T) {
	t.Parallel()
	const qBytes = 1 << 20
	tok := uint64(1)
	w := newWorld(t, devnet.Agent{ID: "alpha", TokenID: &tok})
	seedBrain(t, w.brain("alpha"))
	token := withToken(t, w.dn.Config)
	w.dn.Config.Receipts.QuarantineMaxBytes = qBytes
	d := startDaemon(t, w, nil)
	a, _ := d.Agent("alpha")
	wait.For(t, "the first snapshot", func() bool { return a.Status().Last != nil })
	n := a.Receipts().Len()
	post := func(body io.Reader) answer {
		return do(t, d, call{path: "/v1/agents/alpha/receipts", ctype: "application/x-ndjson", auth: "Bearer " + token, body: body})
	}

	ans := post(&junkBody{size: 8 << 20})
	rep := importReport(t, ans)
	q, err := a.Receipts().Quarantine()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("8 MiB of junk: %d lines, %d quarantined, %d dropped; quarantine %d bytes; answer %d bytes",
		rep.Lines, rep.Quarantined, rep.Dropped, q.Bytes, ans.size)
	if ans.code != http.StatusOK || rep.Imported != 0 || rep.Quarantined+rep.Dropped+rep.Blank != rep.Lines || rep.Dropped == 0 {
		t.Fatalf("HTTP %d, report %+v", ans.code, rep)
	}
	if q.Bytes > qBytes {
		t.Errorf("quarantine %d bytes, bound %d", q.Bytes, qBytes)
	}
	if ans.size > 64<<10 {
		t.Errorf("answer %d bytes; the report must be bounded", ans.size)
	}
	if a.Receipts().Len() != n {
		t.Error("junk changed the log")
	}

	ans = post(&junkBody{size: maxReceiptsBody + 1<<20})
	if ans.code != http.StatusRequestEntityTooLarge || ans.size > 64<<10 {
		t.Errorf("a body over %d bytes: HTTP %d, %d bytes", maxReceiptsBody, ans.code, ans.size)
	}
	if q2, _ := a.Receipts().Quarantine(); q2 != q {
		t.Errorf("the refused body reached the quarantine: %+v, was %+v", q2, q)
	}
	wait.For(t, "the spool to be cleaned", func() bool { return len(spooled(t, w)) == 0 })
}

// TestQuarantinePurgeEndpoint: the daemon purges an agent's quarantine on
// an authenticated request and says how many records went.
func TestQuarantinePurgeEndpoint(t *testing.T) {
	t.Parallel()
	tok := uint64(1)
	w := newWorld(t, devnet.Agent{ID: "alpha", TokenID: &tok})
	seedBrain(t, w.brain("alpha"))
	token := withToken(t, w.dn.Config)
	d := startDaemon(t, w, nil)
	a, _ := d.Agent("alpha")
	ans := do(t, d, call{path: "/v1/agents/alpha/receipts", ctype: "application/x-ndjson", auth: "Bearer " + token,
		body: strings.NewReader(strings.Join(forgedLines(t, 7, w.dn.SignerKey), "\n"))})
	if rep := importReport(t, ans); rep.Quarantined != 7 {
		t.Fatalf("quarantined %d", rep.Quarantined)
	}
	purge := func() answer {
		return do(t, d, call{path: "/v1/agents/alpha/quarantine/purge", ctype: "application/json", auth: "Bearer " + token,
			body: strings.NewReader("{}")})
	}
	for _, want := range []int{7, 0} {
		ans := purge()
		var out struct {
			Agent   string
			Removed int
		}
		if err := json.Unmarshal(ans.body, &out); err != nil || ans.code != http.StatusOK || out.Agent != "alpha" || out.Removed != want {
			t.Fatalf("purge: HTTP %d %s, want %d removed", ans.code, ans.body, want)
		}
		if q, err := a.Receipts().Quarantine(); err != nil || q.Count != 0 || q.Bytes != 0 {
			t.Fatalf("after purge: %+v %v", q, err)
		}
	}
	if ans := do(t, d, call{path: "/v1/agents/nobody/quarantine/purge", ctype: "application/json", auth: "Bearer " + token}); ans.code != http.StatusNotFound {
		t.Errorf("purge of an unknown agent: HTTP %d", ans.code)
	}
}

// TestFailedSnapshotShowsInReadyz: a snapshot that fails (here: over the
// blob size limit) makes /readyz answer 503 naming the agent and the
// reason, and /v1/status carry it; the other agent stays ready.
func TestFailedSnapshotShowsInReadyz(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "good"}, devnet.Agent{ID: "big"})
	writeFile(t, filepath.Join(w.brain("good"), "system.md"), "small\n", 0o644)
	writeFile(t, filepath.Join(w.brain("big"), "system.md"), "small for now\n", 0o644)
	// A whole-brain format fails over the blob size limit; v3 would cut
	// the brain into packs instead.
	w.dn.Config.Encryption.Format = "v2"
	w.dn.Config.Walrus.MaxBlobSize = 256 << 10
	d := startDaemon(t, w, nil)
	for _, id := range []string{"good", "big"} {
		a, _ := d.Agent(id)
		wait.For(t, id+" snapshotted", func() bool { return a.Status().Last != nil })
	}
	if code, _ := readyz(t, d); code != http.StatusOK {
		t.Fatalf("readyz before the failure: %d", code)
	}
	noise := make([]byte, 1<<20)
	for i := range noise {
		noise[i] = byte(i*2654435761>>13) ^ byte(i)
	}
	writeFile(t, filepath.Join(w.brain("big"), "weights.bin"), string(noise), 0o644)
	big, _ := d.Agent("big")
	wait.For(t, "the snapshot of big to fail", func() bool { return big.Status().LastError != "" })

	code, r := readyz(t, d)
	bad, good := r.agent("big"), r.agent("good")
	if code != http.StatusServiceUnavailable || r.Ready || bad.Ready || !strings.Contains(bad.Reason, "last snapshot failed") ||
		!strings.Contains(bad.Reason, "limit") || !good.Ready {
		t.Fatalf("readyz: HTTP %d %+v", code, r)
	}
	var st StatusReport
	if err := json.Unmarshal(do(t, d, call{method: http.MethodGet, path: "/v1/status"}).body, &st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Agents {
		if s.ID == "big" && !strings.Contains(s.LastError, "limit") {
			t.Errorf("/v1/status lastError of big = %q", s.LastError)
		}
	}
	t.Logf("readyz: %s: %s", bad.ID, bad.Reason)

	// Back under the limit: ready again.
	if err := os.Remove(filepath.Join(w.brain("big"), "weights.bin")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "big to recover", func() bool { code, _ := readyz(t, d); return code == http.StatusOK })
}

// tokenLine is receiptLine for another tokenId (raw JSON number text).
func tokenLine(t *testing.T, callID, token string, key *ecdsa.PrivateKey) string {
	t.Helper()
	f := receipts.DigestFields{CallID: callID, TokenID: token, Subscriber: "0x9F2dC1b0E5bA3c47d1F08e6A2B4c5D7e8F901234",
		OutputHash: "0x" + strings.Repeat("bb", 32), StateDeltaHash: "0x" + strings.Repeat("33", 32), TS: 1700000000}
	sig, err := receipts.Sign(f, key)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"schemaVersion":"stratum/receipt/v2","tokenId":%s,"subscriber":%q,"callId":%q,"outputHash":%q,`+
		`"stateDeltaHash":%q,"ts":1700000000,"signature":%q}`, token, f.Subscriber, callID, f.OutputHash, f.StateDeltaHash, sig)
}

// TestReceiptsOfOtherTokens: receipts posted to alpha (token 3) for beta's
// token (33) go to beta's log; those of tokens no agent holds (0, 1,
// 123456789, 2^40) and one JavaScript cannot read exactly (2^53 + 1) are
// quarantined in alpha's, with the reason; alpha's snapshot carries its
// own token's receipts only.
func TestReceiptsOfOtherTokens(t *testing.T) {
	t.Parallel()
	three, thirtyThree := uint64(3), uint64(33)
	w := newWorld(t, devnet.Agent{ID: "alpha", TokenID: &three}, devnet.Agent{ID: "beta", TokenID: &thirtyThree})
	seedBrain(t, w.brain("alpha"))
	seedBrain(t, w.brain("beta"))
	token := withToken(t, w.dn.Config)
	d := startDaemon(t, w, nil)
	alpha, _ := d.Agent("alpha")
	beta, _ := d.Agent("beta")
	key := w.dn.SignerKey
	var lines []string
	for i, tok := range []string{"3", "0", "1", "33", "123456789", "1099511627776", "9007199254740993", "3", "33"} {
		lines = append(lines, tokenLine(t, fmt.Sprintf("call-%d", i), tok, key))
	}
	ans := do(t, d, call{path: "/v1/agents/alpha/receipts", ctype: "application/x-ndjson", auth: "Bearer " + token,
		body: strings.NewReader(strings.Join(lines, "\n"))})
	rep := importReport(t, ans)
	if ans.code != http.StatusOK || rep.Imported != 2 || rep.Routed != 2 || rep.Quarantined != 5 ||
		len(rep.Forwarded) != 1 || rep.Forwarded[0].Agent != "beta" || rep.Forwarded[0].Imported != 2 {
		t.Fatalf("HTTP %d: %+v", ans.code, rep)
	}
	statuses := map[receipts.Status]int{}
	for _, p := range rep.Problems {
		statuses[p.Status]++
	}
	if statuses[receipts.StatusForeignToken] != 4 || statuses[receipts.StatusAmbiguousToken] != 1 {
		t.Errorf("problems %+v", rep.Problems)
	}
	if !alpha.Receipts().Has("call-0") || !alpha.Receipts().Has("call-7") || alpha.Receipts().Has("call-3") ||
		!beta.Receipts().Has("call-3") || !beta.Receipts().Has("call-8") || beta.Receipts().Has("call-1") || alpha.Receipts().Has("call-1") {
		t.Errorf("alpha holds %d, beta %d", alpha.Receipts().Len(), beta.Receipts().Len())
	}

	// A change to alpha's brain: its snapshot exports its own token's.
	if err := os.WriteFile(filepath.Join(w.brain("alpha"), "note.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(w.brain("alpha"), "receipts.ndjson")
	wait.For(t, "alpha's snapshot with both of its receipts", func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), `"callId":"call-7"`)
	})
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, `"tokenId":3,`) {
			t.Errorf("alpha's receipts.ndjson holds %.80s", l)
		}
	}
}
