package main

import (
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/devnet"
)

// TestE2ERestoreWithoutSigner: a fresh machine holding only the snapshot
// key (no chain.signer, no receipts.signer) and an empty state directory
// restores, drills and reads the pointer; only the commands that write a
// pointer ask for the signer, and say which command did.
func TestE2ERestoreWithoutSigner(t *testing.T) {
	t.Parallel()
	w := newE2EWorld(t, devnet.Agent{ID: "auditor", ENSName: "auditor.hermes.eth"})
	bw := newBrainWriter(t, w.brain("auditor"), rand.New(rand.NewPCG(37, 1)))
	bw.put(t, "system.md", []byte("You audit.\n"), 0o644)
	bw.put(t, "skills/reentrancy.md", []byte("Look for re-entrant calls.\n"), 0o600)
	settleAgents(t, w, "auditor")
	head := w.pointer("auditor.hermes.eth")
	if head == "" {
		t.Fatal("no pointer after settling")
	}
	want := hashedTree(t, w.brain("auditor"))
	wantHash := dirHash(t, w.brain("auditor"))

	keyLine := "  signer: {file: " + filepath.Join(w.dn.Dir, "keys", "chain.key") + "}\n"
	b, err := os.ReadFile(w.dn.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), keyLine); n != 2 {
		t.Fatalf("the devnet configuration names the chain key %d times, want 2 (chain.signer, receipts.signer)", n)
	}
	fresh := t.TempDir()
	cfg := rewriteConfig(t, w,
		keyLine, "",
		"state_dir: "+filepath.Join(w.dn.Dir, "state"), "state_dir: "+filepath.Join(fresh, "state"),
		"brain_dir: "+w.brain("auditor"), "brain_dir: "+filepath.Join(fresh, "brain"))

	dir := filepath.Join(fresh, "restored")
	code, stdout, stderr := w.runOnce("restore", "-config", cfg, "--dir", dir, "auditor")
	if code != 0 {
		t.Fatalf("restore --dir without chain.signer: exit %d: %s", code, lastLine(stderr))
	}
	if d := sameTree(want, hashedTree(t, dir)); len(d) > 0 {
		t.Fatalf("restored brain differs: %v (%s)", d, stdout)
	}
	if got := dirHash(t, dir); got != wantHash {
		t.Errorf("restored bundle hash %s, want %s", got, wantHash)
	}
	if !strings.Contains(stdout, head) {
		t.Errorf("restore names no %s: %s", head, stdout)
	}

	// The cold start proper: the configured brain is missing.
	if code, _, stderr := w.runOnce("restore", "-config", cfg, "auditor"); code != 0 {
		t.Fatalf("restore without chain.signer: exit %d: %s", code, lastLine(stderr))
	}
	if got := dirHash(t, filepath.Join(fresh, "brain")); got != wantHash {
		t.Errorf("cold-restored bundle hash %s, want %s", got, wantHash)
	}
	if code, stdout, stderr := w.runOnce("pointer", "get", "-config", cfg, "auditor.hermes.eth"); code != 0 || strings.TrimSpace(stdout) != head {
		t.Errorf("pointer get without chain.signer: exit %d, %q: %s", code, stdout, lastLine(stderr))
	}
	for _, args := range [][]string{
		{"drill", "-config", cfg, "auditor"},
		{"status", "-config", cfg},
		{"log", "-config", cfg, "auditor"},
		{"verify", "-config", cfg, "auditor"},
		{"cost", "-config", cfg, "auditor"},
	} {
		if code, _, stderr := w.runOnce(args...); code != 0 {
			t.Errorf("%s without chain.signer: exit %d: %s", args[0], code, lastLine(stderr))
		}
	}

	// Writing needs the key: one line says which command asked for it.
	code, _, stderr = w.runOnce("run", "-config", cfg)
	if code != exitUsage {
		t.Fatalf("run without chain.signer: exit %d, want %d: %s", code, exitUsage, stderr)
	}
	line := lastLine(stderr)
	for _, s := range []string{"chain.signer", "auditor.hermes.eth", "'hermesd run'"} {
		if !strings.Contains(line, s) {
			t.Errorf("run without chain.signer: %q does not say %q", line, s)
		}
	}
	if code, _, stderr := w.runOnce("drill", "--destructive", "-config", cfg, "auditor"); code != exitUsage || !strings.Contains(stderr, "'hermesd drill --destructive'") {
		t.Errorf("drill --destructive without chain.signer: exit %d: %s", code, lastLine(stderr))
	}
}

// TestE2EStatusKeepsRestoreNotes: after a one-shot `hermesd restore`, no
// daemon running, `hermesd status` still lists the files restored without
// their set-id bits (the agent's state keeps them).
func TestE2EStatusKeepsRestoreNotes(t *testing.T) {
	t.Parallel()
	w := newE2EWorld(t, devnet.Agent{ID: "auditor", ENSName: "auditor.hermes.eth"})
	bw := newBrainWriter(t, w.brain("auditor"), rand.New(rand.NewPCG(37, 2)))
	bw.put(t, "system.md", []byte("You audit.\n"), 0o644)
	bw.put(t, "bin/tool", []byte("#!/bin/sh\n"), 0o755)
	if err := os.Chmod(filepath.Join(w.brain("auditor"), "bin/tool"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	settleAgents(t, w, "auditor")
	if err := os.RemoveAll(w.brain("auditor")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := w.runOnce("restore", "-config", w.dn.ConfigPath, "auditor")
	if code != 0 || !strings.Contains(stdout, "stripped: bin/tool") {
		t.Fatalf("restore: exit %d: %s\n%s", code, stdout, lastLine(stderr))
	}
	code, stdout, stderr = w.runOnce("status", "-config", w.dn.ConfigPath)
	if code != 0 || !strings.Contains(stdout, "auditor: restore of ") || !strings.Contains(stdout, "stripped: bin/tool") {
		t.Errorf("status after a one-shot restore: exit %d: %s\n%s", code, stdout, lastLine(stderr))
	}
	code, stdout, _ = w.runOnce("status", "-config", w.dn.ConfigPath, "--json")
	var rep statusReport
	if err := json.Unmarshal([]byte(stdout), &rep); code != 0 || err != nil || len(rep.Agents) != 1 || rep.Agents[0].Restore == nil ||
		len(rep.Agents[0].Restore.Stripped) != 1 {
		t.Errorf("status --json: exit %d, %v: %s", code, err, stdout)
	}
}

// TestE2EInvalidPointerValues: an ENS record that is not a blob id or a
// QuiltV1 patch id is refused as the invalid input it is (exit 3), by
// restore and by the drill, before any aggregator is asked.
func TestE2EInvalidPointerValues(t *testing.T) {
	t.Parallel()
	w := newE2EWorld(t, devnet.Agent{ID: "auditor", ENSName: "auditor.hermes.eth"})
	bw := newBrainWriter(t, w.brain("auditor"), rand.New(rand.NewPCG(37, 3)))
	bw.put(t, "system.md", []byte("You audit.\n"), 0o644)
	settleAgents(t, w, "auditor")
	head := w.pointer("auditor.hermes.eth")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil || len(raw) < 32 {
		t.Fatalf("pointer %q: %v", head, err)
	}
	// A QuiltV1 patch id of the head's quilt (or blob): 37 bytes.
	patch := append(append([]byte(nil), raw[:32]...), 1, 1, 0, 2, 0)
	enc := base64.RawURLEncoding.EncodeToString
	good := enc(patch)
	wrongVersion := append([]byte(nil), patch...)
	wrongVersion[32] = 2
	nonCanonical := []byte(good)
	nonCanonical[len(nonCanonical)-1] = 'B'
	signer := w.ensClient(true)
	prev := head
	for _, tc := range []struct{ name, value string }{
		{"too long", good + strings.Repeat("A", 40)},
		{"bad base64", good[:10] + "*" + good[11:]},
		{"wrong quilt version", enc(wrongVersion)},
		{"truncated", good[:48]},
		{"non-canonical", string(nonCanonical)},
	} {
		if _, err := signer.Write(t.Context(), "auditor.hermes.eth", tc.value, prev); err != nil {
			t.Fatal(err)
		}
		prev = tc.value
		for _, args := range [][]string{
			{"restore", "-config", w.dn.ConfigPath, "--dir", filepath.Join(t.TempDir(), "x"), "auditor"},
			{"drill", "-config", w.dn.ConfigPath, "auditor"},
		} {
			code, stdout, stderr := w.runOnce(args...)
			if code != exitMismatch || !strings.Contains(stdout+stderr, "not a blob id or a quilt patch id") {
				t.Errorf("%s: %s: exit %d, want %d: %s", tc.name, args[0], code, exitMismatch, lastLine(stderr))
			}
		}
	}
}
