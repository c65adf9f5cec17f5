package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/handover"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/wait"
)

// cli runs hermesd once and returns its standard output, standard error
// and exit code.
func (w *e2eWorld) cli(args ...string) (string, string, int) {
	w.t.Helper()
	w.runs++
	fmt.Fprintf(w.logf, "=== hermesd #%d: %s\n", w.runs, strings.Join(args, " "))
	cmd := exec.Command(hermesdBinary(w.t), args...)
	cmd.Env = w.env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	w.logf.Write(errb.Bytes())
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// buyerConfig writes the second operator's configuration: the devnet's
// chain and Walrus, its own state directory, master key and chain key,
// and agent alpha configured with a handover.
func buyerConfig(t *testing.T, w *e2eWorld, dir, handoverFile, identity string) string {
	t.Helper()
	b, err := os.ReadFile(w.dn.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b[:bytes.Index(b, []byte("agents:"))])
	s = strings.ReplaceAll(s, w.dn.Dir+"/keys/", dir+"/keys/")
	s = strings.ReplaceAll(s, "state_dir: "+w.dn.Dir+"/state", "state_dir: "+dir+"/state")
	s = strings.ReplaceAll(s, `listen: "`+w.http+`"`, `listen: ""`)
	s += fmt.Sprintf("agents:\n  - id: alpha\n    brain_dir: %s/brain\n    ens_name: alpha.hermes.eth\n    key: {handover: %s, identity: %s}\n",
		dir, handoverFile, identity)
	path := filepath.Join(dir, "hermesd-"+filepath.Base(handoverFile)+"-"+filepath.Base(identity)+".yml")
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestE2ETransfer: two operators on one devnet (separate state
// directories, master keys and chain keys). The seller snapshots alpha
// and beta; the buyer requests; the seller exports (alpha is then
// "transferred" in its running daemon, not an error loop); refused
// handovers (wrong identity, tampered, the name not moved yet) change
// nothing; the name moves; the buyer restores byte- and mode-identical
// with the handover's bundle hash and publishes a re-key the seller's key
// cannot read; the buyer's drill passes. Wrong recipient, expired or
// missing heads are unit-tested in internal/agent (TestBuyerHandover) and
// the age CLI interop in internal/handover (TestAgeCLIInterop).
func TestE2ETransfer(t *testing.T) {
	t.Parallel()
	w := newE2EWorldWith(t, devnet.Options{Format: "v3"},
		devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"}, devnet.Agent{ID: "beta", ENSName: "beta.hermes.eth"})
	files := map[string]struct {
		body string
		mode os.FileMode
	}{
		"system.md":       {"the agent for sale\n", 0o644},
		"memory/notes.md": {"private notes\n", 0o600},
		"skills/trade.md": {"how to trade\n", 0o640},
	}
	for rel, f := range files {
		p := filepath.Join(w.brain("alpha"), rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(f.body), f.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, f.mode)
	}
	os.MkdirAll(w.brain("beta"), 0o755)
	if err := os.WriteFile(filepath.Join(w.brain("beta"), "system.md"), []byte("never sold\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	seller := w.run()
	wait.Within(t, 2*time.Minute, "both agents published", func() bool { return w.settled("alpha") && w.settled("beta") })
	stopRun(t, seller)

	// The buyer: its own keys, a funded chain account.
	bdir := t.TempDir()
	os.MkdirAll(filepath.Join(bdir, "keys"), 0o700)
	bkey := devchain.DeriveKey("transfer-buyer")
	buyerAddr := crypto.PubkeyToAddress(bkey.PublicKey)
	if err := w.dn.Chain.Fund(t.Context(), new(big.Int).Mul(big.NewInt(1e18), big.NewInt(10)), buyerAddr); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(bdir, "keys", "chain.key"), []byte(fmt.Sprintf("0x%x\n", crypto.FromECDSA(bkey))), 0o600)
	master, _ := cipher.GenerateKey()
	if err := cipher.WriteKeyFile(filepath.Join(bdir, "keys", "snapshot.key"), master); err != nil {
		t.Fatal(err)
	}
	identity, other := filepath.Join(bdir, "alpha.transfer.key"), filepath.Join(bdir, "other.key")
	recipient, _, code := w.cli("transfer", "request", "alpha", "--identity", identity)
	recipient = strings.TrimSpace(recipient)
	if code != 0 || !strings.HasPrefix(recipient, "age1") {
		t.Fatalf("transfer request: exit %d, %q", code, recipient)
	}
	if _, _, code := w.cli("transfer", "request", "alpha", "--identity", other); code != 0 {
		t.Fatal("second identity")
	}

	// The seller exports.
	hoFile := filepath.Join(t.TempDir(), "alpha.handover")
	out, stderr, code := w.cli("transfer", "export", "alpha", "--to", recipient, "-o", hoFile, "-config", w.dn.ConfigPath, "--json")
	if code != 0 {
		t.Fatalf("transfer export: exit %d: %s", code, stderr)
	}
	head := w.pointer("alpha.hermes.eth")
	if !strings.Contains(out, `"head":"`+head+`"`) {
		t.Fatalf("export names another head than the record's %s: %s", head, out)
	}
	if info, err := os.Stat(hoFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("handover file: %v %v", info, err)
	}
	ids, _ := handover.ReadIdentityFile(identity)
	h, err := handover.OpenFile(hoFile, ids...)
	if err != nil || h.Head != head || h.ENSName != "alpha.hermes.eth" || h.BundleHash.String() != dirHash(t, w.brain("alpha")) {
		t.Fatalf("handover: %+v %v", h, err)
	}
	// Its one key does not read the seller's other agent.
	betaHead := w.pointer("beta.hermes.eth")
	pb := w.restorer("beta")
	pb.Key, pb.AgentKey, pb.ReadKeys = cipher.Key{}, &h.Key, []repo.AgentKey{h.Key}
	if _, err := pb.Restore(t.Context(), betaHead, filepath.Join(t.TempDir(), "b")); !errors.Is(err, repo.ErrWrongAgent) {
		t.Fatalf("the handover's key restores beta: %v", err)
	}

	// The seller's daemon again: alpha is transferred (ready, not failing),
	// beta goes on.
	seller = w.run()
	wait.Within(t, time.Minute, "seller ready with alpha transferred", func() bool {
		rep, err := w.status()
		if err != nil || !rep.Ready {
			return false
		}
		for _, a := range rep.Agents {
			if a.ID == "alpha" && a.Transferred != nil {
				return true
			}
		}
		return false
	})

	// Refused handovers change nothing.
	good := buyerConfig(t, w, bdir, hoFile, identity)
	tampered := filepath.Join(t.TempDir(), "tampered.handover")
	raw, _ := os.ReadFile(hoFile)
	raw[len(raw)-20] ^= 1
	os.WriteFile(tampered, raw, 0o600)
	for _, tc := range []struct {
		cfg, want string
	}{
		{buyerConfig(t, w, bdir, hoFile, other), "not encrypted to this identity"},
		{buyerConfig(t, w, bdir, tampered, identity), "damaged or was tampered with"},
		{good, "not transferred to you: alpha.hermes.eth is owned by " + w.dn.Owner().Hex()},
	} {
		_, stderr, code := w.cli("restore", "-config", tc.cfg, "alpha")
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("restore with %s: exit %d, want %q in %s", filepath.Base(tc.cfg), code, tc.want, stderr)
		}
		if _, err := os.Stat(filepath.Join(bdir, "brain")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused handover created the brain (%v)", err)
		}
	}

	// The name moves; the buyer restores and re-keys.
	if _, stderr, code := w.cli("pointer", "transfer", "alpha.hermes.eth", "--to", buyerAddr.Hex(), "--yes", "-config", w.dn.ConfigPath); code != 0 {
		t.Fatalf("pointer transfer: %s", stderr)
	}
	if _, stderr, code := w.cli("restore", "-config", good, "alpha"); code != 0 {
		t.Fatalf("buyer restore: %s", stderr)
	}
	if d := sameTree(hashedTree(t, w.brain("alpha")), hashedTree(t, filepath.Join(bdir, "brain"))); len(d) > 0 {
		t.Fatalf("restored brain differs: %v", d)
	}
	if got := dirHash(t, filepath.Join(bdir, "brain")); got != h.BundleHash.String() {
		t.Fatalf("restored bundle hash %s, handover %s", got, h.BundleHash)
	}
	buyer := w.start("run", "-config", good)
	wait.Within(t, 2*time.Minute, "the buyer's re-key published", func() bool {
		v := w.pointer("alpha.hermes.eth")
		return v != "" && v != head
	})
	stopRun(t, buyer)
	if !strings.Contains(buyer.out.String(), "re-key: full snapshot under key") {
		t.Error("the buyer's daemon did not log the re-key")
	}
	rekey := w.pointer("alpha.hermes.eth")
	if _, err := w.restorer("alpha").Restore(t.Context(), rekey, filepath.Join(t.TempDir(), "s")); !errors.Is(err, repo.ErrWrongAgent) {
		t.Fatalf("the seller's key restores the buyer's head: %v", err)
	}
	if _, stderr, code := w.cli("drill", "-config", good, "alpha"); code != 0 {
		t.Fatalf("buyer's drill: exit %d: %s", code, stderr)
	}

	// The seller's daemon never fought the buyer: no publish for alpha,
	// no error loop.
	stopRun(t, seller)
	log := seller.out.String()
	if n := strings.Count(log, "agent transferred to another owner"); n > 1 {
		t.Errorf("the transfer was logged %d times", n)
	}
	for _, bad := range []string{"pointer publish failed", "publishing held"} {
		if strings.Contains(log, bad) {
			t.Errorf("the seller's daemon logged %q after the transfer", bad)
		}
	}
}
