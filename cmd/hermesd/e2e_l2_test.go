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
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ens"
)

// TestE2EL2Record: one agent with its record on L1 and one with its
// record on the devnet's L2 (docs/design.md §7.2), run by the binary. The
// L2 agent's pointer is written on the L2 and published once L1
// resolution (the OffchainResolver and its gateway) shows it. Then an
// empty machine whose configuration knows only the agent's L1 name (no
// ens.records, a new state directory, no brain) cold-restores it with
// `hermesd restore`: byte-identical, bundle hash verified; and `hermesd
// drill --mode b` on the writing machine passes the same way.
func TestE2EL2Record(t *testing.T) {
	t.Parallel()
	w := newE2EWorldWith(t, devnet.Options{L2: &devnet.L2Options{}},
		devnet.Agent{ID: "auditor", ENSName: "auditor.hermes.eth"},
		devnet.Agent{ID: "scout", ENSName: "scout.l2.hermes.eth", OnL2: true})
	for i, id := range []string{"auditor", "scout"} {
		if err := newBrainWriter(t, w.brain(id), rand.New(rand.NewPCG(uint64(i), 25))).step(); err != nil {
			t.Fatal(err)
		}
	}
	p := w.run()
	p.mustWaitLine(msgPublished, 2, 60*time.Second)
	if n, _ := p.out.count(msgPublished, "records=l2", "visible_from_l1=true"); n != 1 {
		t.Fatalf("the L2 agent's publication: %d lines", n)
	}
	p.signal(os.Interrupt)
	if code := p.wait(60 * time.Second); code != 0 {
		t.Fatalf("daemon exit %d", code)
	}
	head := w.agentState("scout").Published
	if head == "" || w.pointer("scout.l2.hermes.eth") != head {
		t.Fatalf("the L2 agent's record through L1: %q, published %q", w.pointer("scout.l2.hermes.eth"), head)
	}
	want := hashedTree(t, w.brain("scout"))

	t.Run("cold restore with only the L1 name", func(t *testing.T) {
		c := w.dn.Config
		fresh := t.TempDir()
		cfg := filepath.Join(fresh, "hermesd.yml")
		brain := filepath.Join(fresh, "brains", "scout")
		body := fmt.Sprintf(`state_dir: %s
walrus: {publishers: [%q], aggregators: [%q], epochs: 5}
chain:
  rpc: %s
  chain_id: %d
  signer: {file: %s}
encryption: {key: {file: %s}}
agents:
  - {id: scout, brain_dir: %s, ens_name: scout.l2.hermes.eth}
`, filepath.Join(fresh, "state"), c.Walrus.Publishers[0], c.Walrus.Aggregators[0], c.Chain.RPC, c.Chain.ChainID,
			c.Chain.Signer.File, c.Encryption.Key.File, brain)
		if strings.Contains(body, "records") {
			t.Fatal("the fresh configuration names the records")
		}
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := w.runOnce("restore", "-config", cfg, "scout")
		if code != 0 || !strings.Contains(stdout, "restored") || !strings.Contains(stdout, head) {
			t.Fatalf("restore: exit %d: %s %s", code, stdout, lastLine(stderr))
		}
		if d := sameTree(want, hashedTree(t, brain)); len(d) > 0 {
			t.Fatalf("the restored brain differs: %v", d)
		}
		if got, orig := dirHash(t, brain), dirHash(t, w.brain("scout")); got != orig || !strings.Contains(stdout, got) {
			t.Fatalf("bundle hash %s, original %s (restore said: %s)", got, orig, stdout)
		}
	})

	t.Run("drill mode b", func(t *testing.T) {
		code, stdout, stderr := w.runOnce("drill", "-config", w.dn.ConfigPath, "--scratch", t.TempDir(), "--mode", "b", "--json", "scout")
		if code != 0 {
			t.Fatalf("drill: exit %d: %s %s", code, stdout, lastLine(stderr))
		}
		var rep struct {
			Result string `json:"result"`
			BlobID string `json:"blobId"`
			Stages []struct {
				Name   string `json:"name"`
				OK     bool   `json:"ok"`
				Detail string `json:"detail"`
			}
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("drill report: %v: %s", err, stdout)
		}
		read := ""
		for _, s := range rep.Stages {
			if !s.OK {
				t.Errorf("stage %s failed: %s", s.Name, s.Detail)
			}
			if s.Name == "ens-read" {
				read = s.Detail
			}
		}
		if rep.Result != "pass" || !strings.Contains(read, "scout.l2.hermes.eth") || !strings.Contains(read, rep.BlobID) || rep.BlobID == "" {
			t.Errorf("result %s, ens-read stage %q, blob %q", rep.Result, read, rep.BlobID)
		}
	})

	// pointer set writes where the record lives (the agent's ens.records)
	// and confirms through L1, as the daemon does.
	t.Run("pointer set at the L2", func(t *testing.T) {
		v := strings.Repeat("L", 43)
		stdout, stderr, code := w.cli("pointer", "set", "scout.l2.hermes.eth", v, "--force", "--json", "-config", w.dn.ConfigPath)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var res pointerSetResult
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%v: %s", err, stdout)
		}
		if res.Records != devnet.L2RecordsID || res.Visible == nil || !*res.Visible || res.Previous != head ||
			res.ChainID != fmt.Sprint(devnet.DefaultL2ChainID) || res.TxHash == "" {
			t.Errorf("result %+v", res)
		}
		if got := w.pointer("scout.l2.hermes.eth"); got != v {
			t.Errorf("L1 resolution shows %q, want %q", got, v)
		}
		// A stale --expect sends nothing.
		if _, stderr, code := w.cli("pointer", "set", "scout.l2.hermes.eth", "-config", w.dn.ConfigPath, "--expect", head, "--", strings.Repeat("M", 43)); code == 0 ||
			!strings.Contains(stderr, "not the expected") {
			t.Errorf("a stale --expect: exit %d: %s", code, stderr)
		}
		if got := w.pointer("scout.l2.hermes.eth"); got != v {
			t.Errorf("after a refused set, L1 resolution shows %q", got)
		}
	})

	// pointer transfer moves the name where its record lives: in the L2's
	// registry, which decides who may write it there. As on L1: refused
	// without --yes, sent with it, read back, and the old owner is locked
	// out of the record and of the name; the record stays.
	t.Run("pointer transfer at the L2", func(t *testing.T) {
		cfg := []string{"-config", w.dn.ConfigPath}
		name := "scout.l2.hermes.eth"
		seller := w.dn.Owner()
		buyer := crypto.PubkeyToAddress(devchain.DeriveKey("l2-buyer").PublicKey)
		l2, err := ens.New(t.Context(), ens.Config{RPCURL: w.dn.L2.RPC(), ChainID: w.dn.L2.ChainID})
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		owner := func() common.Address {
			t.Helper()
			o, err := l2.Owner(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
		if o := owner(); o != seller {
			t.Fatalf("the L2 registry's owner %s, want %s", o, seller)
		}
		before := w.pointer(name)
		stdout, stderr, code := w.cli(append([]string{"pointer", "transfer", name, "--to", buyer.Hex()}, cfg...)...)
		if code != exitUsage || !strings.Contains(stderr, "--yes") || !strings.Contains(stdout, "would transfer "+name+" from "+seller.Hex()) {
			t.Fatalf("without --yes: exit %d, %q, %q", code, stdout, stderr)
		}
		stdout, stderr, code = w.cli(append([]string{"pointer", "transfer", name, "--to", buyer.Hex(), "--yes", "--json"}, cfg...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var res pointerTransferResult
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%v: %s", err, stdout)
		}
		if res.Records != devnet.L2RecordsID || res.ChainID != fmt.Sprint(devnet.DefaultL2ChainID) || !res.Sent ||
			res.PreviousOwner != seller.Hex() || res.To != buyer.Hex() || res.TxHash == "" {
			t.Errorf("result %+v", res)
		}
		if o := owner(); o != buyer {
			t.Fatalf("the L2 registry's owner %s after the transfer, want %s", o, buyer)
		}
		if got := w.pointer(name); got != before {
			t.Errorf("the record through L1 after the transfer: %q, want %q", got, before)
		}
		if _, stderr, code := w.cli(append(append([]string{"pointer", "set", name, "--force"}, cfg...), "--", strings.Repeat("N", 43))...); code == 0 ||
			!strings.Contains(stderr, "not authori") {
			t.Errorf("the old owner's write after the transfer: exit %d: %s", code, stderr)
		}
		if _, stderr, code := w.cli(append([]string{"pointer", "transfer", name, "--to", seller.Hex(), "--yes"}, cfg...)...); code == 0 ||
			!strings.Contains(stderr, "nothing sent") {
			t.Errorf("the old owner's transfer back: exit %d: %s", code, stderr)
		}
		if o := owner(); o != buyer {
			t.Errorf("the L2 registry's owner %s after a refused transfer", o)
		}
		if got := w.pointer(name); got != before {
			t.Errorf("the record through L1 after a refused write: %q, want %q", got, before)
		}
	})

	// pointer move takes the L1 agent's record to the L2 and back
	// (e2e_move_test.go).
	t.Run("pointer move", func(t *testing.T) { testPointerMove(t, w) })
}
