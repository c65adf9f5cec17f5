//go:build unix

package fleettest

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/devetcd"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/fleet"
	"github.com/hermesd/hermesd/internal/hash"
)

// Options configure a fleet under test.
type Options struct {
	// Nodes are started at once (default 3; 0 with NoNodes: none yet).
	Nodes   int
	NoNodes bool
	// Agents is how many agents the fleet shares (default 3), named
	// agent-001 …; every L2Every-th one keeps its record on the devnet's
	// L2 (default 3; -1: none), the others on L1.
	Agents  int
	L2Every int
	// BrainBytes is the size of each agent's seed brain (default 4 KiB).
	BrainBytes int
	// LeaseTTL is cluster.lease_ttl (default 3 s: a test's, short enough
	// for a take-over to be quick and long enough for renewals on a
	// loaded 2-core machine; production's default is 10 s);
	// HandoffTimeout is cluster.handoff_timeout (default
	// hermesd's).
	LeaseTTL, HandoffTimeout time.Duration
	// PointerInterval is defaults.pointer_interval (default 0: publish
	// every verified snapshot at once).
	PointerInterval time.Duration
	// EtcdMembers is the etcd cluster's size (default 3).
	EtcdMembers int
	// Binary is the hermesd to run (default: built once per test process
	// from ./cmd/hermesd).
	Binary string
	// Shards is the Walrus server's shard count (default 10: a blob id
	// over mainnet's 1000 costs about a CPU-second, and no fleet test is
	// about ids). Its largest blob bounds the packs: about 1 MiB at 10
	// shards, 142 MiB at 100; brains of more than a pack want 100.
	Shards int
}

// Cluster is a fleet under test: etcd, the devnet world and the nodes.
type Cluster struct {
	// t is the test the cluster's helpers report to (a step's subtest,
	// while it runs); root is the test that owns the cluster's resources.
	t      testing.TB
	root   testing.TB
	opts   Options
	dir    string
	bin    string
	Etcd   *devetcd.Cluster
	Devnet *devnet.Devnet
	etcd   *clientv3.Client
	fleet  string
	prefix string
	rec    *recorder
	writes *writeLog
	names  map[common.Hash]string // namehash → agent
	agents []string
	hook   string
	start  time.Time

	mu     sync.Mutex
	nodes  []*Node
	deaths []Death

	lineageOnce sync.Once
	lineageSvc  *compose.Services
	lineageErr  error
	lineageMu   sync.Mutex
	lineage     map[[2]string][]string
}

// Start brings a fleet up and stops it with the test. Each node's
// output goes to a log file in the test's directory, printed when the
// test fails.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Nodes == 0 && !o.NoNodes {
		o.Nodes = 3
	}
	if o.Agents == 0 {
		o.Agents = 3
	}
	if o.L2Every == 0 {
		o.L2Every = 3
	}
	if o.BrainBytes == 0 {
		o.BrainBytes = 4 << 10
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 3 * time.Second
	}
	if o.EtcdMembers == 0 {
		o.EtcdMembers = 3
	}
	// At most maxFleets fleets run at once, whatever -parallel says: each
	// is three etcd members, the chains and several hermesd processes, and
	// a machine of 2 cores running more would starve the nodes' lease
	// renewals and fence them for no fault of theirs.
	fleets <- struct{}{}
	t.Cleanup(func() { <-fleets })
	c := &Cluster{t: t, root: t, opts: o, dir: t.TempDir(), writes: newWriteLog(), names: map[common.Hash]string{}, lineage: map[[2]string][]string{}}
	c.bin = o.Binary
	if c.bin == "" {
		c.bin = Binary(t)
	}
	var err error
	c.Etcd, err = devetcd.Start(devetcd.Options{Dir: filepath.Join(c.dir, "etcd"), Members: o.EtcdMembers, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Etcd.Close() })
	c.etcd, err = c.Etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.etcd.Close() })
	const fleetName = "fleettest"
	c.fleet, c.prefix = fleetName, Prefix(fleetName)
	c.rec = startRecorder(c.etcd, c.prefix)
	t.Cleanup(c.rec.close)

	c.hook = filepath.Join(c.dir, "hook.sh")
	if err := os.WriteFile(c.hook, []byte(hookScript), 0o755); err != nil {
		t.Fatal(err)
	}
	var agents []devnet.Agent
	l2 := false
	for i := range o.Agents {
		id := fmt.Sprintf("agent-%03d", i+1)
		a := devnet.Agent{ID: id, ENSName: id + ".hermes.eth", SeedDir: filepath.Join(c.dir, "seeds", id)}
		if o.L2Every > 0 && (i+1)%o.L2Every == 0 {
			a.ENSName, a.OnL2, l2 = id+"."+devnet.DefaultL2Parent, true, true
		}
		if err := writeSeed(a.SeedDir, id, o.BrainBytes); err != nil {
			t.Fatal(err)
		}
		c.names[devchain.NameHash(a.ENSName)] = id
		c.agents = append(c.agents, id)
		agents = append(agents, a)
	}
	dopts := devnet.Options{
		Dir:             filepath.Join(c.dir, "world"),
		Agents:          agents,
		Quiet:           50 * time.Millisecond,
		MaxLag:          500 * time.Millisecond,
		PointerInterval: o.PointerInterval,
		Shards:          cmp.Or(o.Shards, 10),
		Cluster: devnet.ClusterOptions{
			Endpoints:      c.Etcd.Endpoints(),
			Fleet:          fleetName,
			LeaseTTL:       o.LeaseTTL,
			HandoffTimeout: o.HandoffTimeout,
		},
	}
	if l2 {
		dopts.L2 = &devnet.L2Options{}
	}
	c.Devnet, err = devnet.Start(t.Context(), dopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Devnet.Close() })
	c.start = time.Now()
	for range o.Nodes {
		c.AddNode()
	}
	t.Cleanup(func() {
		for _, n := range c.Nodes() {
			n.kill()
		}
		if t.Failed() {
			for _, n := range c.Nodes() {
				n.dumpLog()
			}
		}
	})
	return c
}

// maxFleets bounds the fleets running at once in a test process.
const maxFleets = 2

var fleets = make(chan struct{}, maxFleets)

// hookScript is the nodes' on_acquire and on_release: one line when it
// starts and one when it returns, with the time in nanoseconds, appended
// to the node's hook log (lines this short are appended whole).
const hookScript = `#!/bin/sh
# fleettest hook: LOG EVENT AGENT NODE
echo "$(date +%s%N) $2 start $3 $4" >> "$1"
echo "$(date +%s%N) $2 end $3 $4" >> "$1"
`

// writeSeed writes an agent's seed brain: a system prompt and notes of
// about size bytes, different for every agent.
func writeSeed(dir, id string, size int) error {
	if err := os.MkdirAll(filepath.Join(dir, "memory"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "system.md"), []byte("You are "+id+".\n"), 0o644); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(uint64(len(id)), uint64(hashString(id))))
	b := make([]byte, size)
	for i := range b {
		b[i] = "abcdefghijklmnopqrstuvwxyz \n"[r.IntN(28)]
	}
	return os.WriteFile(filepath.Join(dir, "memory", "notes.md"), b, 0o644)
}

func hashString(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds cmd/hermesd once per test process (with the toolchain and
// environment running the tests) and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fleettest-bin-")
		if err != nil {
			buildErr = err
			return
		}
		goTool := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		if _, err := os.Stat(goTool); os.Getenv("GOROOT") == "" || err != nil {
			if goTool, err = exec.LookPath("go"); err != nil {
				buildErr = err
				return
			}
		}
		buildPath = filepath.Join(dir, "hermesd")
		if out, err := exec.Command(goTool, "build", "-o", buildPath, "github.com/hermesd/hermesd/cmd/hermesd").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// Agents are the fleet's agents, in order.
func (c *Cluster) Agents() []string { return slices.Clone(c.agents) }

// Nodes are the nodes added so far, node-1 first.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes)
}

// Node is node-k (1-based).
func (c *Cluster) Node(k int) *Node {
	c.t.Helper()
	ns := c.Nodes()
	if k < 1 || k > len(ns) {
		c.t.Fatalf("no node-%d (%d nodes)", k, len(ns))
	}
	return ns[k-1]
}

// Node is one hermesd process of the fleet with its proxies.
type Node struct {
	c      *Cluster
	Index  int
	Name   string
	Config devnet.Node
	// L1 and L2 are the proxies of its chains (nil without an L2).
	L1, L2 *ChainProxy
	// Walrus is its Walrus proxy's URL.
	Walrus  string
	hookLog string
	logPath string

	mu      sync.Mutex
	proc    *exec.Cmd
	done    chan struct{}
	started time.Time // the process's start
}

// AddNode writes the configuration of the next node and starts it.
func (c *Cluster) AddNode() *Node {
	c.t.Helper()
	c.mu.Lock()
	k := len(c.nodes) + 1
	c.mu.Unlock()
	name := devnet.NodeName(k)
	n := &Node{c: c, Index: k, Name: name, hookLog: filepath.Join(c.dir, name+".hooks"), logPath: filepath.Join(c.dir, name+".log")}
	dn := c.Devnet
	no := devnet.NodeOptions{Index: k, Dir: filepath.Join(c.dir, name), Path: filepath.Join(c.dir, name+".yml")}
	no.Walrus = walrusProxy(c.root, dn.Walrus.URL(), name, c.writes)
	n.Walrus = no.Walrus
	n.L1 = chainProxy(c.root, dn.Chain.URL(), name, L1Tx, c.writes)
	no.RPC = n.L1.URL
	if dn.L2 != nil {
		n.L2 = chainProxy(c.root, dn.L2.RPC(), name, L2Tx, c.writes)
		no.L2RPC = n.L2.URL
	}
	http := freeAddr(c.t)
	no.HTTP = &http
	no.Hooks = &devnet.Hooks{
		OnAcquire: []string{"/bin/sh", c.hook, n.hookLog, "acquire", "{agent}", "{node}"},
		OnRelease: []string{"/bin/sh", c.hook, n.hookLog, "release", "{agent}", "{node}"},
	}
	cfg, err := dn.WriteNodeConfig(no)
	if err != nil {
		c.t.Fatal(err)
	}
	n.Config = cfg
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	n.Start()
	return n
}

// freeAddr is a 127.0.0.1 address that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Start runs the node's hermesd (again, after a stop or a kill).
func (n *Node) Start() {
	n.c.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		n.c.t.Fatalf("%s is running", n.Name)
	}
	out, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.c.t.Fatal(err)
	}
	fmt.Fprintf(out, "=== %s: hermesd run -config %s\n", time.Now().Format(time.RFC3339Nano), n.Config.ConfigPath)
	cmd := exec.Command(n.c.bin, "run", "-config", n.Config.ConfigPath)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERMESD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HERMESD_LOG_LEVEL=info")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		n.c.t.Fatal(err)
	}
	done := make(chan struct{})
	n.proc, n.done, n.started = cmd, done, time.Now()
	go func() {
		cmd.Wait()
		out.Close()
		n.c.noteDeath(n.Name)
		n.mu.Lock()
		if n.proc == cmd {
			n.proc = nil
		}
		n.mu.Unlock()
		close(done)
	}()
}

// Running reports whether the node's process runs (stopped or not).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil
}

func (n *Node) signal(sig syscall.Signal) (done chan struct{}) {
	n.c.t.Helper()
	n.mu.Lock()
	p, done := n.proc, n.done
	n.mu.Unlock()
	if p == nil {
		n.c.t.Fatalf("%s is not running", n.Name)
	}
	if err := p.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		n.c.t.Fatalf("%s: %v: %v", n.Name, sig, err)
	}
	return done
}

// Kill9 kills the node's process (SIGKILL) and waits until it is gone.
func (n *Node) Kill9() {
	n.c.t.Helper()
	n.waitExit(n.signal(syscall.SIGKILL), time.Minute)
}

// Stop stops the node as an operator would (SIGTERM: it hands its agents
// off) and waits until it exits.
func (n *Node) Stop() {
	n.c.t.Helper()
	n.waitExit(n.signal(syscall.SIGTERM), 5*time.Minute)
}

// Pause freezes the node (SIGSTOP); Resume thaws it (SIGCONT).
func (n *Node) Pause()  { n.c.t.Helper(); n.signal(syscall.SIGSTOP) }
func (n *Node) Resume() { n.c.t.Helper(); n.signal(syscall.SIGCONT) }

func (n *Node) waitExit(done chan struct{}, limit time.Duration) {
	n.c.t.Helper()
	select {
	case <-done:
	case <-time.After(limit):
		n.c.t.Fatalf("%s still running after %v", n.Name, limit)
	}
}

// kill ends the process without a trace in the run (the test's end).
func (n *Node) kill() {
	n.mu.Lock()
	p, done := n.proc, n.done
	n.mu.Unlock()
	if p != nil {
		p.Process.Signal(syscall.SIGCONT)
		p.Process.Kill()
		<-done
	}
}

// Drain runs `hermesd fleet drain` on the node's configuration (what a
// preStop hook runs: it drains this node and returns once it owns
// nothing) and returns its output.
func (n *Node) Drain() string {
	n.c.t.Helper()
	out, err := exec.Command(n.c.bin, "fleet", "drain", "-config", n.Config.ConfigPath).CombinedOutput()
	if err != nil {
		n.c.t.Fatalf("hermesd fleet drain %s: %v\n%s", n.Name, err, out)
	}
	return string(out)
}

// Ready reports whether the node's /readyz answers 200.
func (n *Node) Ready() bool {
	ok, _ := n.Readiness()
	return ok
}

// Readiness is Ready with what /readyz said (its JSON names each agent's
// reason), or why it could not be asked.
func (n *Node) Readiness() (bool, string) {
	cl := &http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + n.Config.HTTP + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return false, err.Error()
	}
	return resp.StatusCode == http.StatusOK, strings.TrimSpace(string(b))
}

// Brain is the node's brain directory of agent.
func (n *Node) Brain(agent string) string { return filepath.Join(n.Config.BrainRoot, agent) }

// Log is the node's output so far.
func (n *Node) Log() string {
	b, _ := os.ReadFile(n.logPath)
	return string(b)
}

func (n *Node) dumpLog() {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return
	}
	const tail = 48 << 10
	if len(b) > tail {
		b = b[len(b)-tail:]
	}
	n.c.t.Logf("%s output (%s):\n%s", n.Name, n.logPath, b)
}

// Writes counts what the node sent since a moment, by kind (WalrusStore,
// L1Tx, L2Tx).
func (n *Node) Writes(since time.Time) map[string]int { return n.c.writes.count(n.Name, since) }

// HeadWrites counts the fleet-head writes etcd holds from the node since
// a moment.
func (n *Node) HeadWrites(since time.Time) int {
	evs, _ := n.c.rec.snapshot()
	_, _, heads, _, err := replay(n.c.prefix, evs)
	if err != nil {
		n.c.t.Fatal(err)
	}
	k := 0
	for _, h := range heads {
		if h.Node == n.Name && !h.At.Before(since) {
			k++
		}
	}
	return k
}

func (c *Cluster) noteDeath(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deaths = append(c.deaths, Death{Node: node, At: time.Now()})
}

// State is the fleet as etcd's history says it is now.
type State struct {
	Nodes  map[string]int64  // live node → its lease
	Owners map[string]string // agent → owner
	Heads  map[string]Head   // agent → fleet head
	// Tokens are the owner keys' create revisions: an agent whose token
	// did not change did not change owner.
	Tokens map[string]int64
}

// Head is an agent's fleet head.
type Head struct {
	Value, BundleHash, Node string
	Token                   int64
}

// State folds etcd's history seen so far.
func (c *Cluster) State() State {
	c.t.Helper()
	evs, _ := c.rec.snapshot()
	st, err := c.state(evs)
	if err != nil {
		c.t.Fatal(err)
	}
	return st
}

func (c *Cluster) state(evs []Event) (State, error) {
	_, owners, _, fs, err := replay(c.prefix, evs)
	if err != nil {
		return State{}, err
	}
	st := State{Nodes: fs.Nodes, Owners: fs.Owners, Heads: map[string]Head{}, Tokens: map[string]int64{}}
	for a, h := range fs.Heads {
		st.Heads[a] = Head(h)
	}
	for _, o := range owners {
		if o.EndRev == 0 {
			st.Tokens[o.Agent] = o.Token
		}
	}
	return st, nil
}

// WaitState waits until cond holds of the fleet's state (re-checked on
// every etcd event) or limit passes, and returns how long it took.
func (c *Cluster) WaitState(limit time.Duration, what string, cond func(State) bool) time.Duration {
	c.t.Helper()
	start := time.Now()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		evs, changed := c.rec.snapshot()
		st, err := c.state(evs)
		if err != nil {
			c.t.Fatal(err)
		}
		if cond(st) {
			return time.Since(start)
		}
		select {
		case <-changed:
		case <-deadline.C:
			c.t.Fatalf("timed out after %v waiting for %s; owners per node: %v", limit, what, c.perNode(st))
		}
	}
}

// WaitOwned waits until every agent is owned by a live node among nodes
// (any live node when none is named), and returns how long it took.
func (c *Cluster) WaitOwned(limit time.Duration, nodes ...string) time.Duration {
	c.t.Helper()
	return c.WaitState(limit, "every agent owned", func(st State) bool {
		for _, a := range c.agents {
			o, ok := st.Owners[a]
			if _, live := st.Nodes[o]; !ok || !live || (len(nodes) > 0 && !slices.Contains(nodes, o)) {
				return false
			}
		}
		return true
	})
}

func (c *Cluster) perNode(st State) map[string]int {
	out := map[string]int{}
	for _, o := range st.Owners {
		out[o]++
	}
	return out
}

// PerNode counts the agents each node owns now.
func (c *Cluster) PerNode() map[string]int { return c.perNode(c.State()) }

// Owner is the node that owns agent now (nil when none does).
func (c *Cluster) Owner(agent string) *Node {
	name := c.State().Owners[agent]
	for _, n := range c.Nodes() {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WaitRunning waits until each agent runs on its owner: owning an agent
// (its owner key) comes first, and the brain is in place only once its
// owner has opened it, which the owner's on_acquire hook says (it runs
// after the open, as an operator's supervisor would start the runtime).
func (c *Cluster) WaitRunning(limit time.Duration, agents ...string) {
	c.t.Helper()
	if len(agents) == 0 {
		agents = c.agents
	}
	c.within(limit, "every agent running on its owner", func() bool {
		st := c.State()
		last := map[string]map[string]HookRun{} // node → agent → its last hook run there
		for _, a := range agents {
			o := st.Owners[a]
			if o == "" {
				return false
			}
			if last[o] == nil {
				n := c.node(o)
				if n == nil {
					return false
				}
				runs, err := readHooks(n.hookLog, n.Name)
				if err != nil {
					c.t.Fatal(err)
				}
				n.mu.Lock()
				since := n.started
				n.mu.Unlock()
				last[o] = map[string]HookRun{}
				for _, r := range runs {
					if r.Start.Before(since) {
						continue // a previous process's (a kill -9 leaves no on_release)
					}
					if prev, ok := last[o][r.Agent]; !ok || !r.Start.Before(prev.Start) {
						last[o][r.Agent] = r
					}
				}
			}
			if r := last[o][a]; r.Event != "acquire" || r.End.IsZero() {
				return false
			}
		}
		return true
	})
}

// WaitSettled waits until the fleet is at rest: every agent owned by the
// node the assignment gives it, no hand-off in flight, every agent
// running on its owner. A fault's effect on ownership is measured from
// there (a node that rejoined takes its share back by hand-offs for a
// while after).
func (c *Cluster) WaitSettled(limit time.Duration) {
	c.t.Helper()
	c.within(limit, "the fleet settled (every agent on its desired node, no hand-off in flight)", func() bool {
		ctx, cancel := context.WithTimeout(c.t.Context(), 10*time.Second)
		defer cancel()
		st, err := fleet.Read(ctx, c.etcd, c.fleet)
		if err != nil {
			return false
		}
		for _, a := range st.Agents {
			if a.Owner == "" || a.Owner != a.Desired || a.Handoff != nil {
				return false
			}
		}
		return len(st.Agents) >= len(c.agents)
	})
	c.WaitRunning(limit)
}

// within polls cond until it holds or limit passes: for what no etcd
// event announces (a hook log, the nodes' view of the assignment).
func (c *Cluster) within(limit time.Duration, what string, cond func() bool) {
	c.t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			c.t.Fatalf("timed out after %v waiting for %s", limit, what)
		case <-tick.C:
		}
	}
}

// node is the node named name (nil: none).
func (c *Cluster) node(name string) *Node {
	for _, n := range c.Nodes() {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Edit appends text to a file of the agent's brain on its owner and
// returns the brain's new bundle hash.
func (c *Cluster) Edit(agent, rel, text string) string {
	c.t.Helper()
	n := c.Owner(agent)
	if n == nil {
		c.t.Fatalf("%s has no owner", agent)
	}
	p := filepath.Join(n.Brain(agent), filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		c.t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		c.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		c.t.Fatal(err)
	}
	return BundleHash(c.t, n.Brain(agent))
}

// BundleHash is the bundle hash of a directory.
func BundleHash(t testing.TB, dir string) string {
	t.Helper()
	res, err := hash.Dir(context.Background(), dir, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Digest.String()
}

// WaitHead waits until agent's fleet head names bundle hash h.
func (c *Cluster) WaitHead(agent, h string, limit time.Duration) Head {
	c.t.Helper()
	var head Head
	c.WaitState(limit, agent+"'s fleet head at "+h, func(st State) bool {
		head = st.Heads[agent]
		return head.BundleHash == h
	})
	return head
}

// History reads the whole run back for the checker.
func (c *Cluster) History() *History {
	c.t.Helper()
	ctx := c.t.Context()
	// A mark written now: once the recorder has seen it, it holds etcd's
	// whole history of the fleet up to this moment.
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	r, err := c.etcd.Put(pctx, c.prefix+"fleettest/mark", time.Now().Format(time.RFC3339Nano))
	cancel()
	if err != nil {
		c.t.Fatalf("etcd: %v", err)
	}
	c.WaitState(time.Minute, "the recorder to catch up with etcd", func(State) bool { return c.lastRev() >= r.Header.Revision })
	evs, _ := c.rec.snapshot()
	h := &History{Slack: 250 * time.Millisecond, End: time.Now(), Lineage: c.lineageOf}
	if h.Leases, h.Owners, h.Heads, _, err = replay(c.prefix, evs); err != nil {
		c.t.Fatal(err)
	}
	var txs map[string]sentTx
	h.Writes, txs = c.writes.snapshot()
	recs, err := recordHistory(ctx, c.Devnet.Chain, "l1", c.names, txs)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.Devnet.L2 != nil {
		l2, err := recordHistory(ctx, c.Devnet.L2.Chain, "l2", c.names, txs)
		if err != nil {
			c.t.Fatal(err)
		}
		recs = append(recs, l2...)
	}
	// A transaction sent after the log was read may be mined before the
	// chains are: the proxy logged it before passing it on, so the log
	// read again has it.
	_, txs = c.writes.snapshot()
	for i, r := range recs {
		if s, ok := txs[r.TxHash]; ok && r.Node == "" {
			recs[i].Node, recs[i].Sent = s.node, s.at
		}
	}
	h.Records = recs
	for _, n := range c.Nodes() {
		runs, err := readHooks(n.hookLog, n.Name)
		if err != nil {
			c.t.Fatal(err)
		}
		h.Hooks = append(h.Hooks, runs...)
	}
	c.mu.Lock()
	h.Deaths = slices.Clone(c.deaths)
	c.mu.Unlock()
	return h
}

// lastRev is the newest revision the recorder holds (0: none).
func (c *Cluster) lastRev() int64 {
	evs, _ := c.rec.snapshot()
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Rev
}

// Check reads the run back and fails the test on every violation.
func (c *Cluster) Check() *History {
	c.t.Helper()
	h := c.History()
	if vs := h.Check(); len(vs) > 0 {
		c.t.Errorf("the fleet's history breaks %d rule(s):\n%s", len(vs), Report(vs))
	}
	return h
}

// lineageOf is an agent's snapshot value and its ancestors, read from
// Walrus with the fleet's key (memoized: each value's parent is read
// once).
func (c *Cluster) lineageOf(agent, value string) ([]string, error) {
	c.lineageOnce.Do(func() {
		c.lineageSvc, c.lineageErr = compose.Build(context.Background(), c.Devnet.Config, nil, compose.Options{ReadOnly: true})
		if c.lineageErr == nil {
			c.root.Cleanup(c.lineageSvc.Close)
		}
	})
	if c.lineageErr != nil {
		return nil, c.lineageErr
	}
	var out []string
	for v := value; v != "" && len(out) < 100_000; {
		c.lineageMu.Lock()
		rest, ok := c.lineage[[2]string{agent, v}]
		c.lineageMu.Unlock()
		if ok {
			return append(out, rest...), nil
		}
		ac, err := c.Devnet.Config.Agent(agent)
		if err != nil {
			return nil, err
		}
		hist, err := c.lineageSvc.Pipeline(ac, c.root.TempDir(), nil).History(c.root.Context(), v, 2)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		next := ""
		if len(hist) > 1 {
			next = hist[1].BlobID
		}
		v = next
	}
	c.lineageMu.Lock()
	for i := range out {
		c.lineage[[2]string{agent, out[i]}] = slices.Clone(out[i:])
	}
	c.lineageMu.Unlock()
	return out, nil
}

// readHooks parses a node's hook log: "NANOS EVENT start|end AGENT NODE"
// lines; an end closes the earliest open run of the same event and agent.
func readHooks(path, node string) ([]HookRun, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []HookRun
	open := map[[2]string][]int{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) != 5 {
			return nil, fmt.Errorf("%s: malformed hook line %q", path, s.Text())
		}
		ns, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %v", path, s.Text(), err)
		}
		at, k := time.Unix(0, ns), [2]string{fs[1], fs[3]}
		switch fs[2] {
		case "start":
			out = append(out, HookRun{Node: node, Agent: fs[3], Event: fs[1], Start: at})
			open[k] = append(open[k], len(out)-1)
		case "end":
			if q := open[k]; len(q) > 0 {
				out[q[0]].End = at
				open[k] = q[1:]
			}
		}
	}
	return out, s.Err()
}

// Tree is what a brain holds that its bundle hash covers: every regular
// file but the top-level lock and receipts export, path → content.
func Tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() || hash.Excluded(rel) {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: a %v in a brain", rel, d.Type())
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Diff lists how got differs from want (nil when they are the same).
func Diff(want, got map[string]string) []string {
	var out []string
	for _, p := range sortedKeys(want) {
		g, ok := got[p]
		switch {
		case !ok:
			out = append(out, p+": missing")
		case g != want[p]:
			out = append(out, fmt.Sprintf("%s: %d bytes, want %d", p, len(g), len(want[p])))
		}
	}
	for _, p := range sortedKeys(got) {
		if _, ok := want[p]; !ok {
			out = append(out, p+": unexpected")
		}
	}
	return out
}

// EtcdRequests counts the requests etcd's members have received so far in
// this process, by gRPC service (KV, Lease, Watch, …): every message a
// client sent, a lease keep-alive on a stream included. The members of
// every cluster in the process count together, so a figure is a
// difference taken while one cluster runs.
func EtcdRequests() (map[string]float64, error) {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_msg_received_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			svc := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "grpc_service" {
					svc = strings.TrimPrefix(l.GetValue(), "etcdserverpb.")
				}
			}
			out[svc] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}
