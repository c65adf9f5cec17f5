package main

// Helpers for the end-to-end tests in e2e_test.go: they build the real
// hermesd binary once per test process and run it as a subprocess against a
// devnet (chain + Walrus) that lives in the test process.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/daemon"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walrus"
)

var (
	binDirOnce sync.Once
	binDir     string
	binDirErr  error
	hermesdBin builtBinary
	devnetBin  builtBinary
)

// TestMain only removes the binaries the end-to-end tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// hermesdBinary builds cmd/hermesd once per test process with the toolchain
// (and the environment: make test builds without cgo, as make build does)
// that runs the tests.
func hermesdBinary(t *testing.T) string {
	t.Helper()
	return hermesdBin.get(t, ".", "hermesd")
}

// devnetBinary builds cmd/hermesd-devnet, the devnet as a process of its
// own (what make run starts), once per test process.
func devnetBinary(t *testing.T) string {
	t.Helper()
	return devnetBin.get(t, "../hermesd-devnet", "hermesd-devnet")
}

// builtBinary is one command built once per test process.
type builtBinary struct {
	once sync.Once
	path string
	err  error
}

func (b *builtBinary) get(t *testing.T, pkg, name string) string {
	t.Helper()
	b.once.Do(func() { b.path, b.err = goBuild(pkg, name) })
	if b.err != nil {
		t.Fatalf("building %s: %v", name, b.err)
	}
	return b.path
}

// goBuild builds the command in pkg into the test process's binary
// directory.
func goBuild(pkg, name string) (string, error) {
	// The go command that runs the tests exports its GOROOT.
	goTool := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goTool); os.Getenv("GOROOT") == "" || err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			return "", err
		}
	}
	binDirOnce.Do(func() { binDir, binDirErr = os.MkdirTemp("", "hermesd-e2e-") })
	if binDirErr != nil {
		return "", binDirErr
	}
	path := filepath.Join(binDir, name)
	if out, err := exec.Command(goTool, "build", "-o", path, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return path, nil
}

// freePort returns a loopback address that was free a moment ago (the
// subprocess needs to know its HTTP port in advance). The end-to-end
// tests run in parallel and every HTTP poll takes an ephemeral port for
// its connection, so on Linux the port comes from below the ephemeral
// range, where neither a connect nor a listen on port 0 can take it
// before the subprocess binds it; no port is handed out twice.
func freePort(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1))
}

// devnetChainPort is a -chain-port for hermesd-devnet: the devnet puts
// its L2 chain and gateway on the two ports after it, so all three are
// reserved.
func devnetChainPort(t *testing.T) string {
	t.Helper()
	return strconv.Itoa(freePorts(t, 3))
}

// freePorts reserves n consecutive loopback ports, each free a moment
// ago and never handed out before in this process, and returns the
// first (freePort says where they come from).
func freePorts(t *testing.T, n int) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	if low := ephemeralLow(); low > 10000+n {
	next:
		for range 200 {
			base := 10000 + rand.IntN(low-10000-n)
			for p := base; p < base+n; p++ {
				if portsGiven[p] {
					continue next
				}
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
				if err != nil {
					continue next // in use
				}
				ln.Close()
			}
			for p := base; p < base+n; p++ {
				portsGiven[p] = true
			}
			return base
		}
	}
	if n > 1 {
		t.Fatalf("no run of %d free ports below the ephemeral range", n)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// ephemeralLow is the first port of Linux's ephemeral range (0 when it
// cannot be read, as on other systems).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var low, high int
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil || low > 65535 {
		return 0
	}
	return low
}

// e2eWorld is a devnet in the test process plus the log of every hermesd
// subprocess the test ran.
type e2eWorld struct {
	t      *testing.T
	dn     *devnet.Devnet
	http   string // the daemon's HTTP listen address
	logf   *os.File
	runs   int
	client *http.Client
	// extraEnv is added to every process's environment (a user's
	// export HERMESD_CONFIG=...).
	extraEnv []string
	// logLevel of the subprocesses ("": info).
	logLevel string
}

func newE2EWorld(t *testing.T, agents ...devnet.Agent) *e2eWorld {
	t.Helper()
	return newE2EWorldWith(t, devnet.Options{}, agents...)
}

// newE2EWorldWith is newE2EWorld with more devnet options (the test's
// directory, timings and HTTP address are always its own).
// e2eShards is the devnets' shard count unless a test says otherwise:
// blob ids at a hundredth of mainnet's 1000-shard cost (what depends on
// the count is tested in internal/redstuff), quilts of up to 66 patches.
const e2eShards = 100

// maxBlobLine is the max_blob_size line of a devnet configuration at
// e2eShards (its Walrus server's largest blob).
var maxBlobLine = "max_blob_size: " + config.ByteSize(devnet.MaxBlobSize(e2eShards)).String()

func newE2EWorldWith(t *testing.T, o devnet.Options, agents ...devnet.Agent) *e2eWorld {
	t.Helper()
	hermesdBinary(t) // build first, before any devnet clock starts
	w := newProcessWorld(t)
	o.Dir, o.Agents, o.HTTPListen = t.TempDir(), agents, w.http
	o.Quiet, o.MaxLag = 50*time.Millisecond, 500*time.Millisecond
	if o.Shards == 0 {
		o.Shards = e2eShards
	}
	dn, err := devnet.Start(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	w.dn = dn
	t.Cleanup(func() { dn.Close() })
	return w
}

// newProcessWorld is a world without a devnet (yet): a daemon HTTP
// address and the log of the subprocesses. Tests that run the devnet as a
// process, as make run does, use it as it is.
func newProcessWorld(t *testing.T) *e2eWorld {
	t.Helper()
	w := &e2eWorld{t: t, http: freePort(t), client: &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}}
	var err error
	if w.logf, err = os.Create(filepath.Join(t.TempDir(), "hermesd.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Registered after the process cleanups, so this runs once every
		// subprocess is gone.
		if t.Failed() {
			w.dumpLog()
		}
		w.logf.Close()
	})
	return w
}

// dumpLog prints the tail of the subprocess log into the test output.
func (w *e2eWorld) dumpLog() {
	const tail = 96 << 10
	b, err := os.ReadFile(w.logf.Name())
	if err != nil {
		w.t.Logf("cannot read hermesd log: %v", err)
		return
	}
	if len(b) > tail {
		b = b[len(b)-tail:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
		w.t.Logf("hermesd output (last %d KiB of %s):\n%s", tail>>10, w.logf.Name(), b)
		return
	}
	w.t.Logf("hermesd output (%s):\n%s", w.logf.Name(), b)
}

func (w *e2eWorld) brain(id string) string {
	w.t.Helper()
	a, err := w.dn.Config.Agent(id)
	if err != nil {
		w.t.Fatal(err)
	}
	return a.BrainDir
}

func (w *e2eWorld) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HERMESD_") {
			continue // the tests decide the configuration and log level
		}
		env = append(env, kv)
	}
	level := w.logLevel
	if level == "" {
		level = "info"
	}
	return append(append(env, "HERMESD_LOG_LEVEL="+level), w.extraEnv...)
}

// hermesdProc is one running hermesd subprocess.
type hermesdProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	out  *lineLog
	done chan struct{}
	err  error // from Wait, valid once done is closed
}

// start runs `hermesd args...` in the background; its output goes to the
// test's log file and is scanned for lines the test waits on.
func (w *e2eWorld) start(args ...string) *hermesdProc {
	w.t.Helper()
	return w.startBinary(hermesdBinary(w.t), nil, args...)
}

// startBinary is start for another binary, optionally with attrs.
func (w *e2eWorld) startBinary(bin string, attrs *syscall.SysProcAttr, args ...string) *hermesdProc {
	w.t.Helper()
	w.runs++
	fmt.Fprintf(w.logf, "=== %s #%d: %s\n", filepath.Base(bin), w.runs, strings.Join(args, " "))
	p := &hermesdProc{t: w.t, out: newLineLog(w.logf), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = w.env()
	p.cmd.SysProcAttr = attrs
	// A child the process left behind (hermesd-devnet's daemon) may hold
	// the output pipe: Wait stops waiting for it a while after the exit.
	p.cmd.WaitDelay = 30 * time.Second
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

// run starts the daemon on the devnet's configuration.
func (w *e2eWorld) run() *hermesdProc {
	return w.start("run", "-config", w.dn.ConfigPath)
}

func (p *hermesdProc) pid() int { return p.cmd.Process.Pid }

func (p *hermesdProc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// kill9 sends SIGKILL and waits for the process to be gone.
func (p *hermesdProc) kill9() {
	p.t.Helper()
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)
}

// wait waits for the process to exit and returns its exit code (-1 when a
// signal killed it).
func (p *hermesdProc) wait(limit time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		p.t.Fatalf("hermesd (pid %d) still running after %v", p.pid(), limit)
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *hermesdProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// lineLog copies a subprocess's output to a file and counts the lines that
// contain each watched substring.
type lineLog struct {
	mu      sync.Mutex
	w       io.Writer
	partial []byte
	lines   []string
	changed chan struct{} // closed and replaced on every complete line
}

func newLineLog(w io.Writer) *lineLog {
	return &lineLog{w: w, changed: make(chan struct{})}
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(p)
	l.partial = append(l.partial, p...)
	grew := false
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
		grew = true
	}
	if grew {
		close(l.changed)
		l.changed = make(chan struct{})
	}
	return len(p), nil
}

// count returns how many lines contain every one of subs, and a channel
// closed on the next line.
func (l *lineLog) count(subs ...string) (int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, line := range l.lines {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		n++
	}
	return n, l.changed
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n") + string(l.partial)
}

// waitLine waits until at least n lines contain s, the process exits, or
// the limit passes; it reports whether the lines appeared.
func (p *hermesdProc) waitLine(s string, n int, limit time.Duration) bool {
	return p.waitLines(n, limit, s)
}

// waitLines is waitLine for lines that contain every one of subs.
func (p *hermesdProc) waitLines(n int, limit time.Duration, subs ...string) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		got, changed := p.out.count(subs...)
		if got >= n {
			return true
		}
		select {
		case <-changed:
		case <-p.done:
			got, _ := p.out.count(subs...)
			return got >= n
		case <-deadline.C:
			return false
		}
	}
}

// mustWaitLine is waitLine that fails the test.
func (p *hermesdProc) mustWaitLine(s string, n int, limit time.Duration) {
	p.t.Helper()
	if !p.waitLine(s, n, limit) {
		p.t.Fatalf("hermesd (pid %d) did not log %q (%d times) within %v", p.pid(), s, n, limit)
	}
}

// mustWaitUpload waits until hermesd logs the verified upload of the
// brain state whose bundle hash is h: the snapshot of a write the test
// made, not just any upload (a re-pack or a snapshot of the write half
// done also log one).
func (p *hermesdProc) mustWaitUpload(h string, limit time.Duration) {
	p.t.Helper()
	if !p.waitLines(1, limit, msgUploaded, "bundle_hash="+h+" ") {
		p.t.Fatalf("hermesd (pid %d) did not log the upload of bundle hash %s within %v", p.pid(), h, limit)
	}
}

// status asks the running daemon for its status (GET /v1/status).
// restorer is the restore pipeline of agent id, built from the devnet's
// configuration alone (its own clients, a scratch spool).
func (w *e2eWorld) restorer(id string) *snapshot.Pipeline {
	w.t.Helper()
	svc, err := compose.Build(w.t.Context(), w.dn.Config, nil, compose.Options{ReadOnly: true})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(svc.Close)
	ac, err := w.dn.Config.Agent(id)
	if err != nil {
		w.t.Fatal(err)
	}
	return svc.Pipeline(ac, w.t.TempDir(), nil)
}

func (w *e2eWorld) status() (daemon.StatusReport, error) {
	var rep daemon.StatusReport
	resp, err := w.client.Get("http://" + w.http + "/v1/status")
	if err != nil {
		return rep, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rep, fmt.Errorf("status %d", resp.StatusCode)
	}
	return rep, json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rep)
}

func (w *e2eWorld) healthy() bool {
	resp, err := w.client.Get("http://" + w.http + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// agentState reads an agent's state file as hermesd last saved it.
func (w *e2eWorld) agentState(id string) *state.AgentState {
	w.t.Helper()
	st, err := state.LoadAgent(state.AgentPath(w.dn.Config.StateDir, id))
	if err != nil {
		w.t.Fatal(err)
	}
	return st
}

// ensClient is a client of the devnet chain; with signer it can write.
func (w *e2eWorld) ensClient(signer bool) *ens.Client {
	w.t.Helper()
	cfg := ens.Config{RPCURL: w.dn.Chain.URL(), PollInterval: 20 * time.Millisecond}
	if signer {
		cfg.Signer = ens.NewSigner(w.dn.SignerKey)
	}
	c, err := ens.New(w.t.Context(), cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(c.Close)
	return c
}

// pointer reads an agent-snapshot record ("" when there is none).
// walrusClient is a Walrus client of the world's server that computes
// blob ids over the world's shard count, as its daemon does.
func (w *e2eWorld) walrusClient(cfg walrus.Config) *walrus.Client {
	w.t.Helper()
	cfg.Publishers, cfg.Aggregators = []string{w.dn.Walrus.URL()}, []string{w.dn.Walrus.URL()}
	cfg.Shards = w.dn.Config.Cost.WalrusShards
	c, err := walrus.New(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

func (w *e2eWorld) pointer(name string) string {
	w.t.Helper()
	c := w.ensClient(false)
	v, err := c.Read(w.t.Context(), name)
	if err != nil && !errors.Is(err, ens.ErrNoPointer) {
		w.t.Fatal(err)
	}
	return v
}

// dirHash is the bundle hash of a directory.
func dirHash(t *testing.T, dir string) string {
	t.Helper()
	res, err := hash.Dir(context.Background(), dir, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Digest.String()
}

func readLock(t *testing.T, brain string) *bundlelock.Lock {
	t.Helper()
	l, err := bundlelock.Read(filepath.Join(brain, bundlelock.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// hashedFile is one file that counts towards the bundle hash.
type hashedFile struct {
	content string
	mode    fs.FileMode
}

// hashedTree reads every regular file under dir that the bundle hash
// covers (everything but the top-level lock and receipts export), and
// every symlink (its target as its content, "-> target"). Other entry
// types are reported as errors: a brain here holds only files and links.
func hashedTree(t *testing.T, dir string) map[string]hashedFile {
	t.Helper()
	out := map[string]hashedFile{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() || hash.Excluded(rel) {
			return nil
		}
		if d.Type() == fs.ModeSymlink {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = hashedFile{"-> " + target, fs.ModeSymlink}
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: unexpected %v", rel, d.Type())
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[rel] = hashedFile{string(b), info.Mode().Perm()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree reports the differences between two hashedTree results.
func sameTree(want, got map[string]hashedFile) []string {
	var diffs []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			diffs = append(diffs, p+": missing")
		case g.content != w.content:
			diffs = append(diffs, fmt.Sprintf("%s: content differs (%d vs %d bytes)", p, len(g.content), len(w.content)))
		case g.mode != w.mode:
			diffs = append(diffs, fmt.Sprintf("%s: mode %v, want %v", p, g.mode, w.mode))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, p+": unexpected file")
		}
	}
	return diffs
}

// listDir names the entries of dir (nil when it does not exist).
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// packBytes reads a blob's or a quilt patch's bytes from the devnet Walrus
// server's disk; id may be a head reference (its id is read).
func packBytes(t *testing.T, dn *devnet.Devnet, id string) []byte {
	t.Helper()
	b, err := dn.Walrus.ReadStored(headref.ID(id))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// flipPackByte inverts the byte in the middle of a blob's or a quilt
// patch's bytes on the devnet Walrus server's disk; id may be a head
// reference.
func flipPackByte(t *testing.T, dn *devnet.Devnet, id string, mask byte) {
	t.Helper()
	if err := dn.Walrus.FlipStoredByte(headref.ID(id), mask); err != nil {
		t.Fatal(err)
	}
}
