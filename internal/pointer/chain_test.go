package pointer_test

import (
	"sync"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/pointertest"
	"github.com/hermesd/hermesd/internal/state"
)

// On the real devnet chains (an L1 and an L2 with the real ENS contracts,
// ENS's OffchainResolver and a gateway between them): a value written on
// the L2 while the gateway lags costs exactly one L2 transaction, however
// often it is confirmed, and is published once L1 resolution shows it.
// The L2's JSON-RPC runs through a proxy that counts every transaction
// sent.

// stateFile is a pointer.Store in memory.
type stateFile struct {
	mu sync.Mutex
	st state.AgentState
}

func (s *stateFile) Update(fn func(st *state.AgentState) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.st)
	return nil
}

func (s *stateFile) get() *state.AgentState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Clone()
}

// ownValues is a pointer.Lineage of the values the test verified.
type ownValues struct {
	mu  sync.Mutex
	ids []string
}

func (l *ownValues) Knows(v string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range l.ids {
		if id == v {
			return true
		}
	}
	return false
}

func (l *ownValues) Newest() (state.Snapshot, bool) { return state.Snapshot{}, false }

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	if t.After(c.t) {
		c.t = t
	}
	c.mu.Unlock()
}

func TestLaggingGatewayOneL2Transaction(t *testing.T) {
	t.Parallel()
	const name = "scout.l2.hermes.eth"
	dn, err := devnet.Start(t.Context(), devnet.Options{Dir: t.TempDir(), L2: &devnet.L2Options{}, Shards: 100,
		Agents: []devnet.Agent{{ID: "scout", ENSName: name, OnL2: true}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dn.Close() })
	proxy := pointertest.NewChainProxy(t, dn.L2.RPC())
	cfg := *dn.Config
	cfg.ENS.Records = append([]config.RecordsTarget(nil), cfg.ENS.Records...)
	cfg.ENS.Records[0].RPC = proxy.URL
	svc, err := compose.Build(t.Context(), &cfg, nil, compose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)

	clk := &fakeClock{t: time.Now()}
	st, own := &stateFile{}, &ownValues{}
	h := pointer.NewHead(pointer.Config{Agent: "scout", Name: name, Target: devnet.L2RecordsID, VisibilityTimeout: time.Hour,
		ConfirmPoll: 10 * time.Millisecond}, pointer.Deps{Reader: compose.Pointer(svc.Chain),
		AtTarget: compose.Pointer(svc.Records[devnet.L2RecordsID]), Now: clk.now})
	if err := h.Bind(st, own, nil); err != nil {
		t.Fatal(err)
	}
	p := pointer.NewPublisher(pointer.PublisherConfig{Chains: svc.Chains(), Now: clk.now}, []*pointer.Head{h})
	verify := func(v string) {
		own.mu.Lock()
		own.ids = append(own.ids, v)
		own.mu.Unlock()
		if err := h.Verified(state.Snapshot{BlobID: v, CreatedAt: clk.now()}); err != nil {
			t.Fatal(err)
		}
	}
	through := compose.Pointer(svc.Chain)
	l1 := func() string {
		v, _, err := through.Read(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	verify("scout-snapshot-1")
	clk.set(p.Step(t.Context()))
	if s := st.get(); s.Published != "scout-snapshot-1" || s.Pending != nil || proxy.Counts().Sent != 1 {
		t.Fatalf("first publish: %+v, %d L2 transactions", s, proxy.Counts().Sent)
	}

	dn.L2.Records.SetLag(1) // the gateway answers one L2 block behind
	verify("scout-snapshot-2")
	const rounds = 12
	for range rounds {
		clk.set(p.Step(t.Context()))
	}
	s := st.get()
	if s.Pending == nil || s.Pending.Written == nil || s.Pending.Written.Value != "scout-snapshot-2" || s.Pending.Written.Reads < rounds {
		t.Fatalf("while the gateway lags: %+v", s.Pending)
	}
	if n := proxy.Counts().Sent; n != 2 {
		t.Fatalf("%d L2 transactions for two values while the gateway lagged over %d rounds, want 2", n, rounds)
	}
	if got := l1(); got != "scout-snapshot-1" {
		t.Fatalf("L1 shows %q while lagging", got)
	}

	dn.L2.Records.SetLag(0)
	p.Step(t.Context())
	if s := st.get(); s.Pending != nil || s.Published != "scout-snapshot-2" || l1() != "scout-snapshot-2" {
		t.Fatalf("once visible: %+v", s)
	}
	if n := proxy.Counts().Sent; n != 2 {
		t.Fatalf("%d L2 transactions in all, want 2 (one per value)", n)
	}
	t.Logf("one value written on the L2, confirmed by %d reads through L1 while the gateway lagged: 1 transaction", s.Pending.Written.Reads)
}
