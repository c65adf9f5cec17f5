package main

// Attacks against the real hermesd binary on a devnet:
// forged receipts and junk posted to the daemon, an aggregator that
// streams without end during a restore, a sparse-file bomb published
// through the agent's own pointer, secrets in endpoint URLs, escape
// sequences in a blob's lineage, and the exit codes of every refusal.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/daemon"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/wait"
	"github.com/hermesd/hermesd/internal/walrus"
)

// startEnv is start with extra environment variables (they win over the
// ones start sets).
func (w *e2eWorld) startEnv(env []string, args ...string) *hermesdProc {
	w.t.Helper()
	w.runs++
	fmt.Fprintf(w.logf, "=== hermesd #%d: %s\n", w.runs, strings.Join(args, " "))
	p := &hermesdProc{t: w.t, out: newLineLog(w.logf), done: make(chan struct{})}
	p.cmd = exec.Command(hermesdBinary(w.t), args...)
	p.cmd.Env = append(w.env(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	w.t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// ran is a finished hermesd command.
type ran struct {
	code           int
	stdout, stderr string
	maxRSS         int64 // peak resident set, bytes
}

// runMeasured runs a hermesd command to completion and reports its peak
// memory too.
func (w *e2eWorld) runMeasured(args ...string) ran {
	w.t.Helper()
	w.runs++
	fmt.Fprintf(w.logf, "=== hermesd #%d: %s\n", w.runs, strings.Join(args, " "))
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(w.t.Context(), 2*time.Minute)
	defer cancel()
	// The peak comes from GNU time, which forks: the rusage of a child
	// this process starts itself includes this process's own peak (Go
	// starts children with vfork, and Linux carries the parent's peak
	// over at exec), and the test binary may well outgrow the bound.
	rssFile := filepath.Join(w.t.TempDir(), "maxrss")
	cmd := exec.CommandContext(ctx, "/usr/bin/time", append([]string{"-f", "%M", "-o", rssFile, hermesdBinary(w.t)}, args...)...)
	cmd.Env = w.env()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	fmt.Fprintf(w.logf, "--- stdout:\n%s--- stderr:\n%s--- exit: %v\n", stdout.String(), stderr.String(), err)
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		w.t.Fatalf("hermesd %v: %v", args, err)
	}
	r := ran{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	b, err := os.ReadFile(rssFile)
	if err != nil {
		w.t.Fatalf("peak RSS of hermesd %v: %v", args, err)
	}
	// time writes a line about a child killed by a signal before %M.
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	kib, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	if err != nil {
		w.t.Fatalf("peak RSS of hermesd %v: %q", args, b)
	}
	r.maxRSS = kib << 10
	return r
}

// procStatusIfAlive is procStatus for a process that may have exited.
func procStatusIfAlive(pid int, field string) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// procStatus reads a field of /proc/PID/status in bytes (VmHWM: the peak
// resident set so far, VmRSS: the current one).
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, rest)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// diskUsage is the space the files below root occupy (allocated blocks,
// so a sparse file counts for what it really takes) and their apparent
// size.
func diskUsage(root string) (alloc, apparent int64) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			apparent += fi.Size()
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				alloc += st.Blocks * 512
			}
		}
		return nil
	})
	return alloc, apparent
}

// peakDisk samples the space used below each root until stop is closed and
// returns the largest values seen.
func peakDisk(roots []string, stop <-chan struct{}) <-chan map[string][2]int64 {
	out := make(chan map[string][2]int64, 1)
	go func() {
		peak := map[string][2]int64{}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, r := range roots {
				a, s := diskUsage(r)
				p := peak[r]
				peak[r] = [2]int64{max(p[0], a), max(p[1], s)}
			}
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// tarFile is one entry of a hand-made archive.
type tarFile struct {
	name string
	data string
}

// tarOf writes a tar archive of files as archive/tar writes them (which
// accepts any name, "../x" included).
func tarOf(t *testing.T, files ...tarFile) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg, Format: tar.FormatGNU}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, f.data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// paxRecord is one PAX extended header record ("%d %s=%s\n", the length
// counting itself).
func paxRecord(k, v string) string {
	rec := " " + k + "=" + v + "\n"
	n := len(rec) + 1
	for len(strconv.Itoa(n))+len(rec) != n {
		n++
	}
	return strconv.Itoa(n) + rec
}

// tarBlock is a ustar header block (archive/tar's writer cannot write a
// sparse entry, so the bomb is made by hand).
func tarBlock(name string, typeflag byte, size int64) []byte {
	b := make([]byte, 512)
	octal := func(dst []byte, v int64) { copy(dst, fmt.Sprintf("%0*o\x00", len(dst)-1, v)) }
	copy(b[0:100], name)
	octal(b[100:108], 0o644)
	octal(b[108:116], 0)
	octal(b[116:124], 0)
	octal(b[124:136], size)
	octal(b[136:148], 0)
	b[156] = typeflag
	copy(b[257:265], "ustar\x0000")
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func padBlock(b []byte) []byte {
	if r := len(b) % 512; r != 0 {
		b = append(b, make([]byte, 512-r)...)
	}
	return b
}

// sparseBombTar is a snapshot archive — a lock, then a GNU PAX 1.0 sparse
// entry of realSize bytes that stores 512 — as the reference runtime's
// GNU tar could write it from a sparse file.
func sparseBombTar(t *testing.T, lock string, realSize int64) []byte {
	t.Helper()
	head := tarOf(t, tarFile{"bundle.lock.json", lock})
	out := head[:len(head)-1024] // without the end marker
	recs := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", "memory.db") + paxRecord("GNU.sparse.realsize", strconv.FormatInt(realSize, 10))
	out = append(out, tarBlock("././@PaxHeader", tar.TypeXHeader, int64(len(recs)))...)
	out = append(out, padBlock([]byte(recs))...)
	m := padBlock(fmt.Appendf(nil, "1\n%d\n512\n", realSize-512))
	out = append(out, tarBlock("GNUSparseFile.0/memory.db", tar.TypeReg, int64(len(m)+512))...)
	out = append(out, m...)
	out = append(out, bytes.Repeat([]byte("x"), 512)...)
	return append(out, make([]byte, 1024)...)
}

// publishBlob encrypts plaintext as agent id's snapshot (the right key,
// the right identity), stores it on the devnet's Walrus and points the
// agent's ENS record at it.
func (w *e2eWorld) publishBlob(t *testing.T, id string, plaintext []byte) string {
	t.Helper()
	ac, err := w.dn.Config.Agent(id)
	if err != nil {
		t.Fatal(err)
	}
	key, err := cipher.ReadKeyFile(w.dn.KeyPath)
	if err != nil {
		t.Fatal(err)
	}
	var blob bytes.Buffer
	enc, err := cipher.Encrypt(&blob, key, ac.Identity())
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(plaintext)
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	c := w.walrusClient(walrus.Config{Epochs: 5})
	res, err := c.Store(t.Context(), walrus.BytesBody(blob.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if ac.ENSName != "" {
		w.setPointer(t, ac.ENSName, res.BlobID)
	}
	return res.BlobID
}

func (w *e2eWorld) setPointer(t *testing.T, name, value string) {
	t.Helper()
	c := w.ensClient(true)
	cur, err := c.Read(t.Context(), name)
	if err != nil {
		cur = ""
	}
	if _, err := c.Write(t.Context(), name, value, cur); err != nil {
		t.Fatal(err)
	}
}

// signedReceipt is a runtime receipt signed by key.
func signedReceipt(t *testing.T, callID string, ts int64, key *ecdsa.PrivateKey) string {
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

// forgedReceipts are n receipts no trusted operator signed: half by an
// unknown key, half by the trusted one with a signature byte changed.
func forgedReceipts(t *testing.T, n int, trusted *ecdsa.PrivateKey) string {
	t.Helper()
	stranger, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range n {
		if i%2 == 0 {
			b.WriteString(signedReceipt(t, fmt.Sprintf("forged-%d", i), int64(1700000000+i), stranger))
		} else {
			l := signedReceipt(t, fmt.Sprintf("forged-%d", i), int64(1700000000+i), trusted)
			j := strings.LastIndex(l, `"signature":"0x`) + len(`"signature":"0x`) + 7
			c := byte('a')
			if l[j] == 'a' {
				c = 'b'
			}
			b.WriteString(l[:j] + string(c) + l[j+1:])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// junkLines is size bytes of lines that are not receipts, control
// characters included.
func junkLines(size int) []byte {
	rng := rand.New(rand.NewPCG(10, 10))
	b := make([]byte, size)
	for i := range b {
		switch r := rng.IntN(1000); {
		case r == 0:
			b[i] = '\n'
		case r < 100:
			b[i] = byte(rng.IntN(32))
		default:
			b[i] = byte(rng.IntN(256))
		}
	}
	return b
}

// endlessAggregator proxies the devnet's Walrus, except that a GET of
// endless never ends: it streams zeros until the client goes away, and
// counts what it sent.
type endlessAggregator struct {
	srv      *httptest.Server
	sent     atomic.Int64 // bytes of endless bodies
	maxSent  atomic.Int64 // the most one request took before its client hung up
	requests atomic.Int32
}

func newEndlessAggregator(t *testing.T, target, endless string) *endlessAggregator {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	a := &endlessAggregator{}
	rp := httputil.NewSingleHostReverseProxy(u)
	quietProxy(rp)
	chunk := make([]byte, 256<<10)
	a.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/"+endless) {
			rp.ServeHTTP(rw, r)
			return
		}
		a.requests.Add(1)
		rw.Header().Set("Content-Type", "application/octet-stream")
		rw.WriteHeader(http.StatusOK) // no Content-Length: chunked, for ever
		var sent int64
		defer func() {
			for m := a.maxSent.Load(); sent > m && !a.maxSent.CompareAndSwap(m, sent); m = a.maxSent.Load() {
			}
		}()
		for r.Context().Err() == nil {
			n, err := rw.Write(chunk)
			a.sent.Add(int64(n))
			sent += int64(n)
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// agentReady is one agent in /readyz.
func readyzOf(t *testing.T, w *e2eWorld) (int, map[string]daemon.AgentReady, int64) {
	t.Helper()
	resp, err := w.client.Get("http://" + w.http + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var r struct{ Agents []daemon.AgentReady }
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("readyz: %v: %s", err, body)
	}
	out := map[string]daemon.AgentReady{}
	for _, a := range r.Agents {
		out[a.ID] = a
	}
	return resp.StatusCode, out, int64(len(body))
}

// postReceipts posts body to the daemon with the token and returns the
// status and the size of the answer.
func postReceipts(t *testing.T, addr, token, agent string, body io.Reader) (int, []byte, int64) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/v1/agents/"+agent+"/receipts", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Authorization", "Bearer "+token)
	c := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	kept, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	rest, _ := io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, kept, int64(len(kept)) + rest
}

// trustedOnly checks that every line of an ndjson export verifies against
// owner and none is forged.
func trustedOnly(t *testing.T, what string, ndjson []byte, owner common.Address) int {
	t.Helper()
	tally, err := receipts.VerifyLines(t.Context(), bytes.NewReader(ndjson), []common.Address{owner}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tally.Failed != 0 || tally.Unknown != 0 || bytes.Contains(ndjson, []byte("forged-")) {
		t.Errorf("%s holds receipts no trusted operator signed: %+v", what, tally)
	}
	return tally.Trusted
}

// Bounds the attack script holds the daemon to.
const (
	attackMaxDownload   = 64 << 20  // walrus.max_download_size in the attack configuration
	attackQuarantine    = 1 << 20   // receipts.quarantine_max_bytes
	attackQuarantineMax = 1000      // receipts.quarantine_max_count
	attackMaxRSS        = 256 << 20 // the daemon's and the CLI's peak resident set
	attackMaxAnswer     = 256 << 10 // an answer to a receipts post
)

// TestE2EAttackScript runs the attack script against one running
// daemon with three agents: alpha gets 20,000 forged receipts and an 8 MiB
// body of junk lines; victim's pointer names a blob that a hostile
// aggregator streams without end while the daemon (and `hermesd restore`)
// restore it; bomb's pointer names a sparse-file bomb encrypted with the
// right key. Afterwards alpha is ready, its brain untouched, its next edit
// snapshotted and published with trusted receipts only; memory and disk
// stayed within the bounds above.
func TestE2EAttackScript(t *testing.T) {
	t.Parallel()
	alphaToken := uint64(1)
	w := newE2EWorld(t,
		devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth", TokenID: &alphaToken},
		devnet.Agent{ID: "victim", ENSName: "victim.hermes.eth"},
		devnet.Agent{ID: "bomb", ENSName: "bomb.hermes.eth"},
	)
	bw := newBrainWriter(t, w.brain("alpha"), rand.New(rand.NewPCG(10, 10)))
	bw.put(t, "system.md", []byte("You are alpha.\n"), 0o644)
	bw.put(t, "memory/notes.md", []byte("remember the attack script\n"), 0o600)
	owner := w.dn.Owner()

	// The victim's pointer names a blob the aggregator streams for ever.
	const endless = "ENDLESSENDLESSENDLESSENDLESSENDLESSENDLESSE"
	w.setPointer(t, "victim.hermes.eth", endless)
	agg := newEndlessAggregator(t, w.dn.Walrus.URL(), endless)
	// The bomb: a 1 TiB sparse memory.db in 3 KiB of archive.
	const bombSize = 1 << 40
	bombBlob := w.publishBlob(t, "bomb", sparseBombTar(t, `{"bundleHash":"0x`+strings.Repeat("ab", 32)+`","version":1}`, bombSize))

	t.Logf("bomb: blob %s expands to %d GiB", bombBlob, bombSize>>30)
	const token = "attack-script-token-0123456789"
	tokenFile := filepath.Join(t.TempDir(), "http.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := rewriteConfig(t, w,
		`listen: "`+w.http+`"`, `listen: "`+w.http+`"`+"\n  token: {file: "+tokenFile+"}\n  readiness: any",
		`aggregators: ["`+w.dn.Walrus.URL()+`"]`, `aggregators: ["`+agg.srv.URL+`"]`,
		maxBlobLine, fmt.Sprintf("%s\n  max_download_size: %d", maxBlobLine, attackMaxDownload),
		"import_policy: quarantine", fmt.Sprintf("import_policy: quarantine\n  quarantine_max_bytes: %d\n  quarantine_max_count: %d", attackQuarantine, attackQuarantineMax),
	)
	state := w.dn.Config.StateDir
	brains := filepath.Dir(w.brain("alpha"))
	stopDisk := make(chan struct{})
	peaks := peakDisk([]string{filepath.Join(state, "spool"), brains, state}, stopDisk)

	p := w.start("run", "-config", cfg)
	p.mustWaitLine(msgPublished, 1, 30*time.Second) // alpha's first snapshot
	first := w.pointer("alpha.hermes.eth")
	before := hashedTree(t, w.brain("alpha"))
	alphaAlloc, alphaSize := diskUsage(w.brain("alpha"))

	// 1. Forged receipts, while the victim's restore is being attacked.
	forged := forgedReceipts(t, 20_000, w.dn.SignerKey)
	legit := signedReceipt(t, "legit-receipt", 1800000000, w.dn.SignerKey)
	code, body, size := postReceipts(t, w.http, token, "alpha", strings.NewReader(legit+"\n"+forged))
	var rep receipts.ImportReport
	if err := json.Unmarshal(body, &rep); err != nil || code != http.StatusOK || rep.Imported != 1 ||
		rep.Quarantined+rep.Dropped != 20_000 || rep.Quarantined > attackQuarantineMax {
		t.Fatalf("forged receipts: HTTP %d, %v: %.300s", code, err, body)
	}
	t.Logf("20,000 forged receipts: HTTP %d, %d quarantined, %d dropped, answer %d bytes", code, rep.Quarantined, rep.Dropped, size)
	if size > attackMaxAnswer {
		t.Errorf("answer %d bytes, bound %d", size, attackMaxAnswer)
	}

	// 2. 8 MiB of junk lines.
	code, body, size = postReceipts(t, w.http, token, "alpha", bytes.NewReader(junkLines(8<<20)))
	rep = receipts.ImportReport{}
	if err := json.Unmarshal(body, &rep); err != nil || code != http.StatusOK || rep.Imported != 0 {
		t.Fatalf("junk: HTTP %d, %v: %.300s", code, err, body)
	}
	t.Logf("8 MiB of junk: HTTP %d, %d lines, %d quarantined, %d dropped, answer %d bytes", code, rep.Lines, rep.Quarantined, rep.Dropped, size)
	if size > attackMaxAnswer {
		t.Errorf("answer %d bytes, bound %d", size, attackMaxAnswer)
	}

	// 3. The daemon's restores of victim and bomb fail, and keep failing
	// on every retry; so does `hermesd restore` of each, with exit 3.
	wait.Within(t, 60*time.Second, "the daemon to give up on victim and bomb", func() bool {
		_, r, _ := readyzOf(t, w)
		return r["victim"].Phase == "failed" && r["bomb"].Phase == "failed"
	})
	// The CLI needs a state directory of its own while the daemon holds
	// the configured one.
	cliCfg := strings.Replace(mustRead(t, cfg), "state_dir: "+state, "state_dir: "+filepath.Join(t.TempDir(), "state"), 1)
	cliCfgPath := writeReceiptsFile(t, t.TempDir(), "cli.yml", cliCfg)
	for _, tc := range []struct{ id, reason string }{
		{"victim", "larger than its bound"},
		{"bomb", "sparse"},
	} {
		r := w.runMeasured("restore", "-config", cliCfgPath, "--dir", filepath.Join(t.TempDir(), tc.id), tc.id)
		t.Logf("hermesd restore %s: exit %d, peak RSS %d MiB: %s", tc.id, r.code, r.maxRSS>>20, lastLine(r.stderr))
		if r.code != exitMismatch || !strings.Contains(lastLine(r.stderr), tc.reason) {
			t.Errorf("restore %s: exit %d (%s), want %d and %q", tc.id, r.code, lastLine(r.stderr), exitMismatch, tc.reason)
		}
		if r.maxRSS > attackMaxRSS {
			t.Errorf("restore %s: peak RSS %d MiB, bound %d MiB", tc.id, r.maxRSS>>20, attackMaxRSS>>20)
		}
	}

	// The daemon: alive, ready for alpha, within its memory bound.
	hwm, rss := procStatus(t, p.pid(), "VmHWM"), procStatus(t, p.pid(), "VmRSS")
	t.Logf("daemon after the attacks: VmHWM %d MiB, VmRSS %d MiB", hwm>>20, rss>>20)
	if hwm > attackMaxRSS {
		t.Errorf("daemon peak RSS %d MiB, bound %d MiB", hwm>>20, attackMaxRSS>>20)
	}
	// The failed agents alternate between failed and a retried restore:
	// read /readyz while both are failed.
	var r map[string]daemon.AgentReady
	wait.Within(t, 60*time.Second, "victim and bomb failed in /readyz", func() bool {
		code, r, _ = readyzOf(t, w)
		return r["victim"].Phase == "failed" && r["bomb"].Phase == "failed"
	})
	if code != http.StatusOK || !r["alpha"].Ready || r["victim"].Ready || r["bomb"].Ready ||
		!strings.Contains(r["victim"].Reason, "larger than its bound") || !strings.Contains(r["bomb"].Reason, "sparse") {
		t.Errorf("readyz: HTTP %d %+v", code, r)
	}
	t.Logf("readyz: victim: %s", r["victim"].Reason)
	t.Logf("readyz: bomb: %s", r["bomb"].Reason)
	if n := agg.requests.Load(); n < 2 {
		t.Errorf("the endless blob was requested %d times; the daemon and the CLI should each have tried", n)
	}
	// A client writes no more than it took: the most one request took
	// bounds the disk a download used (the spool file is unnamed, so it
	// cannot be measured from outside).
	t.Logf("the hostile aggregator streamed %d MiB in %d requests, at most %d MiB to one (bound %d MiB each)",
		agg.sent.Load()>>20, agg.requests.Load(), agg.maxSent.Load()>>20, attackMaxDownload>>20)
	if m := agg.maxSent.Load(); m > attackMaxDownload+16<<20 {
		t.Errorf("one download took %d MiB of the endless body; the bound is %d MiB", m>>20, attackMaxDownload>>20)
	}

	// alpha's brain is untouched.
	if d := sameTree(before, hashedTree(t, w.brain("alpha"))); len(d) > 0 {
		t.Errorf("alpha's brain changed under the attacks: %v", d)
	}
	nd, err := os.ReadFile(filepath.Join(w.brain("alpha"), "receipts.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	trustedOnly(t, "alpha's receipts.ndjson", nd, owner)

	// 4. Backups continue: an edit is snapshotted, published, and its
	// snapshot carries trusted receipts only, the posted legit one too.
	bw.put(t, "memory/after.md", []byte("written after the attacks\n"), 0o644)
	wait.Within(t, 30*time.Second, "alpha's edit to be published", func() bool {
		ptr := w.pointer("alpha.hermes.eth")
		return ptr != first && w.agentState("alpha").Last != nil && w.agentState("alpha").Last.BlobID == ptr
	})
	latest := w.pointer("alpha.hermes.eth")
	restored := filepath.Join(t.TempDir(), "alpha")
	if _, err := w.restorer("alpha").Restore(t.Context(), latest, restored); err != nil {
		t.Fatal(err)
	}
	if d := sameTree(bw.want(), hashedTree(t, restored)); len(d) > 0 {
		t.Errorf("the snapshot after the attacks differs from the brain: %v", d)
	}
	nd, err = os.ReadFile(filepath.Join(restored, "receipts.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if n := trustedOnly(t, "the snapshot's receipts.ndjson", nd, owner); n < 2 || !bytes.Contains(nd, []byte(`"legit-receipt"`)) {
		t.Errorf("the snapshot holds %d trusted receipts, the legit one missing?", n)
	}

	close(stopDisk)
	peak := <-peaks
	q, err := os.Stat(receipts.QuarantinePath(receipts.LogPath(state, "alpha")))
	if err != nil {
		t.Fatal(err)
	}
	spoolPeak, brainsPeak, statePeak := peak[filepath.Join(state, "spool")], peak[brains], peak[state]
	t.Logf("disk: quarantine %d KiB (bound %d KiB); peak spool %d MiB allocated; peak brains %d KiB allocated, %d KiB apparent; peak state dir %d MiB",
		q.Size()>>10, attackQuarantine>>10, spoolPeak[0]>>20, brainsPeak[0]>>10, brainsPeak[1]>>10, statePeak[0]>>20)
	if q.Size() > attackQuarantine {
		t.Errorf("quarantine %d bytes, bound %d", q.Size(), attackQuarantine)
	}
	// A download is cut at max_download_size; two run at most at a time
	// here (the daemon's and the CLI's spool elsewhere), plus a snapshot.
	if spoolPeak[0] > 2*attackMaxDownload+(8<<20) {
		t.Errorf("spool peaked at %d MiB; a download is bounded by %d MiB", spoolPeak[0]>>20, attackMaxDownload>>20)
	}
	// The bomb expands to nothing: beside alpha's brain the brains
	// directory held at most the bomb's stored bytes (and alpha's edit).
	if brainsPeak[1] > alphaSize+1<<20 || brainsPeak[0] > alphaAlloc+1<<20 {
		t.Errorf("brains peaked at %d bytes apparent, %d allocated; alpha's brain is %d, %d", brainsPeak[1], brainsPeak[0], alphaSize, alphaAlloc)
	}

	// Its peak through the stop, from /proc until it is gone (its rusage
	// would include this test process's own peak: see runMeasured).
	lifePeak := procStatus(t, p.pid(), "VmHWM")
	p.signal(syscall.SIGTERM)
	sample := time.NewTicker(5 * time.Millisecond)
	for !p.exited() {
		if hwm, ok := procStatusIfAlive(p.pid(), "VmHWM"); ok {
			lifePeak = max(lifePeak, hwm)
		}
		select {
		case <-p.done:
		case <-sample.C:
		}
	}
	sample.Stop()
	if code := p.wait(30 * time.Second); code != 0 {
		t.Errorf("daemon exited %d on SIGTERM", code)
	}
	// Nothing of the attacks is left: no victim or bomb brain, no
	// half-restored directory beside them, no download in the spool.
	if got := listDir(t, brains); !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("brains directory holds %v, want only alpha", got)
	}
	if got := listDir(t, filepath.Join(state, "spool")); len(got) > 0 {
		t.Errorf("spool holds %v after the attacks", got)
	}
	t.Logf("daemon peak RSS over its life: %d MiB", lifePeak>>20)
	if lifePeak > attackMaxRSS {
		t.Errorf("daemon peak RSS %d MiB, bound %d MiB", lifePeak>>20, attackMaxRSS>>20)
	}
}

// echoServer answers every request with status and a body that quotes
// the request's path twice, as providers' error pages do ("invalid
// project id KEY", "no route /KEY/v1/blobs").
func echoServer(t *testing.T, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		key := strings.TrimPrefix(r.URL.Path, "/")
		if i := strings.LastIndexByte(key, '/'); i >= 0 && strings.HasPrefix(key, "v3/") {
			key = key[i+1:]
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		fmt.Fprintf(w, "invalid project id %s (request %s %s)", key, r.Method, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestE2ESecretsInURLsNeverShow: providers put API keys in the path of
// their URLs (https://mainnet.infura.io/v3/KEY). With such an RPC URL
// for a chain that is down or answers errors, and such Walrus URLs for
// servers that answer errors, the key appears nowhere: not in the
// daemon's log (at debug level), /v1/status, /readyz, /metrics, the state
// directory, `hermesd status`, or the errors of `hermesd log`, `restore`,
// `pointer get` and `blob get`.
func TestE2ESecretsInURLsNeverShow(t *testing.T) {
	t.Parallel()
	alphaToken := uint64(1)
	w := newE2EWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth", TokenID: &alphaToken})
	bw := newBrainWriter(t, w.brain("alpha"), rand.New(rand.NewPCG(11, 11)))
	bw.put(t, "system.md", []byte("You are alpha.\n"), 0o644)
	const chainKey, walrusKey = "Pr0j3ctK3ySecret0123456789abcdef", "Wa1rusPathS3cret0123456789abcdef"
	closed := freePort(t)
	rpcErrors := echoServer(t, http.StatusInternalServerError)
	walrusErrors := echoServer(t, http.StatusBadGateway)
	realRPC, realWalrus := w.dn.Chain.URL(), w.dn.Walrus.URL()
	state := w.dn.Config.StateDir

	for _, tc := range []struct {
		name, secret  string
		rpc, walrus   string
		failure       func(agentStatus) string // what the daemon reports once it failed
		extraCommands [][]string
	}{
		{
			name: "chain answers errors", secret: chainKey,
			rpc: rpcErrors.URL + "/v3/" + chainKey, walrus: realWalrus,
			failure: func(s agentStatus) string { return s.pendingErr },
		},
		{
			name: "chain down", secret: chainKey,
			rpc: "http://" + closed + "/v3/" + chainKey, walrus: realWalrus,
			failure: func(s agentStatus) string { return s.pendingErr },
		},
		{
			name: "walrus answers errors", secret: walrusKey,
			rpc: realRPC, walrus: walrusErrors.URL + "/" + walrusKey,
			failure:       func(s agentStatus) string { return s.lastError },
			extraCommands: [][]string{{"blob", "get", strings.Repeat("A", 43), "-o", filepath.Join(t.TempDir(), "blob")}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := rewriteConfig(t, w, "rpc: "+realRPC, "rpc: "+tc.rpc,
				`publishers: ["`+realWalrus+`"]`, `publishers: ["`+tc.walrus+`"]`,
				`aggregators: ["`+realWalrus+`"]`, `aggregators: ["`+tc.walrus+`"]`,
				"retry_max: 8", "retry_max: 1")
			bw.put(t, "changes/"+strings.ReplaceAll(tc.name, " ", "-")+".md", []byte(tc.name+"\n"), 0o644)
			p := w.startEnv([]string{"HERMESD_LOG_LEVEL=debug"}, "run", "-config", cfg)
			var failure string
			wait.Within(t, 60*time.Second, "the daemon to report the failure", func() bool {
				st, err := w.status()
				if err != nil || len(st.Agents) != 1 {
					return false
				}
				failure = tc.failure(agentStatusOf(st.Agents[0]))
				return failure != ""
			})
			t.Logf("reported: %s", failure)

			// Everything the operator (or anyone on loopback) can see.
			seen := map[string]string{"daemon log (so far)": p.out.String()}
			for _, path := range []string{"/v1/status", "/readyz", "/metrics"} {
				resp, err := w.client.Get("http://" + w.http + path)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
				resp.Body.Close()
				seen[path] = string(b)
			}
			cliCfg := writeReceiptsFile(t, t.TempDir(), "cli.yml",
				strings.Replace(mustRead(t, cfg), "state_dir: "+state, "state_dir: "+filepath.Join(t.TempDir(), "state"), 1))
			commands := append([][]string{
				{"status", "-config", cfg},
				{"log", "alpha", "-config", cfg},
				{"restore", "--dir", filepath.Join(t.TempDir(), "r"), "alpha", "-config", cliCfg},
				{"pointer", "get", "alpha.hermes.eth", "-config", cfg},
			}, tc.extraCommands...)
			for _, args := range commands {
				if len(args) > 0 && args[0] == "blob" {
					args = append(args, "-config", cfg)
				}
				code, stdout, stderr := w.runOnce(args...)
				seen["hermesd "+args[0]] = stdout + stderr
				t.Logf("hermesd %s: exit %d: %s", args[0], code, lastLine(stdout+stderr))
			}
			p.signal(syscall.SIGTERM)
			p.wait(60 * time.Second)
			seen["daemon log"] = p.out.String()
			filepath.WalkDir(state, func(path string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if b, err := os.ReadFile(path); err == nil {
						seen["state file "+path] = string(b)
					}
				}
				return nil
			})

			for where, text := range seen {
				for _, part := range []string{tc.secret, tc.secret[:16]} {
					if i := strings.Index(text, part); i >= 0 {
						t.Errorf("%s shows the secret: ...%s...", where, text[max(0, i-120):min(len(text), i+60)])
						break
					}
				}
			}
			// The failures were reported (with the endpoint's origin),
			// not swallowed.
			if !strings.Contains(seen["hermesd status"], "alpha") || !strings.Contains(seen["daemon log"], "level=") {
				t.Errorf("nothing to check: status %q", seen["hermesd status"])
			}
		})
	}
}

// agentStatus is the part of an agent's status the secrets test reads.
type agentStatus struct{ lastError, pendingErr string }

func agentStatusOf(s agent.Status) agentStatus {
	out := agentStatus{lastError: s.LastError}
	if s.Pending != nil {
		out.pendingErr = s.Pending.LastErr
	}
	return out
}

// rawControl reports the first terminal control in s, with its context:
// a C0 control other than newline and tab, DEL, or a C1 control (a UTF-8
// encoded one, or a raw byte 0x80-0x9f that is not part of a character).
func rawControl(s string) (string, bool) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			r = rune(s[i])
		}
		if r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r < 0xa0 {
			return s[max(0, i-40):min(len(s), i+40)], true
		}
		i += n
	}
	return "", false
}

// TestE2EHostileBlobs publishes hostile snapshots through the agent's own
// pointer, encrypted with the right key: every refusal exits 3, nothing is
// written outside the target, and nothing from the blob reaches the
// terminal raw — `hermesd log` prints a hostile lineage's escape
// sequences as escapes.
func TestE2EHostileBlobs(t *testing.T) {
	t.Parallel()
	w := newE2EWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
	cfg := w.dn.ConfigPath
	hash := "0x" + strings.Repeat("ab", 32)
	lock := func(bundleHash string) string {
		return `{"bundleHash":"` + bundleHash + `","version":1,"lastUpdated":1700000000000}`
	}
	// What the files of the "honest" archives below hash to.
	honest := tarFile{"system.md", "You are a test agent.\n"}
	const honestHash = "0x9263e6b872bab2a42f1f2c3ff56c4069a05bfe3fb3bfccf3b8cfed4e77d0b74d"

	t.Run("log prints a hostile lineage escaped", func(t *testing.T) {
		evil := `\u001b]0;pwned\u0007\u001b[2J\u009b31m\u202egnp.exe`
		l := `{"bundleHash":"` + evil + `","version":2,"lastUpdated":1700000000000,"walrusSnapshotBlobId":"` + evil +
			`","lineage":[{"blobId":"` + evil + `","bundleHash":"` + evil + `","createdAt":1700000000000,"size":1,"endEpoch":1}]}`
		w.publishBlob(t, "alpha", tarOf(t, tarFile{"bundle.lock.json", l}, honest))
		code, stdout, stderr := w.runOnce("log", "alpha", "-config", cfg)
		if code != 0 {
			t.Fatalf("log: exit %d: %s", code, stderr)
		}
		if ctx, bad := rawControl(stdout + stderr); bad {
			t.Errorf("raw control characters reach the terminal: %q", ctx)
		}
		if !strings.Contains(stdout, `\u001b]0;pwned\u0007\u001b[2J\u009b31m\u202egnp.exe`) {
			t.Errorf("the lineage is not shown escaped:\n%s", stdout)
		}
		// JSON escapes C0 controls (ESC, BEL) itself.
		code, stdout, _ = w.runOnce("log", "alpha", "--json", "-config", cfg)
		if code != 0 || strings.ContainsAny(stdout, "\x1b\x07") {
			t.Errorf("log --json: exit %d, raw ESC or BEL:\n%q", code, stdout)
		}
	})

	target := filepath.Join(t.TempDir(), "restore")
	outside := filepath.Dir(target)
	for _, tc := range []struct {
		name   string
		blob   []byte
		code   int
		reason string
	}{
		{"entry escaping the target", tarOf(t, tarFile{"bundle.lock.json", lock(hash)}, tarFile{"../escaped.md", "out\n"}), exitMismatch, "escaped.md"},
		{"absolute entry", tarOf(t, tarFile{"bundle.lock.json", lock(hash)}, tarFile{"/tmp/abs.md", "out\n"}), exitMismatch, "abs.md"},
		{"escape sequence in a name", tarOf(t, tarFile{"bundle.lock.json", lock(hash)}, tarFile{"\x1b]0;pwned\x07.md", "x"}), exitMismatch, "do not match"},
		{"duplicate entry", tarOf(t, tarFile{"bundle.lock.json", lock(honestHash)}, honest, honest), exitMismatch, "duplicate"},
		{"sparse bomb", sparseBombTar(t, lock(hash), 1<<40), exitMismatch, "sparse"},
		{"tampered lock", tarOf(t, tarFile{"bundle.lock.json", lock(hash)}, honest), exitMismatch, "do not match"},
		{"malformed lock", tarOf(t, tarFile{"bundle.lock.json", "{\"bundleHash\":"}, honest), exitMismatch, "malformed"},
		{"no lock", tarOf(t, honest), exitMismatch, "no bundle.lock.json"},
		{"not a tar", []byte(strings.Repeat("not a tar archive\n", 100)), exitMismatch, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w.publishBlob(t, "alpha", tc.blob)
			code, _, stderr := w.runOnce("restore", "-config", cfg, "--dir", target, "alpha")
			line := lastLine(stderr)
			t.Logf("exit %d: %s", code, line)
			if code != tc.code || !strings.Contains(line, tc.reason) {
				t.Errorf("exit %d (%s), want %d and %q", code, line, tc.code, tc.reason)
			}
			if ctx, bad := rawControl(stderr); bad {
				t.Errorf("raw control characters in the error: %q", ctx)
			}
			if got := listDir(t, outside); len(got) > 0 {
				t.Errorf("beside the target: %v", got)
			}
		})
	}
	t.Run("log of a malformed lock", func(t *testing.T) {
		w.publishBlob(t, "alpha", tarOf(t, tarFile{"bundle.lock.json", "[1,2"}))
		code, _, stderr := w.runOnce("log", "alpha", "-config", cfg)
		if code != exitMismatch || !strings.Contains(lastLine(stderr), "malformed") {
			t.Errorf("exit %d (%s), want %d", code, lastLine(stderr), exitMismatch)
		}
	})

	// Receipts are untrusted input too.
	t.Run("receipts", func(t *testing.T) {
		dir := t.TempDir()
		stranger, _ := crypto.GenerateKey()
		bad := writeReceiptsFile(t, dir, "bad.ndjson", signedReceipt(t, "s1", 1, stranger)+"\n\x1b[2J{\"callId\":")
		code, stdout, stderr := w.runOnce("receipts", "verify", bad, "--trust", w.dn.Owner().Hex())
		if code != exitMismatch {
			t.Errorf("verify of a bad file: exit %d: %s", code, lastLine(stderr))
		}
		if ctx, bad := rawControl(stdout + stderr); bad {
			t.Errorf("verify prints raw control characters: %q", ctx)
		}
		code, _, stderr = w.runOnce("receipts", "add", "--state-dir", filepath.Join(dir, "state"), "--agent", "a1",
			"--policy", "reject", "--trust", w.dn.Owner().Hex(), writeReceiptsFile(t, dir, "stranger.ndjson", signedReceipt(t, "s2", 2, stranger)))
		if code != exitMismatch {
			t.Errorf("add --policy reject of an unknown signer: exit %d: %s", code, lastLine(stderr))
		}
	})
}

// TestE2EFailedSnapshotInStatus: a snapshot that fails (here: a v2
// snapshot over the blob size limit) makes /readyz answer 503 naming the agent and the
// reason, and `hermesd status` say NOT READY with the reason and exit 1;
// once the brain fits again both say ready.
func TestE2EFailedSnapshotInStatus(t *testing.T) {
	t.Parallel()
	w := newE2EWorld(t, devnet.Agent{ID: "good"}, devnet.Agent{ID: "big"})
	for _, id := range []string{"good", "big"} {
		if err := os.MkdirAll(w.brain(id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.brain(id), "system.md"), []byte("I am "+id+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A whole-brain format fails over the blob size limit (v3 would cut
	// the brain into packs instead).
	cfg := rewriteConfig(t, w, maxBlobLine, "max_blob_size: 256KiB", "encryption:\n", "encryption:\n  format: v2\n")
	p := w.start("run", "-config", cfg)
	p.mustWaitLine(msgUploaded, 2, 30*time.Second)
	wait.Within(t, 30*time.Second, "both agents ready", func() bool { code, _, _ := readyzOf(t, w); return code == http.StatusOK })

	noise := make([]byte, 1<<20)
	rng := rand.NewChaCha8([32]byte{12})
	rng.Read(noise)
	big := filepath.Join(w.brain("big"), "weights.bin")
	if err := os.WriteFile(big, noise, 0o644); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 30*time.Second, "the failed snapshot in /readyz", func() bool { code, _, _ := readyzOf(t, w); return code != http.StatusOK })
	code, r, _ := readyzOf(t, w)
	if code != http.StatusServiceUnavailable || r["big"].Ready || !r["good"].Ready ||
		!strings.Contains(r["big"].Reason, "last snapshot failed") || !strings.Contains(r["big"].Reason, "limit") {
		t.Fatalf("readyz: HTTP %d %+v", code, r)
	}
	code, stdout, stderr := w.runOnce("status", "-config", cfg)
	t.Logf("status: exit %d:\n%s%s", code, stdout, stderr)
	var bigLine string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "big ") {
			bigLine = l
		}
	}
	if code != exitFailure || !strings.Contains(stdout, "NOT READY") || !strings.Contains(bigLine, "last snapshot failed") ||
		!strings.Contains(bigLine, "limit") || !strings.Contains(lastLine(stderr), "not ready") {
		t.Errorf("status: exit %d, big: %q", code, bigLine)
	}
	code, stdout, _ = w.runOnce("status", "--json", "-config", cfg)
	var st struct {
		Ready  bool
		Agents []agent.Status
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || code != exitFailure || st.Ready {
		t.Fatalf("status --json: exit %d, %v", code, err)
	}
	for _, a := range st.Agents {
		if a.ID == "big" && !strings.Contains(a.LastError, "limit") {
			t.Errorf("status --json: lastError of big = %q", a.LastError)
		}
	}

	if err := os.Remove(big); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 30*time.Second, "big to recover", func() bool { code, _, _ := readyzOf(t, w); return code == http.StatusOK })
	if code, stdout, _ := w.runOnce("status", "-config", cfg); code != 0 || strings.Contains(stdout, "NOT READY") {
		t.Errorf("status after recovery: exit %d\n%s", code, stdout)
	}
	p.signal(syscall.SIGTERM)
	p.wait(30 * time.Second)
}
