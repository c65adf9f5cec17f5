package ens

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/devchain"
)

// A records client writes where a record lives (docs/design.md §7.2): a
// contract with the PublicResolver's setText/text ABI named by address,
// e.g. an L2 resolver, with no registry walk and no name resolution. Its
// compare-and-set reads the record from that contract.

func newRecordsClient(t testing.TB, chain *devchain.Chain, records common.Address, key *ecdsa.PrivateKey) *Client {
	t.Helper()
	c, err := New(context.Background(), Config{
		RPCURL:       chain.URL(),
		ChainID:      chain.ChainID().Uint64(),
		Records:      records,
		Signer:       NewSigner(key),
		TxTimeout:    30 * time.Second,
		PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestRecordsClientWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "scout.l2.eth", "other.l2.eth")
	ctx := t.Context()
	rc := newRecordsClient(t, e.chain, e.chain.ResolverAddress(), agentKey)

	// Nothing else is read: a records client knows no registry.
	if _, err := rc.Owner(ctx, "scout.l2.eth"); !errors.Is(err, ErrRecordsClient) {
		t.Fatalf("Owner on a records client: %v, want ErrRecordsClient", err)
	}

	var got []UpdateResult
	err := rc.WriteBatches(ctx, []Update{
		{Name: "scout.l2.eth", Value: blobID(1)},
		{Name: "other.l2.eth", Value: blobID(2)},
	}, func(r UpdateResult) { got = append(got, r) })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d results", len(got))
	}
	for _, r := range got {
		if r.Outcome != Published || r.BatchSize != 2 || r.TxHash != got[0].TxHash {
			t.Fatalf("%+v: want both published in one multicall", r)
		}
		if r.ChainID != e.chain.ChainID().Uint64() || r.EffectiveGasPrice == nil || r.EffectiveGasPrice.Sign() <= 0 || r.TxGasUsed == 0 {
			t.Errorf("%s: receipt not reported: chain %d, price %v, gas %d", r.Update.Name, r.ChainID, r.EffectiveGasPrice, r.TxGasUsed)
		}
	}
	res, err := rc.Resolve(ctx, "scout.l2.eth")
	if err != nil || res.Value != blobID(1) || res.Via != PathRecords || res.Resolver != e.chain.ResolverAddress() {
		t.Fatalf("Resolve = %+v, %v", res, err)
	}

	// The compare-and-set is against the records contract.
	_, err = rc.Write(ctx, "scout.l2.eth", blobID(3), blobID(9))
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Actual != blobID(1) {
		t.Fatalf("a wrong expected value: %v, want a conflict with %q", err, blobID(1))
	}
	r, err := rc.Write(ctx, "scout.l2.eth", blobID(1), "")
	if err != nil || !r.Unchanged {
		t.Fatalf("the value it holds: %+v, %v; want unchanged", r, err)
	}
	r, err = rc.Write(ctx, "scout.l2.eth", blobID(3), blobID(1))
	if err != nil || r.ChainID != e.chain.ChainID().Uint64() {
		t.Fatalf("update: %+v, %v", r, err)
	}

	// Who may write is the contract's own rule: decided by a simulated
	// setText, nothing sent.
	intruder := newRecordsClient(t, e.chain, e.chain.ResolverAddress(), intruderKey)
	before := e.nonce(t, intruderKey)
	if _, err := intruder.Write(ctx, "scout.l2.eth", blobID(4), blobID(3)); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("another key: %v, want ErrNotAuthorized", err)
	}
	// A name the chain's registry does not know is not writable either.
	if _, err := rc.Write(ctx, "nobody.l2.eth", blobID(4), ""); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("an unregistered name: %v, want ErrNotAuthorized", err)
	}
	if after := e.nonce(t, intruderKey); after != before {
		t.Errorf("%d transactions sent for refused writes", after-before)
	}
}

// A records contract without multicall gets one transaction per update.
func TestRecordsClientWithoutMulticall(t *testing.T) {
	t.Parallel()
	needCCIPArtifacts(t)
	e := newEnv(t)
	ctx := t.Context()
	wild, err := e.chain.DeployWildcardResolver(ctx) // setText/text, owner-only, no multicall
	if err != nil {
		t.Fatal(err)
	}
	rc := newRecordsClient(t, e.chain, wild, e.chain.DevKey())
	names := []string{"a.l2.eth", "b.l2.eth", "c.l2.eth"}
	ups := make([]Update, len(names))
	for i, n := range names {
		ups[i] = Update{Name: n, Value: blobID(10 + i)}
	}
	if _, err := rc.WriteMany(ctx, ups[:2]); !errors.Is(err, ErrNoMulticall) {
		t.Fatalf("WriteMany of 2 without multicall: %v, want ErrNoMulticall", err)
	}
	txs := map[common.Hash]bool{}
	if err := rc.WriteBatches(ctx, ups, func(r UpdateResult) {
		if r.Outcome != Published || r.BatchSize != 1 {
			t.Errorf("%s: %+v", r.Update.Name, r)
		}
		txs[r.TxHash] = true
	}); err != nil {
		t.Fatal(err)
	}
	if len(txs) != len(names) {
		t.Fatalf("%d transactions for %d updates, want one each", len(txs), len(names))
	}
	for i, n := range names {
		res, err := rc.Resolve(ctx, n)
		if err != nil || res.Value != blobID(10+i) {
			t.Fatalf("%s = %+v, %v", n, res, err)
		}
	}
}

// A records client checks the chain and the contract before anything.
func TestRecordsClientChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	nothing := crypto.CreateAddress(common.HexToAddress("0x0000000000000000000000000000000000000001"), 7)
	rc := newRecordsClient(t, e.chain, nothing, agentKey)
	if _, err := rc.Write(ctx, "x.l2.eth", blobID(1), ""); !errors.Is(err, ErrNoRecords) || !errors.Is(err, ErrNoRegistry) {
		t.Fatalf("no contract at the records address: %v", err)
	}
	c, err := New(ctx, Config{RPCURL: e.chain.URL(), ChainID: 8453, Records: e.chain.ResolverAddress(), Signer: NewSigner(agentKey)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(ctx, "x.l2.eth", blobID(1), ""); !errors.Is(err, ErrWrongChain) {
		t.Fatalf("another chain id: %v, want ErrWrongChain", err)
	}
}

// The L2 layout end to end at this level: the record lives on a second
// chain's PublicResolver, written by a records client; on L1 the parent
// name has ENS's OffchainResolver, whose gateway answers text() from the
// L2 resolver (at its head, or lagging). L1 resolution — what a fresh
// machine does — sees the L2 write through the gateway, and an older value
// while the gateway lags.
func TestL2RecordsThroughGateway(t *testing.T) {
	t.Parallel()
	needCCIPArtifacts(t)
	ctx := t.Context()
	l1 := newEnv(t, "l2.eth")
	const name = "scout.l2.eth"
	l2, err := devchain.Start(ctx, devchain.Config{ChainID: 1338, Fund: []common.Address{agentAddr},
		Names: []devchain.Name{{Name: name, Owner: agentAddr}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l2.Close() })
	recs := &devchain.ChainRecords{Chain: l2.Client(), Resolver: l2.ResolverAddress()}
	gw := httptest.NewServer(&devchain.Gateway{Key: gatewayKey, Answer: recs.Answer})
	t.Cleanup(gw.Close)
	off, err := l1.chain.DeployOffchainResolver(ctx, gw.URL+"/{sender}/{data}.json", crypto.PubkeyToAddress(gatewayKey.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := l1.chain.RegisterWithResolver(ctx, "l2.eth", agentAddr, off); err != nil {
		t.Fatal(err)
	}
	rc := newRecordsClient(t, l2, l2.ResolverAddress(), agentKey)
	l1Before := l1.nonce(t, agentKey)
	if _, err := rc.Write(ctx, name, blobID(1), ""); err != nil {
		t.Fatal(err)
	}
	read := func() Resolution {
		t.Helper()
		res, err := l1.client.Resolve(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := read(); res.Value != blobID(1) || res.Via != PathWildcard || res.Lookups != 1 || res.Resolver != off {
		t.Fatalf("through L1: %+v", res)
	}
	recs.SetLag(1)
	if _, err := rc.Write(ctx, name, blobID(2), blobID(1)); err != nil {
		t.Fatal(err)
	}
	if res := read(); res.Value != blobID(1) {
		t.Fatalf("lagging one block: %q, want the older %q", res.Value, blobID(1))
	}
	recs.SetLag(0)
	if res := read(); res.Value != blobID(2) {
		t.Fatalf("caught up: %q", res.Value)
	}
	if n := l1.nonce(t, agentKey); n != l1Before {
		t.Errorf("the L2 writes sent %d transactions on L1", n-l1Before)
	}
}
