package ens

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/hermesd/hermesd/internal/devchain"
)

// collect runs WriteBatches and returns its results by index, failing the
// test unless every update is reported exactly once.
func collect(t testing.TB, c *Client, updates []Update, each func(UpdateResult)) ([]UpdateResult, error) {
	t.Helper()
	got := make([]UpdateResult, len(updates))
	seen := make([]bool, len(updates))
	err := c.WriteBatches(t.Context(), updates, func(r UpdateResult) {
		if r.Index < 0 || r.Index >= len(updates) || seen[r.Index] {
			t.Errorf("result for index %d reported twice or out of range", r.Index)
			return
		}
		seen[r.Index] = true
		got[r.Index] = r
		if each != nil {
			each(r)
		}
	})
	for i, ok := range seen {
		if !ok {
			t.Errorf("no result for update %d (%s)", i, updates[i].Name)
		}
	}
	return got, err
}

// TestWriteBatchesSplitsByGas: 200 first writes do not fit in one
// transaction under the default 1M gas cap. WriteMany says so (not "would
// revert"); WriteBatches publishes them all in several transactions, each
// within the cap, in the order given.
func TestWriteBatchesSplitsByGas(t *testing.T) {
	const n = 200
	names := fleet("w", n)
	e := newEnv(t, names...)
	ctx := t.Context()
	updates := make([]Update, n)
	for i := range updates {
		updates[i] = Update{Name: names[i], Value: blobID(i)}
	}
	before := e.nonce(t, agentKey)
	if _, err := e.client.WriteMany(ctx, updates); !errors.Is(err, ErrGasCap) || errors.Is(err, ErrReverted) {
		t.Fatalf("WriteMany of %d: %v", n, err)
	}
	if e.nonce(t, agentKey) != before {
		t.Fatal("WriteMany sent a transaction it said does not fit")
	}

	begin := time.Now()
	got, err := collect(t, e.client, updates, nil)
	took := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	perTx := map[common.Hash][]int{}
	var order []common.Hash
	for i, r := range got {
		if r.Outcome != Published || r.Err != nil || r.TxHash == (common.Hash{}) || r.TxGasUsed == 0 || r.Update.Name != names[i] {
			t.Fatalf("update %d: %+v", i, r)
		}
		if len(perTx[r.TxHash]) == 0 {
			order = append(order, r.TxHash)
		}
		perTx[r.TxHash] = append(perTx[r.TxHash], i)
	}
	if len(perTx) < 2 {
		t.Fatalf("%d updates in %d transaction(s)", n, len(perTx))
	}
	if sent := e.nonce(t, agentKey) - before; sent != uint64(len(perTx)) {
		t.Fatalf("nonce moved by %d for %d transactions", sent, len(perTx))
	}
	var lastNonce, gas uint64
	for k, h := range order {
		tx, _, err := e.rpc.TransactionByHash(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		rcpt, err := e.rpc.TransactionReceipt(ctx, h)
		if err != nil || rcpt.Status != 1 {
			t.Fatalf("receipt %+v, %v", rcpt, err)
		}
		idx := perTx[h]
		if tx.Gas() > DefaultGasCap || rcpt.GasUsed > DefaultGasCap {
			t.Errorf("tx %d: gas limit %d, used %d, cap %d", k, tx.Gas(), rcpt.GasUsed, DefaultGasCap)
		}
		if len(rcpt.Logs) != len(idx) || got[idx[0]].BatchSize != len(idx) {
			t.Errorf("tx %d: %d logs, batch size %d, %d updates", k, len(rcpt.Logs), got[idx[0]].BatchSize, len(idx))
		}
		// Every update carries the receipt's figures, for the cost ledger.
		for _, i := range idx {
			r := got[i]
			if r.TxGasUsed != rcpt.GasUsed || r.EffectiveGasPrice == nil || r.EffectiveGasPrice.Cmp(rcpt.EffectiveGasPrice) != 0 ||
				r.ChainID != devchain.DefaultChainID {
				t.Fatalf("update %d: gas %d at %v on chain %d; receipt: %d at %v", i, r.TxGasUsed, r.EffectiveGasPrice, r.ChainID,
					rcpt.GasUsed, rcpt.EffectiveGasPrice)
			}
		}
		// In the order given: consecutive indexes, increasing nonces.
		if idx[len(idx)-1]-idx[0] != len(idx)-1 || (k > 0 && tx.Nonce() <= lastNonce) || (k > 0 && idx[0] != perTx[order[k-1]][len(perTx[order[k-1]])-1]+1) {
			t.Errorf("tx %d (nonce %d) carries updates %v", k, tx.Nonce(), idx)
		}
		lastNonce = tx.Nonce()
		gas += rcpt.GasUsed
	}
	t.Logf("%d first writes in %d transactions (%d-%d updates each), %d gas per update, %.0f updates/s",
		n, len(perTx), len(perTx[order[len(order)-1]]), len(perTx[order[0]]), gas/n, n/took.Seconds())
	for i := range names {
		e.mustRead(t, names[i], blobID(i))
	}

	// Again: all unchanged, nothing sent.
	before = e.nonce(t, agentKey)
	got, err = collect(t, e.client, updates, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if r.Outcome != Unchanged || r.Err != nil {
			t.Fatalf("repeat %d: %+v", i, r)
		}
	}
	if e.nonce(t, agentKey) != before {
		t.Fatal("a repeat sent a transaction")
	}
}

// TestWriteBatchesReportsEachUpdate: conflicts (found by the checks, and
// by the re-read before a later batch) carry the actual value; missing,
// invalid, repeated and foreign names are reported; the rest land, a
// second resolver in its own transaction.
func TestWriteBatchesReportsEachUpdate(t *testing.T) {
	names := fleet("r", 12)
	e := newEnv(t, names...)
	ctx := t.Context()
	hotAddr := crypto.PubkeyToAddress(hotKey.PublicKey)
	other, err := e.chain.DeployResolver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.chain.RegisterWithResolver(ctx, "elsewhere.eth", agentAddr, other); err != nil {
		t.Fatal(err)
	}
	if err := e.chain.Register(ctx, "stranger.eth", crypto.PubkeyToAddress(intruderKey.PublicKey)); err != nil {
		t.Fatal(err)
	}
	first := make([]Update, len(names))
	for i, n := range names {
		first[i] = Update{Name: n, Value: blobID(i)}
	}
	if _, err := e.client.WriteMany(ctx, first); err != nil {
		t.Fatal(err)
	}
	// Another key, authorised by the owner, changes three records.
	hot := newClient(t, e.chain, hotKey)
	foreign := map[int]string{2: "foreign-2", 5: "foreign-5", 9: "foreign-9", 7: "foreign-7"}
	for _, i := range []int{2, 5, 9, 7} {
		e.setAuthorisation(t, agentKey, names[i], hotAddr, true)
	}
	for _, i := range []int{2, 5, 9} {
		if _, err := hot.Write(ctx, names[i], foreign[i], blobID(i)); err != nil {
			t.Fatal(err)
		}
	}

	c := newClient(t, e.chain, agentKey)
	c.maxBatch = 4
	var updates []Update
	for i, n := range names {
		u := Update{Name: n, Value: blobID(100 + i), Expected: blobID(i)}
		if i == 11 {
			u.Value = blobID(i) // already there
		}
		updates = append(updates, u)
	}
	updates = append(updates,
		Update{Name: "Elsewhere.eth", Value: "else"},
		Update{Name: "nobody.eth", Value: "x"},
		Update{Name: "a..eth", Value: "x"},
		Update{Name: names[0], Value: "dup"},
		Update{Name: "stranger.eth", Value: "x"},
	)
	before := e.nonce(t, agentKey)
	published := 0
	got, err := collect(t, c, updates, func(r UpdateResult) {
		if r.Outcome != Published {
			return
		}
		// Right after the first transaction, the other key changes a
		// record of a later batch: the re-read before that batch sees it.
		if published++; published == 1 {
			if _, err := hot.Write(ctx, names[7], foreign[7], blobID(7)); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]Outcome{2: Conflict, 5: Conflict, 7: Conflict, 9: Conflict, 11: Unchanged,
		12: Published, 13: NotFound, 14: Invalid, 15: Invalid, 16: NotAuthorized}
	txs := map[common.Hash]bool{}
	for i, r := range got {
		w, ok := want[i]
		if !ok {
			w = Published
		}
		if r.Outcome != w {
			t.Errorf("update %d (%s): %s (%v), want %s", i, r.Update.Name, r.Outcome, r.Err, w)
			continue
		}
		switch w {
		case Conflict:
			var ce *ConflictError
			if r.Actual != foreign[i] || !errors.As(r.Err, &ce) || ce.Actual != foreign[i] {
				t.Errorf("conflict %d: actual %q, err %v", i, r.Actual, r.Err)
			}
			e.mustRead(t, names[i], foreign[i])
		case Published:
			txs[r.TxHash] = true
			e.mustRead(t, r.Update.Name, updates[i].Value)
		case NotFound:
			if !errors.Is(r.Err, ErrNameNotFound) {
				t.Errorf("not found: %v", r.Err)
			}
		case NotAuthorized:
			var na *NotAuthorizedError
			if !errors.As(r.Err, &na) {
				t.Errorf("not authorised: %v", r.Err)
			}
		}
	}
	if got[12].Update.Name != "elsewhere.eth" || got[14].Err == nil || !errors.Is(got[14].Err, ErrInvalidName) || !strings.Contains(got[15].Err.Error(), "twice") {
		t.Errorf("results: %+v / %v / %v", got[12].Update, got[14].Err, got[15].Err)
	}
	// 8 updates on the first resolver in batches of at most 4 (the re-read
	// removes one from the second), and one on the other resolver.
	if len(txs) != 3 || e.nonce(t, agentKey)-before != 3 {
		t.Errorf("%d transactions, nonce +%d; want 3", len(txs), e.nonce(t, agentKey)-before)
	}
}

// TestWriteBatchesFailureDoesNotStopTheNext: a batch that reverts on chain
// and an update too large for the gas cap fail alone; the batches after
// them land, with the nonces right.
func TestWriteBatchesFailureDoesNotStopTheNext(t *testing.T) {
	names := fleet("f", 6)
	e := newEnv(t, names...)
	hot := newClient(t, e.chain, hotKey)
	for _, n := range names {
		e.setAuthorisation(t, agentKey, n, hot.From(), true)
	}
	hot.maxBatch = 2
	revoked := false
	hot.beforeSend = func() {
		// The owner revokes the hot key on names[0] after the checks,
		// before the first transaction goes out.
		if !revoked {
			revoked = true
			e.setAuthorisation(t, agentKey, names[0], hot.From(), false)
		}
	}
	updates := []Update{
		{Name: names[0], Value: blobID(0)},
		{Name: names[1], Value: blobID(1)},
		{Name: names[2], Value: strings.Repeat("x", 10_000)}, // ~7M gas alone
		{Name: names[3], Value: blobID(3)},
		{Name: names[4], Value: blobID(4)},
		{Name: names[5], Value: blobID(5)},
	}
	before := e.nonce(t, hotKey)
	got, err := collect(t, hot, updates, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1} {
		var re *RevertError
		if got[i].Outcome != Failed || !errors.As(got[i].Err, &re) || re.Simulated || got[i].TxHash == (common.Hash{}) || got[i].BlockNumber == 0 {
			t.Errorf("update %d: %+v", i, got[i])
		}
	}
	if got[2].Outcome != Failed || !errors.Is(got[2].Err, ErrGasCap) || errors.Is(got[2].Err, ErrReverted) {
		t.Errorf("oversized update: %s, %v", got[2].Outcome, got[2].Err)
	}
	for _, i := range []int{3, 4, 5} {
		if got[i].Outcome != Published {
			t.Errorf("update %d after the failures: %s, %v", i, got[i].Outcome, got[i].Err)
		}
		e.mustRead(t, names[i], blobID(i))
	}
	// One reverted transaction and two that landed.
	if sent := e.nonce(t, hotKey) - before; sent != 3 {
		t.Errorf("nonce moved by %d, want 3", sent)
	}
	// Sent again: names[0] is now refused before anything is sent, and
	// names[1] lands.
	got, err = collect(t, hot, updates[:2], nil)
	if err != nil || got[0].Outcome != NotAuthorized || got[1].Outcome != Published {
		t.Fatalf("retry: %v; %s (%v), %s (%v)", err, got[0].Outcome, got[0].Err, got[1].Outcome, got[1].Err)
	}
}

// TestWriteBatchesChainStopsMidway: the chain goes away after the first
// transaction. The rest come back Retry (ErrUnavailable) without being
// tried; once the chain is back, the same call on the same client
// finishes the job, and nothing is published twice.
func TestWriteBatchesChainStopsMidway(t *testing.T) {
	const n = 40
	names := fleet("s", n)
	dir, port := t.TempDir(), freePort(t)
	cfg := devchain.Config{Port: port, DataDir: dir, Fund: []common.Address{agentAddr}}
	for _, name := range names {
		cfg.Names = append(cfg.Names, devchain.Name{Name: name, Owner: agentAddr})
	}
	chain, err := devchain.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := chain
	t.Cleanup(func() { first.Close() })
	c := newClient(t, chain, agentKey)
	c.maxBatch = 10
	updates := make([]Update, n)
	for i := range updates {
		updates[i] = Update{Name: names[i], Value: blobID(i)}
	}
	published := 0
	got, err := collect(t, c, updates, func(r UpdateResult) {
		if r.Outcome == Published {
			if published++; published == c.maxBatch {
				if err := chain.Close(); err != nil {
					t.Error(err)
				}
			}
		}
	})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("WriteBatches with the chain gone: %v", err)
	}
	for i, r := range got {
		switch {
		case i < c.maxBatch && r.Outcome != Published:
			t.Errorf("update %d: %s, %v", i, r.Outcome, r.Err)
		case i >= c.maxBatch && (r.Outcome != Retry || !errors.Is(r.Err, ErrUnavailable) || r.TxHash != (common.Hash{})):
			t.Errorf("update %d: %s, %v, tx %s", i, r.Outcome, r.Err, r.TxHash)
		}
	}

	// The chain comes back with its data, on the same port.
	chain, err = devchain.Start(t.Context(), devchain.Config{Port: port, DataDir: dir, Fund: cfg.Fund})
	if err != nil {
		t.Fatal(err)
	}
	back := chain
	t.Cleanup(func() { back.Close() })
	got, err = collect(t, c, updates, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if want := map[bool]Outcome{true: Unchanged, false: Published}[i < c.maxBatch]; r.Outcome != want {
			t.Errorf("after recovery, update %d: %s (%v), want %s", i, r.Outcome, r.Err, want)
		}
	}
	// One TextChanged per name, and exactly 4 transactions from the key.
	logs, err := chain.Client().FilterLogs(t.Context(), ethereum.FilterQuery{FromBlock: big.NewInt(0), Addresses: []common.Address{chain.ResolverAddress()}})
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[common.Hash]int{}
	for _, l := range logs {
		perNode[l.Topics[1]]++
	}
	for i, name := range names {
		if k := perNode[devchain.NameHash(name)]; k != 1 {
			t.Errorf("%s: %d TextChanged events", name, k)
		}
		if v, err := c.Read(t.Context(), name); err != nil || v != blobID(i) {
			t.Errorf("read %s: %q, %v", name, v, err)
		}
	}
	if sent, err := chain.Client().NonceAt(t.Context(), agentAddr, nil); err != nil || sent != n/10 {
		t.Errorf("the key sent %d transactions (%v), want %d", sent, err, n/10)
	}
}

// BenchmarkWriteBatches measures publishing 100 pointer updates (not first
// writes) with at most 1, 10 or as many updates per transaction as fit the
// default gas cap: updates/s and gas/update.
func BenchmarkWriteBatches(b *testing.B) {
	const n = 100
	for _, size := range []int{1, 10, 0} {
		name := fmt.Sprintf("batch=%d", size)
		if size == 0 {
			name = "batch=max"
		}
		b.Run(name, func(b *testing.B) {
			names := fleet("b", n)
			e := newEnv(b, names...)
			ctx := context.Background()
			c := newClient(b, e.chain, agentKey)
			c.maxBatch = size
			prev := make([]string, n)
			updates := make([]Update, n)
			publish := func(round int) (gas uint64, txs int) {
				hashes := map[common.Hash]bool{}
				for i := range updates {
					updates[i] = Update{Name: names[i], Value: blobID(round*n + i), Expected: prev[i]}
				}
				err := c.WriteBatches(ctx, updates, func(r UpdateResult) {
					if r.Outcome != Published {
						b.Fatalf("%s: %s, %v", r.Update.Name, r.Outcome, r.Err)
					}
					if !hashes[r.TxHash] {
						gas += r.TxGasUsed
					}
					hashes[r.TxHash] = true
				})
				if err != nil {
					b.Fatal(err)
				}
				for i := range updates {
					prev[i] = updates[i].Value
				}
				return gas, len(hashes)
			}
			publish(0) // first writes, not measured
			var gas uint64
			var txs int
			begin := time.Now()
			rounds := 0
			for b.Loop() {
				rounds++
				g, k := publish(rounds)
				gas += g
				txs += k
			}
			b.ReportMetric(float64(n*rounds)/time.Since(begin).Seconds(), "updates/s")
			b.ReportMetric(float64(gas)/float64(n*rounds), "gas/update")
			b.ReportMetric(float64(txs)/float64(rounds), "tx/op")
		})
	}
}
