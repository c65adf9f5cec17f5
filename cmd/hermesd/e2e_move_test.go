package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/ledger"
)

// testPointerMove moves auditor.hermes.eth's record from L1 to the L2 and
// back with `hermesd pointer move` (docs/design.md §7.4), in the world of
// TestE2EL2Record (its daemon stopped, auditor published on L1):
//   - a signer that does not own the name is refused in one line, and
//     --dry-run prints the plan; neither changes anything;
//   - a move stopped midway (the gateway down: the head is written on the
//     L2, the new resolver does not serve it, so the L1 resolver is not
//     changed) is finished by running it again; once more is a no-op;
//   - L1 resolution (ENSIP-10 + CCIP-read) shows the head after each move;
//   - the daemon still configured for L1 writes nothing (the name resolves
//     through the L2's resolver) and says so in status; no move runs
//     beside it; configured records: l2 it publishes there, visible from
//     L1, and L1's resolver is left alone;
//   - back to L1, the newest head is written on L1's PublicResolver first.
func testPointerMove(t *testing.T, w *e2eWorld) {
	const name = "auditor.hermes.eth"
	ctx := t.Context()
	cfg := []string{"-config", w.dn.ConfigPath}
	head := w.agentState("auditor").Published
	publicResolver, offchain := w.dn.Chain.ResolverAddress(), w.dn.L2.OffchainResolver
	l1 := w.ensClient(false)
	resolverOf := func() common.Address {
		t.Helper()
		rec, err := l1.Lookup(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Resolver
	}
	atL2 := func() string {
		t.Helper()
		c, err := ens.New(ctx, ens.Config{RPCURL: w.dn.L2.RPC(), Records: w.dn.L2.Resolver()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r, err := c.Resolve(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return r.Value
	}
	move := func(args ...string) (pointerMoveResult, string, int) {
		t.Helper()
		stdout, stderr, code := w.cli(append(append([]string{"pointer", "move", name, "--json"}, cfg...), args...)...)
		var res pointerMoveResult
		if code == 0 {
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("%v: %s", err, stdout)
			}
		}
		return res, stderr, code
	}
	if head == "" || resolverOf() != publicResolver || w.pointer(name) != head || atL2() != "" {
		t.Fatalf("before: published %q, resolver %s, L1 shows %q, the L2 %q", head, resolverOf(), w.pointer(name), atL2())
	}

	// Not the owner: refused before anything is sent, in one line.
	intruder := filepath.Join(t.TempDir(), "intruder.key")
	if err := os.WriteFile(intruder, fmt.Appendf(nil, "0x%x\n", crypto.FromECDSA(devchain.DeriveKey("move-intruder"))), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := move("--to", "l2", "--key-file", intruder)
	if code == 0 || !strings.Contains(stderr, "cannot change its resolver (nothing sent)") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("an intruder's move: exit %d: %q", code, stderr)
	}
	// The plan: checked and estimated, nothing sent.
	plan, stderr, code := move("--to", "l2", "--dry-run")
	if code != 0 || !plan.DryRun || plan.Value != head || plan.L1GasEstimate == 0 || plan.L1TxHash != "" || plan.ConfigChange != "records: l2" {
		t.Errorf("dry run: exit %d: %+v %s", code, plan, stderr)
	}
	if resolverOf() != publicResolver || atL2() != "" {
		t.Fatalf("a refused move or a dry run changed something: resolver %s, the L2 holds %q", resolverOf(), atL2())
	}

	// Stopped midway: the head is on the L2, the gateway does not serve
	// it, so the resolver stays; L1 still shows the head.
	w.dn.L2.Records.SetDown(true)
	stdout, stderr, code := w.cli(append([]string{"pointer", "move", name, "--to", "l2", "--wait", "300ms"}, cfg...)...)
	w.dn.L2.Records.SetDown(false)
	if code == 0 || !strings.Contains(stderr, "nothing changed on L1") || !strings.Contains(stdout, "written at ens.records l2: tx ") {
		t.Fatalf("a move with the gateway down: exit %d: %s%s", code, stdout, stderr)
	}
	t.Logf("to the L2, stopped: %s", strings.TrimSpace(stdout))
	if resolverOf() != publicResolver || atL2() != head || w.pointer(name) != head {
		t.Fatalf("after the stopped move: resolver %s, the L2 holds %q, L1 shows %q", resolverOf(), atL2(), w.pointer(name))
	}
	res, stderr, code := move("--to", "l2")
	if code != 0 || res.Done || !res.Visible || res.DestTxHash != "" || res.L1TxHash == "" || res.L1GasUsed == 0 ||
		res.PreviousOwn != publicResolver.Hex() || res.ToResolver != offchain.Hex() || res.ConfigChange != "records: l2" {
		t.Fatalf("the move finished: exit %d: %+v %s", code, res, stderr)
	}
	if g := res.Gas; g == nil || g.FromChain != w.dn.Config.Chain.ChainID || g.ToChain != w.dn.L2.ChainID || g.BeforePerWrite <= 0 {
		t.Errorf("gas figures %+v", res.Gas)
	}
	t.Logf("to the L2: setResolver %d gas (estimated %d)", res.L1GasUsed, plan.L1GasEstimate)
	if resolverOf() != offchain || w.pointer(name) != head {
		t.Fatalf("after the move: resolver %s, L1 shows %q", resolverOf(), w.pointer(name))
	}
	if again, stderr, code := move("--to", "l2"); code != 0 || !again.Done || again.L1TxHash != "" || again.DestTxHash != "" {
		t.Errorf("the move again: exit %d: %+v %s", code, again, stderr)
	}

	// The daemon, still configured for L1, writes nothing anywhere.
	if err := newBrainWriter(t, w.brain("auditor"), rand.New(rand.NewPCG(7, 37))).step(); err != nil {
		t.Fatal(err)
	}
	p := w.run()
	p.mustWaitLine("its name resolves from elsewhere than its records", 1, 60*time.Second)
	if stdout, stderr, code := w.cli(append([]string{"status"}, cfg...)...); !strings.Contains(stdout, "NOT WRITTEN: "+name+" resolves through the L1 resolver of ens.records l2") ||
		!strings.Contains(stdout, "records: l2") {
		t.Errorf("status of the misconfigured daemon: exit %d: %s %s", code, stdout, stderr)
	}
	// No move while a daemon runs on the state directory: it would write
	// the old place.
	if _, stderr, code := move("--to", "l1", "--resolver", publicResolver.Hex()); code != exitLocked || !strings.Contains(stderr, "stop hermesd first") {
		t.Errorf("a move beside the running daemon: exit %d: %s", code, stderr)
	}
	p.signal(os.Interrupt)
	// Like a hold, it waits for the operator: the stop does not wait
	// for a write that cannot be made here.
	if code := p.wait(60 * time.Second); code != 0 {
		t.Errorf("the misconfigured daemon's exit %d", code)
	}
	if resolverOf() != offchain || w.pointer(name) != head || atL2() != head {
		t.Fatalf("the misconfigured daemon changed something: resolver %s, L1 shows %q, the L2 %q", resolverOf(), w.pointer(name), atL2())
	}
	// Configured records: l2, it publishes there, visible from L1.
	body, err := os.ReadFile(w.dn.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	moved := strings.Replace(string(body), "    ens_name: "+name+"\n", "    ens_name: "+name+"\n    records: l2\n", 1)
	if moved == string(body) {
		t.Fatal("the configuration has no auditor entry to change")
	}
	if err := os.WriteFile(w.dn.ConfigPath, []byte(moved), 0o600); err != nil {
		t.Fatal(err)
	}
	p = w.run()
	p.mustWaitLine(msgPublished+` agent=auditor`, 1, 60*time.Second)
	p.signal(os.Interrupt)
	if code := p.wait(60 * time.Second); code != 0 {
		t.Fatalf("daemon exit %d", code)
	}
	newHead := w.agentState("auditor").Published
	if newHead == head || w.pointer(name) != newHead || atL2() != newHead || resolverOf() != offchain {
		t.Fatalf("published %q (was %q): L1 shows %q, the L2 %q, resolver %s", newHead, head, w.pointer(name), atL2(), resolverOf())
	}

	// Back to L1: the newest head goes on L1's PublicResolver first. The
	// plan, as an operator reads it:
	stdout, stderr, code = w.cli(append([]string{"pointer", "move", name, "--to", "l1", "--resolver", publicResolver.Hex(), "--dry-run"}, cfg...)...)
	t.Logf("the plan back:\n%s", stdout)
	for _, want := range []string{"plan: move " + name + " (head " + newHead + ") to the L1 resolver " + publicResolver.Hex(),
		"1. write the head at the L1 resolver " + publicResolver.Hex() + " (it holds \"" + head + "\" now)",
		"3. L1 setResolver(" + name + ", " + publicResolver.Hex() + "): about ", "per write: before", "then set agent auditor's records: l1"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("the plan back: exit %d, no %q in\n%s%s", code, want, stdout, stderr)
		}
	}
	l1Txs := func() float64 {
		t.Helper()
		b, err := ledger.Load(w.dn.Config.StateDir, "auditor")
		if err != nil {
			t.Fatal(err)
		}
		if c := b.Total.Chains[w.dn.Config.Chain.ChainID]; c != nil {
			return c.Transactions
		}
		return 0
	}
	txsBefore := l1Txs()
	back, stderr, code := move("--to", "l1", "--resolver", publicResolver.Hex())
	if code != 0 || back.Done || !back.Visible || back.Value != newHead || back.DestPrevious != head || back.DestTxHash == "" ||
		back.L1TxHash == "" || back.ConfigChange != "records: l1" {
		t.Fatalf("back to L1: exit %d: %+v %s", code, back, stderr)
	}
	if g := back.Gas; g == nil || g.FromChain != w.dn.L2.ChainID || g.BeforePerWrite <= 0 || g.AfterPerWrite <= 0 {
		t.Errorf("gas figures back %+v", back.Gas)
	}
	t.Logf("back to L1: setText %d gas + setResolver %d gas", back.DestGasUsed, back.L1GasUsed)
	if n := l1Txs(); n != txsBefore+2 {
		t.Errorf("the agent's ledger: %v L1 transactions after the move back, %v before; want both of the move's", n, txsBefore)
	}
	if resolverOf() != publicResolver || w.pointer(name) != newHead {
		t.Fatalf("after the move back: resolver %s, L1 shows %q", resolverOf(), w.pointer(name))
	}
	if err := os.WriteFile(w.dn.ConfigPath, body, 0o600); err != nil {
		t.Fatal(err)
	}
}
