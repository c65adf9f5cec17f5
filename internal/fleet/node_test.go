package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermesd/hermesd/internal/wait"
)

const testTTL = 2 * time.Second

// host records what a node asks of it; Open checks that the node owns
// the agent in etcd at that moment.
type host struct {
	t      *testing.T
	cli    *clientv3.Client
	prefix string
	node   string

	mu        sync.Mutex
	open      map[string]Ownership
	events    []string
	failFinal error
	finals    int
	heads     func(id string) *Head // what Final writes (nil: nothing)
	n         *Node
	// hold, when set, keeps every Open waiting until it is closed.
	hold chan struct{}
	// failOpen, when set, fails every Open; attempts are their moments.
	failOpen error
	attempts []time.Time
}

func (h *host) Open(ctx context.Context, id string, o Ownership) error {
	resp, err := h.cli.Get(ctx, h.prefix+ownersDir+id)
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != o.Token {
		h.t.Errorf("%s opened %s without owning it (token %d, kvs %v)", h.node, id, o.Token, resp.Kvs)
	}
	if h.hold != nil {
		select {
		case <-h.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attempts = append(h.attempts, time.Now())
	if h.failOpen != nil {
		return h.failOpen
	}
	if h.open == nil {
		h.open = map[string]Ownership{}
	}
	h.open[id] = o
	h.events = append(h.events, "open "+id)
	return nil
}

func (h *host) Final(ctx context.Context, id string) error {
	h.mu.Lock()
	err, heads := h.failFinal, h.heads
	h.finals++
	h.events = append(h.events, "final "+id)
	h.mu.Unlock()
	if err != nil {
		return err
	}
	if heads != nil {
		if hd := heads(id); hd != nil {
			return h.n.PutHead(ctx, id, *hd)
		}
	}
	return nil
}

func (h *host) Close(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.open, id)
	h.events = append(h.events, "close "+id)
}

func (h *host) running() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []string
	for id := range h.open {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (h *host) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := 0
	for _, e := range h.events {
		if strings.HasPrefix(e, prefix) {
			c++
		}
	}
	return c
}

func agentList(n int) []Agent {
	out := make([]Agent, n)
	for i := range out {
		out[i] = Agent{ID: fmt.Sprintf("a%03d", i), BrainDir: "/srv/a"}
	}
	return out
}

type testNode struct {
	*Node
	host   *host
	cancel context.CancelFunc
	done   chan struct{}
}

func newNode(t *testing.T, cli *clientv3.Client, name string, agents []Agent) *testNode {
	return newNodeTTL(t, cli, name, agents, testTTL, nil)
}

func newNodeTTL(t *testing.T, cli *clientv3.Client, name string, agents []Agent, ttl time.Duration, obs Observer) *testNode {
	t.Helper()
	h := &host{t: t, cli: cli, prefix: Prefix("test"), node: name}
	n, err := New(Config{Client: cli, Fleet: "test", Node: name, TTL: ttl, HandoffTimeout: 20 * time.Second, Agents: agents, Observer: obs, Log: testLog(t)}, h)
	if err != nil {
		t.Fatal(err)
	}
	h.n = n
	return &testNode{Node: n, host: h}
}

// run runs the node until the test ends (or stop).
func (tn *testNode) run(t *testing.T) *testNode {
	ctx, cancel := context.WithCancel(context.Background())
	tn.cancel, tn.done = cancel, make(chan struct{})
	go func() {
		defer close(tn.done)
		tn.Run(ctx)
	}()
	t.Cleanup(tn.stop)
	return tn
}

func (tn *testNode) stop() {
	if tn.cancel != nil {
		tn.cancel()
		<-tn.done
	}
}

// owners reads every owner key: agent → node.
func owners(t *testing.T, cli *clientv3.Client) map[string]string {
	t.Helper()
	resp, err := cli.Get(context.Background(), Prefix("test")+ownersDir, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		var o Owner
		if err := decode(kv.Value, &o); err != nil {
			t.Fatal(err)
		}
		out[name(Prefix("test"), ownersDir, string(kv.Key))] = o.Node
	}
	return out
}

// TestAcquireIsExclusive: two nodes taking one agent at once: exactly
// one owns it; the other is told ErrTaken and runs nothing.
func TestAcquireIsExclusive(t *testing.T) {
	c := startEtcd(t, 1)
	cli := c.Client(t)
	ag := agentList(1)
	a, b := newNode(t, cli, "a", ag), newNode(t, cli, "b", ag)
	ctx := context.Background()
	for _, n := range []*testNode{a, b} {
		if err := n.Register(ctx); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, n := range []*testNode{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.Acquire(ctx, "a000")
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrTaken):
			t.Errorf("node %d: %v", i, err)
		}
	}
	if won != 1 || len(a.host.running())+len(b.host.running()) != 1 {
		t.Fatalf("winners %d; running on a %v, b %v", won, a.host.running(), b.host.running())
	}
	if got := owners(t, cli); len(got) != 1 {
		t.Errorf("owner keys: %v", got)
	}
}

// TestOwnershipInBulk: a node takes the owner keys of all its agents in
// a few transactions before it opens any: with every Open held back,
// all 300 are owned, under one lease, while at most Concurrency opens
// are in flight; released, every agent opens.
func TestOwnershipInBulk(t *testing.T) {
	c := startEtcd(t, 1)
	cli := c.Client(t)
	const agents = 300
	n := newNode(t, cli, "a", agentList(agents))
	n.host.hold = make(chan struct{})
	rev := func() int64 {
		resp, err := cli.Get(context.Background(), "x")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	before := rev()
	n.run(t)
	wait.For(t, "300 agents owned", func() bool { return len(tokens(t, cli)) == agents })
	if got := n.host.count("open"); got != 0 {
		t.Fatalf("%d agents opened through a held Open", got)
	}
	// One revision per transaction: the registration, then the owner
	// keys in batches of takeBatch.
	revs := map[int64]bool{}
	for _, r := range tokens(t, cli) {
		revs[r] = true
	}
	if want := (agents + takeBatch - 1) / takeBatch; len(revs) != want {
		t.Errorf("owner keys created at %d revisions, want %d (batches of %d)", len(revs), want, takeBatch)
	}
	if d := rev() - before; d > int64(len(revs))+1 {
		t.Errorf("%d revisions for %d transactions of owner keys and a registration", d, len(revs))
	}
	close(n.host.hold)
	wait.For(t, "300 agents open", func() bool { return len(n.host.running()) == agents })
}

// TestFleetHeadOnlyByOwner: the owner writes the fleet head; after the
// agent is handed off, neither the old owner nor anyone else can, and
// the taker is given the head the giver wrote last.
func TestFleetHeadOnlyByOwner(t *testing.T) {
	c := startEtcd(t, 1)
	cli := c.Client(t)
	ag := agentList(1)
	a, b := newNode(t, cli, "a", ag), newNode(t, cli, "b", ag)
	ctx := context.Background()
	for _, n := range []*testNode{a, b} {
		if err := n.Register(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.PutHead(ctx, "a000", Head{Value: "x"}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("a non-owner wrote a head: %v", err)
	}
	if err := a.Acquire(ctx, "a000"); err != nil {
		t.Fatal(err)
	}
	if err := a.PutHead(ctx, "a000", Head{Value: "v1", BundleHash: "0x01", Version: 1}); err != nil {
		t.Fatal(err)
	}
	a.host.heads = func(string) *Head { return &Head{Value: "v2", BundleHash: "0x02", Version: 2} }
	if err := b.Acquire(ctx, "a000"); !errors.Is(err, ErrTaken) {
		t.Fatalf("b took an owned agent: %v", err)
	}
	if err := a.HandOff(ctx, "a000", "b"); err != nil {
		t.Fatal(err)
	}
	if err := a.PutHead(ctx, "a000", Head{Value: "late"}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("the giver wrote a head after the hand-off: %v", err)
	}
	if err := b.Acquire(ctx, "a000"); err != nil {
		t.Fatal(err)
	}
	o := b.host.open["a000"]
	if o.Head == nil || o.Head.Value != "v2" || o.Head.Node != "a" || o.Resumed {
		t.Fatalf("the taker was given %+v", o)
	}
	if got := a.host.events; !slices.Equal(got, []string{"open a000", "final a000", "close a000"}) {
		t.Errorf("giver's steps: %v", got)
	}
}

// TestHooksOrder: in a hand-off the giver's on_release returns before
// the taker's on_acquire starts; each gets the agent's id and brain
// directory.
func TestHooksOrder(t *testing.T) {
	dir := t.TempDir()
	logf := filepath.Join(dir, "hooks.log")
	script := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$1 $HERMESD_EVENT $HERMESD_AGENT $HERMESD_BRAIN_DIR $2\" >> "+logf+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := startEtcd(t, 1)
	cli := c.Client(t)
	ag := []Agent{{ID: "x", BrainDir: "/srv/x", Hooks: Hooks{
		OnAcquire: []string{script, "start", "{node}"}, OnRelease: []string{script, "stop", "{node}"}, Timeout: 10 * time.Second}}}
	a, b := newNode(t, cli, "a", ag), newNode(t, cli, "b", ag)
	ctx := context.Background()
	for _, n := range []*testNode{a, b} {
		if err := n.Register(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := a.HandOff(ctx, "x", "b"); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(logf)
	if err != nil {
		t.Fatal(err)
	}
	want := "start acquire x /srv/x a\nstop release x /srv/x a\nstart acquire x /srv/x b\n"
	if string(got) != want {
		t.Errorf("hooks ran:\n%s\nwant:\n%s", got, want)
	}
}

// TestHandOffFailureKeepsTheAgent: a last snapshot that fails abandons
// the hand-off: the agent stays owned and running here, nothing is
// released.
func TestHandOffFailureKeepsTheAgent(t *testing.T) {
	c := startEtcd(t, 1)
	cli := c.Client(t)
	a := newNode(t, cli, "a", agentList(1))
	ctx := context.Background()
	if err := a.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(ctx, "a000"); err != nil {
		t.Fatal(err)
	}
	a.host.failFinal = errors.New("walrus is down")
	if err := a.HandOff(ctx, "a000", "b"); err == nil {
		t.Fatal("hand-off succeeded")
	}
	if got := owners(t, cli); got["a000"] != "a" || !a.Owns("a000") || len(a.host.running()) != 1 {
		t.Fatalf("after a failed hand-off: owners %v, running %v", got, a.host.running())
	}
}

// TestOpenFailureBacksOff: acquiring → unowned when the take-over fails
// (design §12.2): the owner key is deleted and the next attempt waits
// for the backoff (at least half its 1 s minimum, TTL/2). The backoff is
// set before the key goes: a reconcile in between took the agent again
// at once (two attempts 10 ms apart, seen in a fleet run).
func TestOpenFailureBacksOff(t *testing.T) {
	c := startEtcd(t, 1)
	cli := c.Client(t)
	a := newNode(t, cli, "a", agentList(1))
	a.host.failOpen = errors.New("the aggregator served other bytes")
	a.run(t)
	wait.Within(t, time.Minute, "two attempts to open a000", func() bool {
		a.host.mu.Lock()
		defer a.host.mu.Unlock()
		return len(a.host.attempts) >= 2
	})
	a.host.mu.Lock()
	gap := a.host.attempts[1].Sub(a.host.attempts[0])
	a.host.mu.Unlock()
	if min := testTTL / 4; gap < min {
		t.Errorf("the second attempt came %v after the first failed; the backoff is at least %v", gap, min)
	}
	if a.Owns("a000") || len(a.host.running()) != 0 {
		t.Errorf("a failed open left the agent owned here (running %v)", a.host.running())
	}
	t.Logf("second attempt %v after the first", gap.Round(time.Millisecond))
}

// TestFleetBalancesAndMoves: three running nodes own every one of 60
// agents exactly once, balanced; a fourth joining takes its share by
// hand-off; one leaving hands its agents to the others; nothing is ever
// open on two nodes.
func TestFleetBalancesAndMoves(t *testing.T) {
	c := startEtcd(t, 1)
	ag := agentList(60)
	var nodes []*testNode
	for i := range 3 {
		nodes = append(nodes, newNode(t, c.Client(t), fmt.Sprintf("n%d", i), ag).run(t))
	}
	cli := c.Client(t)
	var nmu sync.Mutex
	list := func() []*testNode {
		nmu.Lock()
		defer nmu.Unlock()
		return slices.Clone(nodes)
	}
	stop := watchDoubles(t, list)
	defer stop()
	settled := func(want int) func() bool {
		return func() bool {
			o := owners(t, cli)
			if len(o) != len(ag) {
				return false
			}
			total := 0
			for _, n := range list() {
				r := len(n.host.running())
				if r == 0 && n.cancel != nil && n.done != nil {
					select {
					case <-n.done:
						continue
					default:
					}
				}
				total += r
			}
			return total == len(ag) && balanced(o, want)
		}
	}
	wait.For(t, "60 agents owned once by 3 nodes, balanced", settled(3))
	n3 := newNode(t, c.Client(t), "n3", ag)
	nmu.Lock()
	nodes = append(nodes, n3)
	nmu.Unlock()
	n3.run(t)
	wait.For(t, "the 4th node's share handed to it", settled(4))
	if nodes[3].host.count("open") < 10 {
		t.Errorf("the new node opened %d agents", nodes[3].host.count("open"))
	}
	// n0 leaves cleanly.
	if err := nodes[0].Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	nodes[0].stop()
	wait.For(t, "n0's agents on the 3 others", settled(3))
	if o := owners(t, cli); slices.Contains(mapValues(o), "n0") {
		t.Errorf("n0 still owns agents after leaving")
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// balanced: the owners spread over want nodes with max/min ≤ 1.5.
func balanced(o map[string]string, want int) bool {
	l := map[string]int{}
	for _, n := range o {
		l[n]++
	}
	if len(l) != want {
		return false
	}
	lo, hi := 1<<30, 0
	for _, c := range l {
		lo, hi = min(lo, c), max(hi, c)
	}
	return float64(hi) <= 1.5*float64(lo)
}

// watchDoubles fails the test if an agent is ever open on two nodes.
func watchDoubles(t *testing.T, nodes func() []*testNode) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			seen := map[string]string{}
			for _, n := range nodes() {
				for _, id := range n.host.running() {
					if other, ok := seen[id]; ok {
						t.Errorf("agent %s open on %s and %s", id, other, n.Name())
						return
					}
					seen[id] = n.Name()
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// testLog logs to the test's output with -v (HERMESD_TEST_LOG=1).
func testLog(t *testing.T) *slog.Logger {
	if os.Getenv("HERMESD_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
}
