package main

// End-to-end tests of the ENS pointer's life with the real
// binary: holds seen and resolved through the CLI, the daemon with the
// chain down, the shutdown flush of many agents on a frozen chain, and the
// devnet process killed with SIGKILL again and again.

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/pointertest"
	"github.com/hermesd/hermesd/internal/wait"
)

// agentStatus is one agent's line of the running daemon's /v1/status.
func (w *e2eWorld) agentStatus(id string) (s struct {
	Ready bool
	Hold  bool
	Value string
	Last  string
	Pub   string
	Pend  bool
}) {
	rep, err := w.status()
	if err != nil {
		return s
	}
	for _, a := range rep.Agents {
		if a.ID == id {
			s.Ready = a.Phase == "ready"
			if a.Hold != nil {
				s.Hold, s.Value = true, a.Hold.Value
			}
			if a.Last != nil {
				s.Last = a.Last.BlobID
			}
			s.Pub, s.Pend = a.Published, a.Pending != nil
		}
	}
	return s
}

// settled reports whether agent id's newest snapshot is published.
func (w *e2eWorld) settled(id string) bool {
	s := w.agentStatus(id)
	return s.Ready && !s.Hold && !s.Pend && s.Last != "" && s.Pub == s.Last
}

// stopRun stops a daemon with SIGTERM and expects exit 0.
func stopRun(t *testing.T, p *hermesdProc) {
	t.Helper()
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("hermesd exited %d on SIGTERM", code)
	}
}

// TestE2EPointerHold: another key writes a foreign blob id. The agent is
// held, as `hermesd status` shows with the daemon running and stopped;
// the other agent keeps publishing; the hold survives a restart; `hermesd
// pointer adopt` and `pointer override` resolve it through the running
// daemon (TCP with the token, and the Unix socket) and on the state
// directory with the daemon stopped; with nothing held both refuse (exit
// 2), and so does a running daemon that cannot take the command.
func TestE2EPointerHold(t *testing.T) {
	t.Parallel()
	const id, name = "alpha", "alpha.hermes.eth"
	w := newE2EWorld(t, devnet.Agent{ID: id, ENSName: name}, devnet.Agent{ID: "beta", ENSName: "beta.hermes.eth"})
	alpha := newBrainWriter(t, w.brain(id), rand.New(rand.NewPCG(11, 1)))
	beta := newBrainWriter(t, w.brain("beta"), rand.New(rand.NewPCG(11, 2)))
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("e2e-token-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "api.sock")
	listen := `listen: "` + w.http + `"`
	check := "poll_interval: 20ms"
	checkFast := "poll_interval: 20ms\n  check_interval: 300ms"
	// One daemon configuration with both the socket and the token; the
	// CLI prefers the socket. The same without the socket makes the CLI
	// use TCP with the token; the devnet's own has neither.
	cfgBoth := rewriteConfig(t, w, listen, listen+"\n  token: {file: "+tokenFile+"}\n  socket: "+sock, check, checkFast)
	cfgTCP := rewriteConfig(t, w, listen, listen+"\n  token: {file: "+tokenFile+"}", check, checkFast)
	cfgBare := w.dn.ConfigPath
	run := func() *hermesdProc { return w.start("run", "-config", cfgBoth) }
	cli := func(args ...string) (int, string, string) { return w.runOnce(append([]string{"pointer"}, args...)...) }

	p := run()
	wait.Within(t, 30*time.Second, "both agents to publish", func() bool { return w.settled(id) && w.settled("beta") })
	other := pointertest.OtherWriter(t, w.dn.Chain, w.dn.SignerKey, name)
	hold := func(t *testing.T, files map[string]string) string {
		t.Helper()
		blob := pointertest.Fork(t, w.dn.Config, id, files)
		if _, err := other.Write(t.Context(), name, blob, w.pointer(name)); err != nil {
			t.Fatal(err)
		}
		wait.Within(t, 30*time.Second, "alpha to be held", func() bool { s := w.agentStatus(id); return s.Hold && s.Value == blob })
		return blob
	}
	fork1 := hold(t, map[string]string{"system.md": "I am fork one.\n", "fork.md": "one\n"})

	t.Run("status shows the hold", func(t *testing.T) {
		code, stdout, _ := w.runOnce("status", "-config", cfgBoth)
		if code != exitFailure || !strings.Contains(stdout, "NOT READY") || !strings.Contains(stdout, "HELD") || !strings.Contains(stdout, "pointer adopt alpha") {
			t.Errorf("status while running: exit %d\n%s", code, stdout)
		}
		// The other agent keeps publishing.
		before := w.agentStatus("beta").Pub
		beta.put(t, "notes/while-held.md", []byte("b\n"), 0o644)
		wait.Within(t, 30*time.Second, "beta to publish while alpha is held", func() bool {
			return w.settled("beta") && w.agentStatus("beta").Pub != before
		})
	})

	t.Run("a daemon that cannot take the command", func(t *testing.T) {
		code, _, stderr := cli("adopt", id, "-config", cfgBare)
		if line := lastLine(stderr); code != exitUsage || !strings.Contains(line, "http.token") || !strings.Contains(line, "http.socket") {
			t.Errorf("exit %d: %s", code, line)
		}
	})

	t.Run("adopt through the daemon (TCP, token)", func(t *testing.T) {
		code, stdout, stderr := cli("adopt", id, "-config", cfgTCP, "--json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, lastLine(stderr))
		}
		var out pointerResolution
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("%v: %s", err, stdout)
		}
		if out.Via != "daemon" || out.Published != fork1 || out.Replaced != fork1 || out.SetAside == "" {
			t.Fatalf("result %+v", out)
		}
		if d := sameTree(alpha.want(), hashedTree(t, out.SetAside)); len(d) > 0 {
			t.Errorf("the set-aside brain is not ours: %v", d)
		}
		if b, _ := os.ReadFile(filepath.Join(w.brain(id), "fork.md")); string(b) != "one\n" {
			t.Errorf("the brain is not the fork's: fork.md %q", b)
		}
		if code, _, stderr := cli("adopt", id, "-config", cfgTCP); code != exitUsage || !strings.Contains(lastLine(stderr), "not held") {
			t.Errorf("adopt with nothing held: exit %d: %s", code, lastLine(stderr))
		}
		// Publishing resumes from the adopted snapshot.
		alpha = newBrainWriter(t, w.brain(id), rand.New(rand.NewPCG(11, 3)))
		alpha.put(t, "notes/after-adopt.md", []byte("x\n"), 0o644)
		// Wait for the snapshot of this very brain: v3 may first re-pack
		// the adopted snapshot (the end epochs of its packs are not known
		// here), a publish of its own.
		want := dirHash(t, w.brain(id))
		wait.Within(t, 30*time.Second, "alpha to publish after the adopt", func() bool {
			rep, err := w.status()
			if err != nil || !w.settled(id) {
				return false
			}
			for _, a := range rep.Agents {
				if a.ID == id {
					return a.Last != nil && a.Last.BundleHash == want && a.Published != fork1
				}
			}
			return false
		})
	})

	var fork2 string
	t.Run("the hold survives a restart; status while stopped", func(t *testing.T) {
		fork2 = hold(t, map[string]string{"system.md": "I am fork two.\n"})
		stopRun(t, p)
		code, stdout, _ := w.runOnce("status", "-config", cfgBoth)
		if code != 0 || !strings.Contains(stdout, "not running") || !strings.Contains(stdout, "HELD") {
			t.Errorf("status while stopped: exit %d\n%s", code, stdout)
		}
		p = run()
		p.mustWaitLine(msgReady, 2, 30*time.Second)
		wait.Within(t, 10*time.Second, "the daemon to serve its status", func() bool { return w.agentStatus(id).Ready })
		if s := w.agentStatus(id); !s.Hold || s.Value != fork2 {
			t.Fatalf("after the restart: %+v", s)
		}
	})

	t.Run("override through the daemon (socket)", func(t *testing.T) {
		ours := w.agentStatus(id).Last
		code, stdout, stderr := cli("override", id, "-config", cfgBoth, "--json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, lastLine(stderr))
		}
		var out pointerResolution
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("%v: %s", err, stdout)
		}
		if out.Via != "daemon" || out.Published != ours || out.Replaced != fork2 || out.Pending {
			t.Fatalf("result %+v (ours %s)", out, ours)
		}
		if got := w.pointer(name); got != ours {
			t.Fatalf("pointer %s, want ours %s", got, ours)
		}
	})

	t.Run("override with the daemon stopped", func(t *testing.T) {
		fork3 := hold(t, map[string]string{"system.md": "I am fork three.\n"})
		ours := w.agentStatus(id).Last
		stopRun(t, p)
		code, stdout, stderr := cli("override", id, "-config", cfgBoth)
		if code != 0 || !strings.Contains(stdout, ours) || !strings.Contains(stdout, "tx 0x") {
			t.Fatalf("exit %d: %s %s", code, stdout, lastLine(stderr))
		}
		if got := w.pointer(name); got != ours {
			t.Fatalf("pointer %s, want ours %s (over %s)", got, ours, fork3)
		}
		if st := w.agentState(id); st.Hold != nil || st.Pending != nil || st.Published != ours {
			t.Fatalf("state: %+v", st)
		}
		if code, _, stderr := cli("override", id, "-config", cfgBoth); code != exitUsage || !strings.Contains(lastLine(stderr), "not held") {
			t.Errorf("override with nothing held: exit %d: %s", code, lastLine(stderr))
		}
	})

	t.Run("adopt with the daemon stopped", func(t *testing.T) {
		p = run()
		fork4 := hold(t, map[string]string{"system.md": "I am fork four.\n", "four.md": "4\n"})
		want := hashedTree(t, w.brain(id))
		stopRun(t, p)
		code, stdout, stderr := cli("adopt", id, "-config", cfgBoth)
		if code != 0 || !strings.Contains(stdout, "set aside in ") {
			t.Fatalf("exit %d: %s %s", code, stdout, lastLine(stderr))
		}
		aside := strings.TrimSpace(stdout[strings.Index(stdout, "set aside in ")+len("set aside in "):])
		if d := sameTree(want, hashedTree(t, aside)); len(d) > 0 {
			t.Errorf("the set-aside brain is not ours: %v", d)
		}
		if b, _ := os.ReadFile(filepath.Join(w.brain(id), "four.md")); string(b) != "4\n" {
			t.Errorf("the brain is not the fork's: four.md %q", b)
		}
		if st := w.agentState(id); st.Hold != nil || st.Pending != nil || st.Published != fork4 || st.Last.BlobID != fork4 {
			t.Fatalf("state: %+v", st)
		}
	})

	t.Run("the next start converges", func(t *testing.T) {
		p = run()
		wait.Within(t, 30*time.Second, "both agents settled and ready", func() bool {
			rep, err := w.status()
			return err == nil && rep.Ready && w.settled(id) && w.settled("beta")
		})
		stopRun(t, p)
	})
}

// tcpForward listens on addr and forwards every connection to target: the
// chain "coming back" on the port the configuration names.
func tcpForward(t *testing.T, addr, target string) {
	t.Helper()
	var ln net.Listener
	// The port was free a moment ago; something may have taken it.
	wait.Within(t, 10*time.Second, "listening on "+addr, func() bool {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
				io.Copy(c, u)
			}()
		}
	}()
}

// TestE2EChainDown: `hermesd run` with nothing listening on the RPC port
// starts, snapshots to Walrus, keeps the pointer pending, and publishes it
// once the chain is back; `hermesd restore` of an existing brain with the
// RPC down exits 0 without touching anything.
func TestE2EChainDown(t *testing.T) {
	t.Parallel()
	const id, name = "alpha", "alpha.hermes.eth"
	w := newE2EWorld(t, devnet.Agent{ID: id, ENSName: name})
	bw := newBrainWriter(t, w.brain(id), rand.New(rand.NewPCG(12, 1)))
	down := freePort(t)
	cfg := rewriteConfig(t, w, "rpc: "+w.dn.Chain.URL(), "rpc: http://"+down)

	t.Run("restore of an existing brain", func(t *testing.T) {
		before := hashedTree(t, w.brain(id))
		code, stdout, stderr := w.runOnce("restore", "-config", cfg, id)
		if code != 0 || !strings.Contains(stdout, "already present") {
			t.Fatalf("exit %d: %s %s", code, stdout, lastLine(stderr))
		}
		if d := sameTree(before, hashedTree(t, w.brain(id))); len(d) > 0 {
			t.Errorf("the brain changed: %v", d)
		}
	})

	p := w.start("run", "-config", cfg)
	p.mustWaitLine(msgReady, 1, 30*time.Second)
	p.mustWaitLine(msgUploaded, 1, 30*time.Second)
	wait.Within(t, 30*time.Second, "the snapshot pending, its write failed", func() bool {
		rep, err := w.status()
		if err != nil || len(rep.Agents) != 1 {
			return false
		}
		a := rep.Agents[0]
		return a.Last != nil && a.Pending != nil && a.Pending.Value == a.Last.BlobID && a.Pending.Attempts > 0 &&
			strings.Contains(a.Pending.LastErr, "unreachable")
	})
	if got := w.pointer(name); got != "" {
		t.Fatalf("pointer %q with the chain down", got)
	}
	// Snapshots go on while the chain is down.
	ups, _ := p.out.count(msgUploaded)
	bw.put(t, "notes/while-down.md", []byte("down\n"), 0o644)
	p.mustWaitLine(msgUploaded, ups+1, 30*time.Second)
	if p.exited() {
		t.Fatalf("hermesd exited: %v", p.err)
	}

	tcpForward(t, down, strings.TrimPrefix(w.dn.Chain.URL(), "http://"))
	back := time.Now()
	var last string
	wait.Within(t, 60*time.Second, "the pointer published once the chain is back", func() bool {
		rep, err := w.status()
		if err != nil || len(rep.Agents) != 1 {
			return false
		}
		a := rep.Agents[0]
		if a.Last == nil || a.Pending != nil || a.Published != a.Last.BlobID {
			return false
		}
		last = a.Last.BlobID
		return true
	})
	t.Logf("published %v after the chain came back", time.Since(back).Round(time.Millisecond))
	if got := w.pointer(name); got != last {
		t.Fatalf("pointer %s, want %s", got, last)
	}
	if h := dirHash(t, w.brain(id)); w.agentState(id).Last.BundleHash != h {
		t.Errorf("the published snapshot is not the brain's state")
	}
	stopRun(t, p)
}

// pointerLine is one "pointer published" line of the daemon's log.
type pointerLine struct {
	agent, blob, tx string
	batch           int
	gas             uint64
}

// publishedLines parses the daemon's "pointer published" lines from log.
func publishedLines(log string) []pointerLine {
	var out []pointerLine
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, msgPublished) {
			continue
		}
		var pl pointerLine
		for _, f := range strings.Fields(l) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "agent":
				pl.agent = v
			case "blob":
				pl.blob = v
			case "tx":
				pl.tx = v
			case "batch":
				fmt.Sscan(v, &pl.batch)
			case "gas":
				fmt.Sscan(v, &pl.gas)
			}
		}
		out = append(out, pl)
	}
	return out
}

// TestE2EFlush200: 200 agents have a snapshot pending while the chain is
// frozen (it takes no transactions). A SIGTERM while it is still frozen
// ends at shutdown_timeout, exits 1 and says which pointers stayed
// pending; they are in the state directory. At the next start, the chain
// recovers and SIGTERM is sent: the flush publishes all 200 in gas-bounded
// batches within shutdown_timeout and exits 0.
func TestE2EFlush200(t *testing.T) {
	t.Parallel()
	const n = 200
	agents := make([]devnet.Agent, n)
	for i := range agents {
		agents[i] = devnet.Agent{ID: fmt.Sprintf("a%03d", i), ENSName: fmt.Sprintf("a%03d.hermes.eth", i)}
	}
	start := time.Now()
	w := newE2EWorld(t, agents...)
	for _, a := range agents {
		if err := os.MkdirAll(filepath.Join(w.brain(a.ID), "notes"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.brain(a.ID), "system.md"), []byte("I am "+a.ID+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("devnet with %d names: %v", n, time.Since(start).Round(time.Millisecond))
	freezer := pointertest.NewChainProxy(t, w.dn.Chain.URL())
	const limit = 120 * time.Second
	rpc := "rpc: " + w.dn.Chain.URL()
	short := rewriteConfig(t, w, rpc, "rpc: "+freezer.URL, "shutdown_timeout: 10s", "shutdown_timeout: 2s")
	long := rewriteConfig(t, w, rpc, "rpc: "+freezer.URL, "shutdown_timeout: 10s", "shutdown_timeout: "+limit.String())
	allSettled := func() bool {
		rep, err := w.status()
		if err != nil || len(rep.Agents) != n {
			return false
		}
		for _, a := range rep.Agents {
			if a.Last == nil || a.Pending != nil || a.Published != a.Last.BlobID {
				return false
			}
		}
		return true
	}

	// Every agent publishes once (the records exist, as in production).
	p := w.start("run", "-config", short)
	wait.Within(t, 5*time.Minute, "every agent published once", allSettled)
	t.Logf("first snapshots of %d agents published: %v", n, time.Since(start).Round(time.Millisecond))

	freezer.Hold()
	for _, a := range agents {
		if err := os.WriteFile(filepath.Join(w.brain(a.ID), "notes", "frozen.md"), []byte("written while the chain is frozen\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wait.Within(t, 5*time.Minute, "every agent's new snapshot pending", func() bool {
		rep, err := w.status()
		if err != nil {
			return false
		}
		pending := 0
		for _, a := range rep.Agents {
			if a.Pending != nil && a.Last != nil && a.Pending.Value == a.Last.BlobID {
				pending++
			}
		}
		return pending == n && freezer.Counts().Held > 0
	})

	t.Run("frozen at shutdown: exit 1, pending", func(t *testing.T) {
		t0 := time.Now()
		p.signal(syscall.SIGTERM)
		code := p.wait(2*time.Second + 90*time.Second)
		t.Logf("SIGTERM on a frozen chain: exit %d after %v", code, time.Since(t0).Round(time.Millisecond))
		if code != exitFailure {
			t.Errorf("exit %d, want %d", code, exitFailure)
		}
		out := p.out.String()
		if !strings.Contains(out, "pointers still pending at shutdown") || !strings.Contains(out, "a000") {
			t.Errorf("the log does not say which pointers stayed pending")
		}
		for _, a := range agents {
			if st := w.agentState(a.ID); st.Pending == nil || st.Last == nil || st.Pending.Value != st.Last.BlobID {
				t.Fatalf("%s: not pending in the state directory: %+v", a.ID, st.Pending)
			}
		}
	})

	t.Run("the chain recovers, then SIGTERM: the flush publishes all", func(t *testing.T) {
		p := w.start("run", "-config", long)
		p.mustWaitLine(msgReady, n, 3*time.Minute)
		// The publisher is stuck on the frozen chain; it recovers and the
		// daemon is told to stop at once.
		wait.Within(t, 60*time.Second, "a transaction held by the frozen chain", func() bool { return freezer.Counts().Held > 0 })
		before := len(publishedLines(p.out.String()))
		freezer.Pass()
		t0 := time.Now()
		p.signal(syscall.SIGTERM)
		code := p.wait(limit + 60*time.Second)
		took := time.Since(t0)
		if code != 0 {
			t.Fatalf("exit %d after SIGTERM (limit %v)", code, limit)
		}
		lines := publishedLines(p.out.String())[before:]
		txs := map[string][]pointerLine{}
		for _, l := range lines {
			if l.tx != "" {
				txs[l.tx] = append(txs[l.tx], l)
			}
		}
		var sizes []int
		var gas []uint64
		for _, ls := range txs {
			sizes = append(sizes, len(ls))
			gas = append(gas, ls[0].gas*uint64(len(ls)))
			if ls[0].batch != len(ls) {
				t.Errorf("tx %s: batch=%d logged, %d updates", ls[0].tx, ls[0].batch, len(ls))
			}
		}
		slices.Sort(sizes)
		slices.Sort(gas)
		t.Logf("SIGTERM after the chain recovered: exit 0 in %v; %d pointers published after the thaw (%.1f per second) in %d transactions; updates per transaction %v; gas per transaction %v (gas_limit 1000000)",
			took.Round(time.Millisecond), len(lines), float64(len(lines))/took.Seconds(), len(txs), sizes, gas)
		for _, g := range gas {
			if g > 1_000_000 {
				t.Errorf("a transaction used %d gas, above gas_limit", g)
			}
		}
		if len(txs) < 2 {
			t.Errorf("%d transactions for %d pointers: not split by gas", len(txs), len(lines))
		}
		for _, a := range agents {
			st := w.agentState(a.ID)
			if st.Pending != nil || st.Last == nil || st.Published != st.Last.BlobID {
				t.Fatalf("%s: not published: pending %+v", a.ID, st.Pending)
			}
		}
		for _, a := range agents[:5] {
			if got := w.pointer(a.ENSName); got != w.agentState(a.ID).Last.BlobID {
				t.Errorf("%s names %s", a.ENSName, got)
			}
		}
		if m := flushLine(p.out.String()); m != "" {
			t.Logf("daemon: %s", m)
		}
	})
}

// flushLine is the daemon's summary of its shutdown flush, if any.
func flushLine(log string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "flush published pending pointers") {
			return l
		}
	}
	return ""
}

// devnetProc is a `hermesd-devnet` subprocess.
type devnetProc struct {
	*hermesdProc
	start time.Time
}

// startDevnet runs `hermesd-devnet` with args.
func (w *e2eWorld) startDevnet(args []string) *devnetProc {
	w.t.Helper()
	return &devnetProc{hermesdProc: w.startBinary(devnetBinary(w.t), nil, args...), start: time.Now()}
}

// ready reports whether the devnet printed that it runs.
func (d *devnetProc) ready() bool {
	n, _ := d.out.count("devnet running")
	return n > 0
}

// TestE2EDevnetKill9 kills the devnet process (chain + Walrus, separate
// from the daemon) with SIGKILL at random moments, 22 times, the first
// two during its very first start. Every restart must start (no refusal,
// no hang); meanwhile a daemon keeps snapshotting three changing brains
// and publishing their pointers through the kills. At the end every
// pointer transaction the daemon reported mined is still on the chain,
// with the value it wrote, and the daemon converges: every agent's newest
// snapshot published, nothing pending, nothing held.
func TestE2EDevnetKill9(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(e2eSeed(t), 14))
	hermesdBinary(t)
	devnetBinary(t)
	w := newProcessWorld(t)
	dir := t.TempDir()
	port := func() string { _, p, _ := net.SplitHostPort(freePort(t)); return p }
	chainPort, walrusPort := devnetChainPort(t), port()
	ids := []string{"k0", "k1", "k2"}
	args := []string{"--dir", dir, "--chain-port", chainPort, "--walrus-port", walrusPort, "--http", w.http, "--shards", strconv.Itoa(e2eShards)}
	for _, id := range ids {
		args = append(args, "--agent", id+"="+id+".hermes.eth")
	}
	rpcURL := "http://127.0.0.1:" + chainPort

	const kills = 22
	begin := time.Now()
	killed, beforeReady := 0, 0
	kill := func(d *devnetProc) {
		t.Helper()
		if !d.ready() {
			beforeReady++
		}
		d.kill9()
		killed++
		if out := d.out.String(); strings.Contains(out, "hermesd: ") {
			t.Fatalf("devnet failed before it was killed:\n%s", out)
		}
	}
	waitReady := func(d *devnetProc) {
		t.Helper()
		if !d.waitLine("devnet running", 1, 90*time.Second) {
			t.Fatalf("devnet start %d: not running after 90s (exited %v):\n%s", killed+1, d.exited(), d.out.String())
		}
	}

	// The very first start, killed twice at random moments of it (its
	// genesis, the name registrations, the first durable block); the
	// second time within its first 100 ms, so that at least one kill
	// lands before it is ready however fast this machine starts it.
	for i := range 2 {
		d := w.startDevnet(args)
		at := time.Duration(rng.IntN(2500)) * time.Millisecond
		if i == 1 {
			at = time.Duration(rng.IntN(100)) * time.Millisecond
		}
		d.waitLine("devnet running", 1, at)
		kill(d)
	}
	d := w.startDevnet(args)
	waitReady(d)

	// The daemon's configuration: the devnet's, with short chain timeouts
	// so that a transaction lost with a killed devnet is retried soon.
	cfgBytes, err := os.ReadFile(filepath.Join(dir, "hermesd.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cfgText := strings.Replace(string(cfgBytes), "tx_timeout: 30s", "tx_timeout: 3s\n  check_interval: 500ms", 1)
	cfg := filepath.Join(t.TempDir(), "hermesd.yml")
	if err := os.WriteFile(cfg, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	writers := map[string]*brainWriter{}
	for i, id := range ids {
		writers[id] = newBrainWriter(t, filepath.Join(dir, "brains", id), rand.New(rand.NewPCG(uint64(i), 14)))
	}
	daemon := w.start("run", "-config", cfg)
	daemon.mustWaitLine(msgPublished, len(ids), 60*time.Second)

	// The agents' runtimes keep changing their brains.
	stopEdits := make(chan struct{})
	editsDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stopEdits:
				editsDone <- nil
				return
			case <-tick.C:
			}
			if err := writers[ids[n%len(ids)]].step(); err != nil {
				editsDone <- err
				return
			}
		}
	}()

	for killed < kills {
		switch rng.IntN(3) {
		case 0:
			// Anywhere while it serves, then again during the restart:
			// the chain opening its database after a crash, Walrus
			// coming up.
			crashMoment(time.Duration(rng.IntN(1200)) * time.Millisecond)
			kill(d)
			d = w.startDevnet(args)
			d.waitLine("devnet running", 1, time.Duration(rng.IntN(1500))*time.Millisecond)
			kill(d)
		case 1:
			// Right after the daemon saw a pointer mined: that block
			// must survive.
			n, _ := daemon.out.count(msgPublished)
			daemon.waitLine(msgPublished, n+1, 20*time.Second)
			crashMoment(time.Duration(rng.IntN(30)) * time.Millisecond)
			kill(d)
		default:
			// Anywhere while it serves.
			crashMoment(time.Duration(rng.IntN(1200)) * time.Millisecond)
			kill(d)
		}
		d = w.startDevnet(args)
		waitReady(d)
		if daemon.exited() {
			t.Fatalf("the daemon exited: %v", daemon.err)
		}
	}
	close(stopEdits)
	if err := <-editsDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kills (%d before the devnet was ready) in %v", killed, beforeReady, time.Since(begin).Round(time.Millisecond))
	// The first start's first kill lands anywhere in its first 2.5 s, so
	// before or after it is ready depending on the machine; the second
	// lands within 100 ms, before (the restarts of case 0 add more).
	if beforeReady < 1 {
		t.Errorf("no kill before the devnet was ready")
	}

	// Convergence: every agent's newest snapshot is its brain as the
	// writer left it, published on the chain, nothing pending or held.
	reader, err := ens.New(t.Context(), ens.Config{RPCURL: rpcURL})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	conv := time.Now()
	wait.Within(t, 2*time.Minute, "the daemon to converge", func() bool {
		rep, err := w.status()
		if err != nil || !rep.Ready || len(rep.Agents) != len(ids) {
			return false
		}
		for _, a := range rep.Agents {
			if a.Hold != nil || a.Pending != nil || a.Last == nil || a.Published != a.Last.BlobID || a.Unsaved ||
				dirHash(t, a.BrainDir) != a.Last.BundleHash {
				return false
			}
			if v, err := reader.Read(t.Context(), a.ENSName); err != nil || v != a.Last.BlobID {
				return false
			}
		}
		return true
	})
	t.Logf("converged %v after the last restart", time.Since(conv).Round(time.Millisecond))
	for _, id := range ids {
		if d := sameTree(writers[id].want(), hashedTree(t, filepath.Join(dir, "brains", id))); len(d) > 0 {
			t.Errorf("%s: the brain is not what its writer wrote: %v", id, d)
		}
	}

	// Every pointer transaction reported mined is still there.
	verifyMined(t, rpcURL, daemon.out.String())
	stopRun(t, daemon)
	d.kill9()
}

// crashMoment lets d pass before a kill: the random moment of the crash
// (not a wait for anything).
func crashMoment(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

// verifyMined checks every transaction of the daemon's "pointer
// published" lines: its receipt is on the chain, successful, and the
// record held the published blob at that block.
func verifyMined(t *testing.T, rpcURL, log string) {
	t.Helper()
	client, err := ethclient.DialContext(t.Context(), rpcURL)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	arts, err := devchain.LoadArtifacts("")
	if err != nil {
		t.Fatal(err)
	}
	res := devchain.ResolverAddress
	n := 0
	for _, l := range publishedLines(log) {
		if l.tx == "" {
			continue // the record already held it: nothing was sent
		}
		n++
		r, err := client.TransactionReceipt(t.Context(), common.HexToHash(l.tx))
		if err != nil || r == nil {
			t.Errorf("%s: tx %s was reported mined but is gone: %v", l.agent, l.tx, err)
			continue
		}
		if r.Status != types.ReceiptStatusSuccessful {
			t.Errorf("%s: tx %s failed", l.agent, l.tx)
		}
		data, err := arts.Resolver.ABI.Pack("text", devchain.NameHash(l.agent+".hermes.eth"), "agent-snapshot")
		if err != nil {
			t.Fatal(err)
		}
		out, err := client.CallContract(t.Context(), ethereum.CallMsg{To: &res, Data: data}, r.BlockNumber)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := arts.Resolver.ABI.Unpack("text", out)
		if err != nil || len(vals) != 1 || vals[0] != l.blob {
			t.Errorf("%s: at block %d the record is %v (%v), tx %s wrote %s", l.agent, r.BlockNumber, vals, err, l.tx, l.blob)
		}
	}
	t.Logf("%d pointer transactions reported mined, all on the chain with their values", n)
	if n == 0 {
		t.Error("no pointer transaction was reported mined")
	}
}
