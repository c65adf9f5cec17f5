package main

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/wait"
)

// historyWorld is the devnet with agent alpha whose daemon took three v3
// snapshots: states[i] is the brain of the i-th newest (0 = the latest).
type historyWorld struct {
	*e2eWorld
	cfg    string
	states []map[string]hashedFile
	heads  []string
}

func newHistoryWorld(t *testing.T) *historyWorld {
	t.Helper()
	w := &historyWorld{e2eWorld: newE2EWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})}
	w.cfg = w.dn.ConfigPath
	bw := newBrainWriter(t, w.brain("alpha"), rand.New(rand.NewPCG(7, 7)))
	settle := func() {
		want := dirHash(t, w.brain("alpha"))
		p := w.run()
		wait.Within(t, 20*time.Second, "the daemon to publish "+want, func() bool {
			rep, err := w.status()
			if err != nil || len(rep.Agents) != 1 {
				return false
			}
			a := rep.Agents[0]
			return a.Last != nil && a.Last.BundleHash == want && a.Pending == nil && a.Published == a.Last.BlobID
		})
		p.signal(syscall.SIGTERM)
		if code := p.wait(15 * time.Second); code != 0 {
			t.Fatalf("hermesd exited %d on SIGTERM", code)
		}
		w.states = append([]map[string]hashedFile{hashedTree(t, w.brain("alpha"))}, w.states...)
		w.heads = append([]string{w.pointer("alpha.hermes.eth")}, w.heads...)
	}
	settle() // 2: memory.db, system.md, skills/, patterns/
	bw.put(t, "skills/reentrancy.md", []byte("---\nname: reentrancy\nrevised: yes\n---\n"), 0o600)
	bw.put(t, "notes/n001.md", []byte("a new note\n"), 0o644)
	settle() // 1: one file changed, one added
	if err := os.Remove(filepath.Join(w.brain("alpha"), "patterns", "p1.md")); err != nil {
		t.Fatal(err)
	}
	bw.put(t, "system.md", []byte("You are a test agent, revised.\n"), 0o600)
	if err := os.Chmod(filepath.Join(w.brain("alpha"), "system.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	settle() // 0: one file removed, one changed (content and mode)
	if len(w.heads) != 3 || w.heads[0] == w.heads[1] || w.heads[1] == w.heads[2] {
		t.Fatalf("heads %v, want three snapshots", w.heads)
	}
	return w
}

// cli runs hermesd and requires exit code want.
func (w *historyWorld) cli(want int, args ...string) string {
	w.t.Helper()
	code, stdout, stderr := w.runOnce(args...)
	if code != want {
		w.t.Fatalf("hermesd %s: exit %d, want %d: %s", strings.Join(args, " "), code, want, lastLine(stderr))
	}
	return stdout
}

// TestHistoryCommands: log, diff, restore --at/--path and verify on three
// v3 snapshots the daemon took, and the independent node reader on the
// daemon's head (runtime: about 15 s).
func TestHistoryCommands(t *testing.T) {
	t.Parallel()
	w := newHistoryWorld(t)

	t.Run("log", func(t *testing.T) {
		var out struct {
			Agent     string                  `json:"agent"`
			Snapshots []snapshot.HistoryEntry `json:"snapshots"`
		}
		if err := json.Unmarshal([]byte(w.cli(0, "log", "-config", w.cfg, "--json", "alpha")), &out); err != nil {
			t.Fatal(err)
		}
		if len(out.Snapshots) != 3 {
			t.Fatalf("log lists %d snapshots, want 3: %+v", len(out.Snapshots), out.Snapshots)
		}
		for i, e := range out.Snapshots {
			if e.N != i || e.BlobID != w.heads[i] || e.Format != snapshot.FormatV3 || e.Status != "restorable" || e.Added <= 0 {
				t.Errorf("entry %d: %+v, want v3 head %s, restorable", i, e, w.heads[i])
			}
			if e.EndEpoch == 0 {
				t.Errorf("entry %d: no end epoch, though the lock records it", i)
			}
			if e.BundleHash != dirHashOf(t, w.states[i]) {
				t.Errorf("entry %d: bundle hash %s, the brain then hashed to %s", i, e.BundleHash, dirHashOf(t, w.states[i]))
			}
		}
		if c := []int{out.Snapshots[0].Changed, out.Snapshots[1].Changed}; c[0] != 2 || c[1] != 2 {
			t.Errorf("changed files %v, want [2 2]", c)
		}
		if last := out.Snapshots[2]; last.Changed != int(last.Files) {
			t.Errorf("the first snapshot changed %d of %d files", last.Changed, last.Files)
		}
		text := w.cli(0, "log", "-config", w.cfg, "--limit", "2", "alpha")
		lines := strings.Split(strings.TrimSpace(text), "\n")
		if len(lines) != 3 || !strings.Contains(lines[1], "restorable") || !strings.Contains(lines[1], w.heads[0]) {
			t.Errorf("log --limit 2:\n%s", text)
		}
		if f := strings.Fields(lines[2]); len(f) < 6 || f[5] != "2" {
			t.Errorf("log --limit 2: the last line's CHANGED is not counted:\n%s", text)
		}
	})

	t.Run("diff", func(t *testing.T) {
		got := w.cli(0, "diff", "-config", w.cfg, "alpha", "1", "0")
		want := "D patterns/p1.md\nM system.md\t0644 22 bytes -> 0600 31 bytes\n"
		if got != want {
			t.Errorf("diff 1 0:\n%s\nwant:\n%s", got, want)
		}
		var out struct {
			Changes []diffLine `json:"changes"`
		}
		if err := json.Unmarshal([]byte(w.cli(0, "diff", "-config", w.cfg, "--json", "alpha", "--", "2", w.heads[1])), &out); err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, c := range out.Changes {
			kinds = append(kinds, c.Kind+" "+c.Path)
		}
		if strings.Join(kinds, ",") != "A notes,A notes/n001.md,M skills/reentrancy.md" {
			t.Errorf("diff 2 1: %v", kinds)
		}
		if code, _, stderr := w.runOnce("diff", "-config", w.cfg, "alpha", "0", "7"); code != exitNotFound {
			t.Errorf("diff with a snapshot beyond the history: exit %d (%s), want %d", code, lastLine(stderr), exitNotFound)
		}
	})

	t.Run("restore --at and --path", func(t *testing.T) {
		for i, sel := range []string{"2", w.heads[1], dirHashOf(t, w.states[0])[:10]} {
			dir := filepath.Join(t.TempDir(), "at")
			w.cli(0, "restore", "-config", w.cfg, "--at", sel, "--dir", dir, "alpha")
			want := w.states[2-i]
			if i == 2 {
				want = w.states[0]
			}
			if d := sameTree(want, hashedTree(t, dir)); len(d) > 0 {
				t.Errorf("restore --at %s: %v", sel, d)
			}
		}
		dir := filepath.Join(t.TempDir(), "path")
		out := w.cli(0, "restore", "-config", w.cfg, "--at", "1", "--path", "skills", "--dir", dir, "alpha")
		got := hashedTree(t, dir)
		if len(got) != 1 || got["skills/reentrancy.md"] != w.states[1]["skills/reentrancy.md"] {
			t.Errorf("restore --path skills: %v (%s)", got, out)
		}
		if code, _, stderr := w.runOnce("restore", "-config", w.cfg, "--path", "nope", "--dir", filepath.Join(t.TempDir(), "x"), "alpha"); code != exitNotFound {
			t.Errorf("restore --path of a missing path: exit %d (%s)", code, lastLine(stderr))
		}
	})

	t.Run("verify", func(t *testing.T) {
		out := w.cli(0, "verify", "-config", w.cfg, "alpha")
		if !strings.Contains(out, "is intact") || !strings.Contains(out, "not downloaded") {
			t.Errorf("verify: %s", out)
		}
		var rep verifyOutput
		if err := json.Unmarshal([]byte(w.cli(0, "verify", "-config", w.cfg, "--read-data", "--at", "2", "--json", "alpha")), &rep); err != nil {
			t.Fatal(err)
		}
		if !rep.ReadData || rep.BlobID != w.heads[2] || rep.Downloaded < 4<<20 || rep.BundleHash != dirHashOf(t, w.states[2]) {
			t.Errorf("verify --read-data --at 2: %+v", rep)
		}
	})

	// The independent reader (docs/format-v3.md and node's crypto alone)
	// restores what the daemon wrote, through the aggregator's range reads.
	t.Run("node reader", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			t.Fatal("node is required: the independent v3 reader (tools/v3reader/restore.mjs) must run in CI")
		}
		out := filepath.Join(t.TempDir(), "node")
		cmd := exec.Command(node, filepath.Join("..", "..", "tools", "v3reader", "restore.mjs"),
			"--aggregator", w.dn.Walrus.URL(), "--blob", w.heads[0], "--key-file", w.dn.KeyPath,
			"--identity", "alpha.hermes.eth", "--out", out)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("node restore.mjs: %v\n%s", err, b)
		}
		if d := sameTree(w.states[0], hashedTree(t, out)); len(d) > 0 {
			t.Errorf("the node reader's restore differs from the brain: %v", d)
		}
		if !strings.Contains(string(b), dirHashOf(t, w.states[0])) {
			t.Errorf("node reader output %s does not report the bundle hash", b)
		}
	})

	// Walrus forgets the snapshots: log says so, restores and checks exit 4.
	t.Run("expired", func(t *testing.T) {
		if err := w.dn.Walrus.AdvanceEpochs(6); err != nil {
			t.Fatal(err)
		}
		var out struct {
			Snapshots []snapshot.HistoryEntry `json:"snapshots"`
		}
		if err := json.Unmarshal([]byte(w.cli(0, "log", "-config", w.cfg, "--json", "alpha")), &out); err != nil {
			t.Fatal(err)
		}
		if len(out.Snapshots) != 1 || out.Snapshots[0].Status != "expired" {
			t.Errorf("log after expiry: %+v", out.Snapshots)
		}
		for _, args := range [][]string{
			{"restore", "-config", w.cfg, "--dir", filepath.Join(t.TempDir(), "gone"), "alpha"},
			{"verify", "-config", w.cfg, "alpha"},
		} {
			if code, _, stderr := w.runOnce(args...); code != exitNotFound {
				t.Errorf("%s after expiry: exit %d (%s), want %d", args[0], code, lastLine(stderr), exitNotFound)
			}
		}
	})
}

// dirHashOf is the bundle hash of a hashedTree.
func dirHashOf(t *testing.T, files map[string]hashedFile) string {
	t.Helper()
	dir := t.TempDir()
	for rel, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.content), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	return dirHash(t, dir)
}
