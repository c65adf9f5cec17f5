package main

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/daemon"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/state"
)

// quarantineJSON is what `receipts quarantine list --json` prints.
type quarantineJSON struct {
	Agent    string
	Path     string
	Count    int
	Bytes    int64
	MaxBytes int64
	MaxCount int
	Records  []struct {
		Time      time.Time
		Source    string
		Line      int
		Status    string
		Reason    string
		CallID    string
		Size      int64
		Truncated bool
	}
}

// evilReceiptLine is a receipt whose callId is terminal escape sequences
// (ESC ] 0 ; ... BEL sets the window title, ESC [ 2 J clears the screen),
// written as JSON escapes; its signature does not match.
func evilReceiptLine(t *testing.T, key *ecdsa.PrivateKey) string {
	t.Helper()
	return strings.Replace(runtimeReceiptLine(t, "EVIL", 1700000001, key), `"EVIL"`, `"\u001b]0;pwned\u0007\u001b[2J"`, 1)
}

// TestReceiptsQuarantineListPurge: list shows what was quarantined (time,
// source, reason, callId, size) with hostile text escaped; purge removes
// it and says how much; both work without a configuration file.
func TestReceiptsQuarantineListPurge(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	op, stranger := receiptKey("operator"), receiptKey("stranger")
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	evil := evilReceiptLine(t, stranger)
	long := strings.Repeat("\x1b[31m", receipts.MaxReceiptSize/5+100)
	nd := strings.Join([]string{
		runtimeReceiptLine(t, "call-good", 1700000300, op),
		runtimeReceiptLine(t, "call-stranger", 1700000100, stranger),
		evil,
		runtimeReceiptLine(t, "call-unsigned", 1700000050, nil),
		`{"callId":"torn","ts":17`,
		long,
	}, "\n")
	file := writeReceiptsFile(t, dir, "in.ndjson", nd)
	if _, _, err := runReceiptsCmd(t, "", "receipts", "add", file, "--state-dir", stateDir, "--agent", "a1", "--trust", receiptsAddr(op)); err != nil {
		t.Fatal(err)
	}

	// Flags after the agent, as for every other command.
	stdout, _, err := runReceiptsCmd(t, "", "receipts", "quarantine", "list", "a1", "--state-dir", stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(stdout, "\x1b\x07") {
		t.Fatalf("raw control characters in the listing:\n%q", stdout)
	}
	for _, want := range []string{"a1: 5 records in " + receipts.QuarantinePath(receipts.LogPath(stateDir, "a1")),
		"TIME", "SOURCE", "CALL ID", "SIZE", "REASON", "import:2", "call-stranger", "unknown-signer", "import:3",
		`\u001b]0;pwned\u0007\u001b[2J`, "import:4", "call-unsigned", "unsigned", "import:5", "import:6", "malformed"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("listing lacks %q:\n%s", want, stdout)
		}
	}
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); len(lines) != 7 {
		t.Errorf("listing has %d lines, want a summary, a header and 5 records:\n%s", len(lines), stdout)
	}

	stdout, _, err = runReceiptsCmd(t, "", "receipts", "quarantine", "list", "--json", "a1", "--state-dir", stateDir)
	if err != nil {
		t.Fatal(err)
	}
	var q quarantineJSON
	if err := json.Unmarshal([]byte(stdout), &q); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if q.Agent != "a1" || q.Count != 5 || len(q.Records) != 5 || q.MaxCount != receipts.DefaultQuarantineMaxCount || q.Bytes == 0 {
		t.Fatalf("--json: %+v", q)
	}
	// A line's size counts its newline.
	r := q.Records[1]
	if r.Source != "import" || r.Line != 3 || r.Status != "unknown-signer" || r.CallID != "\x1b]0;pwned\x07\x1b[2J" ||
		r.Size != int64(len(evil))+1 || time.Since(r.Time) > time.Hour || r.Reason == "" {
		t.Errorf("record of line 3: %q (%d bytes posted)", fmt.Sprintf("%+v", r), len(evil))
	}
	if last := q.Records[4]; last.Line != 6 || last.Size != int64(len(long)) || last.Status != "malformed" {
		t.Errorf("record of the long line: %+v", last)
	}
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "quarantine", "list", "--limit", "2", "--state-dir", stateDir, "a1")
	if err != nil || !strings.Contains(stdout, "(2 of 5 records") {
		t.Errorf("--limit: %v\n%s", err, stdout)
	}

	// purge refuses while another process holds the state directory and
	// no configuration says how to reach it.
	sd, err := state.Open(stateDir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = runReceiptsCmd(t, "", "receipts", "quarantine", "purge", "a1", "--state-dir", stateDir)
	if exitCode(err) != exitLocked || !strings.Contains(err.Error(), "-config") {
		t.Errorf("purge on a locked state dir: %v (exit %d)", err, exitCode(err))
	}
	sd.Close()

	stdout, _, err = runReceiptsCmd(t, "", "receipts", "quarantine", "purge", "a1", "--state-dir", stateDir)
	if err != nil || !strings.Contains(stdout, "a1: removed 5 records from the quarantine (state directory)") {
		t.Fatalf("purge: %v\n%s", err, stdout)
	}
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "quarantine", "purge", "--json", "a1", "--state-dir", stateDir)
	if err != nil || strings.TrimSpace(stdout) != `{"agent":"a1","removed":0,"via":"state directory"}` {
		t.Fatalf("second purge: %v\n%s", err, stdout)
	}
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "quarantine", "list", "a1", "--state-dir", stateDir)
	if err != nil || !strings.HasPrefix(stdout, "a1: 0 records") {
		t.Fatalf("list after purge: %v\n%s", err, stdout)
	}
	if ids := receiptsInLog(t, stateDir, "a1"); len(ids) != 1 || ids[0] != "call-good" {
		t.Fatalf("purge touched the log: %v", ids)
	}

	// An agent that never received anything.
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "quarantine", "list", "--json", "--state-dir", stateDir, "b2")
	if err != nil || json.Unmarshal([]byte(stdout), &q) != nil || q.Count != 0 || len(q.Records) != 0 {
		t.Errorf("list of an empty agent: %v\n%s", err, stdout)
	}
	if stdout, _, err = runReceiptsCmd(t, "", "receipts", "quarantine", "purge", "b2", "--state-dir", stateDir); err != nil || !strings.Contains(stdout, "removed 0 records") {
		t.Errorf("purge of an empty agent: %v\n%s", err, stdout)
	}
	for _, args := range [][]string{
		{"receipts", "quarantine"},
		{"receipts", "quarantine", "drop", "a1"},
		{"receipts", "quarantine", "list", "--state-dir", stateDir},
		{"receipts", "quarantine", "list", "--state-dir", stateDir, "a1", "b2"},
		{"receipts", "quarantine", "purge", "--state-dir", stateDir, "../a1"},
	} {
		if _, _, err := runReceiptsCmd(t, "", args...); exitCode(err) != exitUsage {
			t.Errorf("%v: %v (exit %d)", args, err, exitCode(err))
		}
	}
}

// TestReceiptsFlagsAfterArguments: list and verify take their flags after
// the positional argument, like every other command.
func TestReceiptsFlagsAfterArguments(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	op := receiptKey("operator")
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	file := writeReceiptsFile(t, dir, "in.ndjson", runtimeReceiptLine(t, "c1", 1700000000, op))
	if _, _, err := runReceiptsCmd(t, "", "receipts", "add", file, "--agent", "a1", "--state-dir", stateDir, "--trust", receiptsAddr(op)); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runReceiptsCmd(t, "", "receipts", "list", "a1", "--state-dir", stateDir, "--trust", receiptsAddr(op))
	if err != nil || !strings.Contains(stdout, "c1") || !strings.Contains(stdout, "trusted") {
		t.Errorf("list AGENT --state-dir: %v\n%s", err, stdout)
	}
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "verify", file, "--trust", receiptsAddr(op), "--json")
	var v struct {
		OK      bool
		Trusted int
		Results []receipts.LineResult
	}
	if err != nil || json.Unmarshal([]byte(stdout), &v) != nil || !v.OK || v.Trusted != 1 || len(v.Results) != 1 || v.Results[0].CallID != "c1" {
		t.Errorf("verify FILE --trust --json: %v\n%s", err, stdout)
	}
	// Without the trust the same file fails, with exit 3.
	if _, _, err := runReceiptsCmd(t, "", "receipts", "verify", file); exitCode(err) != exitMismatch {
		t.Errorf("verify without trust: %v", err)
	}
}

// TestReceiptsVerifyStreams: verify reads any number of lines in bounded
// memory and says what it found, as VerifyLines counts it.
func TestReceiptsVerifyStreams(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	op := receiptKey("operator")
	good, evil := runtimeReceiptLine(t, "g", 1700000000, op), evilReceiptLine(t, op)
	var b strings.Builder
	const n = 21_000
	for i := range n {
		switch i % 3 {
		case 0:
			b.WriteString(good + "\n")
		case 1:
			b.WriteString(evil + "\n")
		default:
			b.WriteString("\x1b[2J not a receipt\n")
		}
	}
	stdout, _, err := runReceiptsCmd(t, b.String(), "receipts", "verify", "-", "--trust", receiptsAddr(op))
	if exitCode(err) != exitMismatch {
		t.Fatalf("exit %d: %v", exitCode(err), err)
	}
	if strings.Contains(stdout, "\x1b") || !strings.Contains(stdout, `\u001b[2J`) {
		t.Errorf("the malformed lines are not escaped:\n%.500s", stdout)
	}
	if got := strings.Count(stdout, "\n"); got != receiptsMaxDetail+2 {
		t.Errorf("%d lines of output, want %d details, an ellipsis and the summary", got, receiptsMaxDetail)
	}
	if !strings.Contains(stdout, fmt.Sprintf("-: %d entries: %d trusted, %d unknown signer, %d failed (%d not receipts)", n, n/3, n/3, n/3, n/3)) {
		t.Errorf("summary:\n%s", lastLine(stdout))
	}
	stdout, _, _ = runReceiptsCmd(t, b.String(), "receipts", "verify", "--json", "--trust", receiptsAddr(op), "-")
	var v struct {
		File      string
		Lines     int
		Receipts  int
		Malformed int
		OK        bool
		Results   []receipts.LineResult
	}
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || v.File != "-" || v.Lines != n || v.Receipts != 2*n/3 ||
		v.Malformed != n/3 || v.OK || len(v.Results) != n || v.Results[2].Status != receipts.StatusMalformed ||
		v.Results[1].CallID != "\x1b]0;pwned\x07\x1b[2J" {
		t.Errorf("--json: %v %+v", err, v.OK)
	}
}

// quarantineDaemon runs an in-process daemon on a devnet whose
// configuration (rewritten from the devnet's by edit) the CLI reads.
func quarantineDaemon(t *testing.T, edit func(string) string) (*daemon.Daemon, string) {
	t.Helper()
	tok := uint64(1)
	dn, err := devnet.Start(t.Context(), devnet.Options{
		Dir: t.TempDir(), HTTPListen: freePort(t), Quiet: 50 * time.Millisecond, MaxLag: 500 * time.Millisecond,
		Agents: []devnet.Agent{{ID: "alpha", TokenID: &tok}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dn.Close() })
	b, err := os.ReadFile(dn.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "hermesd.yml")
	if err := os.WriteFile(p, []byte(edit(string(b))), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(t.Context(), cfg, nil, compose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background())
	t.Cleanup(func() { d.Close(context.Background()) })
	return d, p
}

func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReceiptsQuarantinePurgeAsksTheDaemon: while the daemon holds the
// state directory, list reads the quarantine read-only and purge asks the
// daemon — over the socket, or over TCP with the token.
func TestReceiptsQuarantinePurgeAsksTheDaemon(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	const token = "purge-token-0123456789abcdef"
	tokenFile := secretFile(t, token)
	for _, via := range []string{"token", "socket"} {
		t.Run(via, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "h.sock")
			d, cfg := quarantineDaemon(t, func(s string) string {
				extra := "  token: {file: " + tokenFile + "}\n"
				if via == "socket" {
					extra = "  socket: " + sock + "\n"
				}
				return strings.Replace(s, "http:\n", "http:\n"+extra, 1)
			})
			a, _ := d.Agent("alpha")
			stranger := receiptKey("stranger")
			in := runtimeReceiptLine(t, "s1", 1, stranger) + "\n" + runtimeReceiptLine(t, "s2", 2, stranger) + "\n" + "junk"
			if _, err := a.Receipts().Import(t.Context(), strings.NewReader(in), receipts.PolicyQuarantine, nil); err != nil {
				t.Fatal(err)
			}
			stdout, _, err := runReceiptsCmd(t, "", "receipts", "quarantine", "list", "alpha", "-config", cfg)
			if err != nil || !strings.HasPrefix(stdout, "alpha: 3 records") {
				t.Fatalf("list while the daemon runs: %v\n%s", err, stdout)
			}
			stdout, _, err = runReceiptsCmd(t, "", "receipts", "quarantine", "purge", "alpha", "-config", cfg)
			if err != nil || !strings.Contains(stdout, "alpha: removed 3 records from the quarantine (daemon)") {
				t.Fatalf("purge while the daemon runs: %v\n%s", err, stdout)
			}
			if q, err := a.Receipts().Quarantine(); err != nil || q.Count != 0 {
				t.Fatalf("after purge: %+v %v", q, err)
			}
		})
	}

	t.Run("wrong token", func(t *testing.T) {
		_, cfg := quarantineDaemon(t, func(s string) string {
			return strings.Replace(s, "http:\n", "http:\n  token: {file: "+tokenFile+"}\n", 1)
		})
		wrong := strings.Replace(mustRead(t, cfg), tokenFile, secretFile(t, "not-the-token-0123456789"), 1)
		p := writeReceiptsFile(t, t.TempDir(), "wrong.yml", wrong)
		_, _, err := runReceiptsCmd(t, "", "receipts", "quarantine", "purge", "alpha", "-config", p)
		if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
			t.Errorf("purge with the wrong token: %v", err)
		}
	})
	t.Run("no way to ask", func(t *testing.T) {
		_, cfg := quarantineDaemon(t, func(s string) string { return s })
		_, _, err := runReceiptsCmd(t, "", "receipts", "quarantine", "purge", "alpha", "-config", cfg)
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "http.socket") {
			t.Errorf("purge without token or socket: %v (exit %d)", err, exitCode(err))
		}
	})
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPurgeNeverFollowsARedirect: the bearer token goes to the configured
// listener only; an answer that redirects elsewhere (another port of the
// same host) is not followed, so the token is not forwarded.
func TestPurgeNeverFollowsARedirect(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	const token = "redirect-token-0123456789abcdef"
	var sawAuth, hits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("Authorization") != "" {
			sawAuth.Add(1)
		}
		w.Write([]byte(`{"removed":0}`))
	}))
	defer other.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+r.URL.Path, code)
			}))
			defer fake.Close()
			dir := t.TempDir()
			stateDir := filepath.Join(dir, "state")
			cfg := writeReceiptsFile(t, dir, "hermesd.yml", fmt.Sprintf(`state_dir: %s
http:
  listen: %s
  token: {file: %s}
walrus:
  publishers: ["http://127.0.0.1:1"]
  aggregators: ["http://127.0.0.1:1"]
encryption:
  key: {file: ./snapshot.key}
agents:
  - id: a1
    brain_dir: ./brain
`, stateDir, strings.TrimPrefix(fake.URL, "http://"), secretFile(t, token)))
			// A "daemon" holds the state directory.
			sd, err := state.Open(stateDir, state.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sd.Close()
			_, _, err = runReceiptsCmd(t, "", "receipts", "quarantine", "purge", "a1", "-config", cfg)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("HTTP %d", code)) {
				t.Errorf("purge answered with a redirect: %v", err)
			}
			if hits.Load() != 0 || sawAuth.Load() != 0 {
				t.Fatalf("the redirect was followed (%d requests, %d with credentials)", hits.Load(), sawAuth.Load())
			}
		})
	}
}
