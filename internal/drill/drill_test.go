package drill

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walrus"
)

// world is a devnet with one agent that has an ENS name ("alpha") and one
// that has none ("solo").
type world struct {
	t  *testing.T
	dn *devnet.Devnet
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dn, err := devnet.Start(t.Context(), devnet.Options{
		Dir: t.TempDir(),
		Agents: []devnet.Agent{
			{ID: "alpha", ENSName: "alpha.hermes.eth"},
			{ID: "solo"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dn.Close() })
	w := &world{t: t, dn: dn}
	seedBrain(t, w.brain("alpha"))
	seedBrain(t, w.brain("solo"))
	return w
}

func (w *world) brain(id string) string {
	a, err := w.dn.Config.Agent(id)
	if err != nil {
		w.t.Fatal(err)
	}
	return a.BrainDir
}

func (w *world) opts(id string) Options {
	return Options{Config: w.dn.Config, Agent: id, ScratchDir: w.t.TempDir(), Log: testLogger()}
}

func (w *world) pointer(name string) string {
	w.t.Helper()
	c, err := ens.New(w.t.Context(), ens.Config{RPCURL: w.dn.Chain.URL()})
	if err != nil {
		w.t.Fatal(err)
	}
	defer c.Close()
	v, err := c.Read(w.t.Context(), name)
	if err != nil {
		w.t.Fatal(err)
	}
	return v
}

// tamper flips one byte in the middle of a stored blob (or quilt patch).
func (w *world) tamper(blobID string) {
	w.t.Helper()
	if err := w.dn.Walrus.FlipStoredByte(blobID, 0x01); err != nil {
		w.t.Fatal(err)
	}
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func writeFile(t *testing.T, p string, content []byte, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, content, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// seedBrain writes nested directories, a dotfile, several modes, a 2 MiB
// file, an empty file, an empty directory and a nested file named like the
// lock (which, below the top level, is brain content).
func seedBrain(t *testing.T, dir string) {
	big := make([]byte, 2<<20)
	rand.Read(big)
	writeFile(t, filepath.Join(dir, "system.md"), []byte("You are a test agent.\n"), 0o644)
	writeFile(t, filepath.Join(dir, "skills/reentrancy.md"), []byte("---\nname: reentrancy\n---\nLook for re-entrant calls.\n"), 0o600)
	writeFile(t, filepath.Join(dir, "patterns/deep/p1.md"), []byte("pattern one\n"), 0o640)
	writeFile(t, filepath.Join(dir, "tools/run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755)
	writeFile(t, filepath.Join(dir, "memory.db"), big, 0o644)
	writeFile(t, filepath.Join(dir, ".hidden"), []byte("dotfile\n"), 0o600)
	writeFile(t, filepath.Join(dir, "empty.txt"), nil, 0o644)
	writeFile(t, filepath.Join(dir, "skills/bundle.lock.json"), []byte("{\"nested\": true}"), 0o644)
	if err := os.MkdirAll(filepath.Join(dir, "scratchpad/empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "patterns"), 0o700); err != nil {
		t.Fatal(err)
	}
}

type node struct {
	content string
	mode    fs.FileMode
}

// tree records every entry under dir (the root's own mode as ".").
func tree(t *testing.T, dir string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		n := node{mode: info.Mode()}
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n.content = string(b)
		}
		out[filepath.ToSlash(rel)] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffTrees(t *testing.T, what string, want, got map[string]node) {
	t.Helper()
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s: %s missing", what, p)
		case g.mode != w.mode:
			t.Errorf("%s: %s mode %v, want %v", what, p, g.mode, w.mode)
		case g.content != w.content:
			t.Errorf("%s: %s content differs", what, p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: unexpected %s", what, p)
		}
	}
}

// sameButSnapshot checks that the brain is as before the destructive
// drill but for what its snapshot step rewrites: the lock and receipts.
func sameButSnapshot(t *testing.T, before map[string]node, brain string) {
	t.Helper()
	after := tree(t, brain)
	for _, p := range []string{"bundle.lock.json", "receipts.ndjson"} {
		delete(before, p)
		delete(after, p)
	}
	diffTrees(t, "brain after the destructive drill", before, after)
}

// siblings lists the brain's parent directory: the destructive drill must
// leave nothing behind there.
func siblings(t *testing.T, brain string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Dir(brain))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func emptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("%s still holds %d entries (scratch not removed)", dir, len(ents))
	}
}

func stageNames(r Report) string {
	var names []string
	for _, s := range r.Stages {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

func TestDrill(t *testing.T) {
	w := newWorld(t)
	brain := w.brain("alpha")
	var blob string

	t.Run("destructive: snapshots, publishes, wipes and restores", func(t *testing.T) {
		before := tree(t, brain)
		beside := siblings(t, brain)
		o := w.opts("alpha")
		o.Destructive = true
		rep, err := Run(t.Context(), o)
		if err != nil {
			t.Fatalf("%v\n%+v", err, rep)
		}
		if !rep.Passed() || rep.Snapshot != "snapshotted" || rep.TxHash == "" || rep.GasUsed == 0 {
			t.Fatalf("report %+v", rep)
		}
		if got, want := stageNames(rep), "hash,pack,upload,verify,publish,manifest,wipe,ens-read,download,unpack,compare,rehash,putback"; got != want {
			t.Errorf("stages %s, want %s", got, want)
		}
		blob = rep.BlobID
		if got := w.pointer("alpha.hermes.eth"); got != blob {
			t.Errorf("pointer %s, drill restored %s", got, blob)
		}
		st, err := state.LoadAgent(state.AgentPath(w.dn.Config.StateDir, "alpha"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Last == nil || st.Last.BlobID != blob || st.Published != blob || st.Pending != nil {
			t.Errorf("state not consistent with the publish: %+v", st)
		}
		sameButSnapshot(t, before, brain)
		if got := siblings(t, brain); strings.Join(got, ",") != strings.Join(beside, ",") {
			t.Errorf("left beside the brain: %v, before %v", got, beside)
		}
		emptyDir(t, o.ScratchDir)
	})

	t.Run("mode b beside a daemon: no lock taken, nothing written", func(t *testing.T) {
		// A daemon holds the state directory.
		sd, err := compose.OpenState(w.dn.Config)
		if err != nil {
			t.Fatal(err)
		}
		defer sd.Close()
		before, stBefore := tree(t, brain), tree(t, w.dn.Config.StateDir)
		o := w.opts("alpha")
		rep, err := Run(t.Context(), o)
		if err != nil {
			t.Fatalf("%v\n%+v", err, rep)
		}
		if got, want := stageNames(rep), "ens-read,download,unpack,rehash,trees,compare"; got != want {
			t.Errorf("stages %s, want %s", got, want)
		}
		if rep.BlobID != blob || rep.Files != 8 || rep.Bytes < 2<<20 || rep.BlobBytes == 0 || len(rep.Mismatches) != 0 || len(rep.MovedOn) != 0 ||
			rep.Taken.IsZero() || !strings.Contains(rep.Source, "ENS record") || rep.TxHash != "" {
			t.Errorf("report %+v", rep)
		}
		diffTrees(t, "live brain", before, tree(t, brain))
		diffTrees(t, "state directory", stBefore, tree(t, w.dn.Config.StateDir))
		emptyDir(t, o.ScratchDir)
		var text bytes.Buffer
		rep.WriteText(&text)
		t.Logf("\n%s", text.String())
		if !strings.Contains(text.String(), "PASS:") || !strings.Contains(text.String(), "read-only") {
			t.Errorf("human report:\n%s", text.String())
		}
	})

	t.Run("mode a needs no chain", func(t *testing.T) {
		o := w.opts("alpha")
		o.Config = noChain(t, w.dn.Config)
		o.Mode = ModeA
		o.Keep = true
		rep, err := Run(t.Context(), o)
		if err != nil {
			t.Fatalf("%v\n%+v", err, rep)
		}
		if got, want := stageNames(rep), "head,download,unpack,rehash,trees,compare"; got != want {
			t.Errorf("stages %s, want %s", got, want)
		}
		if rep.BlobID != blob || !strings.Contains(rep.Source, "state directory") || !strings.Contains(rep.Source, "published") {
			t.Errorf("blob %s from %q, want %s from the state directory", rep.BlobID, rep.Source, blob)
		}
		if rep.ScratchDir == "" || !strings.HasPrefix(rep.ScratchDir, o.ScratchDir) {
			t.Fatalf("scratch dir %q not kept", rep.ScratchDir)
		}
		if _, err := os.Stat(filepath.Join(rep.ScratchDir, "brain", "memory.db")); err != nil {
			t.Errorf("kept scratch: %v", err)
		}
		// Mode b without the chain: one error that says so.
		o = w.opts("alpha")
		o.Config = noChain(t, w.dn.Config)
		if rep, err := Run(t.Context(), o); !errors.Is(err, ens.ErrUnavailable) || rep.Passed() {
			t.Errorf("mode b without a chain: %v", err)
		}
	})

	t.Run("the brain moved on: told apart, not a failure", func(t *testing.T) {
		writeFile(t, filepath.Join(brain, "skills/new.md"), []byte("a new skill\n"), 0o644)
		writeFile(t, filepath.Join(brain, "system.md"), []byte("You are a test agent, revised.\n"), 0o644)
		if err := os.Remove(filepath.Join(brain, "empty.txt")); err != nil {
			t.Fatal(err)
		}
		defer func() {
			os.Remove(filepath.Join(brain, "skills/new.md"))
			writeFile(t, filepath.Join(brain, "system.md"), []byte("You are a test agent.\n"), 0o644)
			writeFile(t, filepath.Join(brain, "empty.txt"), nil, 0o644)
		}()
		rep, err := Run(t.Context(), w.opts("alpha"))
		if err != nil {
			t.Fatalf("%v\n%+v", err, rep)
		}
		got := map[string]string{}
		for _, m := range rep.MovedOn {
			got[m.Path] = m.Kind
		}
		want := map[string]string{"skills/new.md": "missing", "system.md": "size", "empty.txt": "extra"}
		if fmt.Sprint(got) != fmt.Sprint(want) || len(rep.Mismatches) != 0 {
			t.Errorf("moved on %v (want %v), mismatches %v", got, want, rep.Mismatches)
		}
		var text bytes.Buffer
		rep.WriteText(&text)
		if !strings.Contains(text.String(), "moved on since the snapshot: 3 entries") {
			t.Errorf("human report:\n%s", text.String())
		}
	})

	t.Run("an edit is snapshotted first by the destructive drill", func(t *testing.T) {
		writeFile(t, filepath.Join(brain, "skills/new.md"), []byte("a new skill\n"), 0o644)
		o := w.opts("alpha")
		o.Destructive = true
		rep, err := Run(t.Context(), o)
		if err != nil {
			t.Fatalf("%v\n%+v", err, rep)
		}
		if rep.Snapshot != "snapshotted" || rep.BlobID == blob || rep.Version != 2 {
			t.Fatalf("report %+v", rep)
		}
		if got := w.pointer("alpha.hermes.eth"); got != rep.BlobID {
			t.Errorf("pointer %s, want %s", got, rep.BlobID)
		}
		blob = rep.BlobID
	})

	// File-system fidelity in the drills: a file under two names, a set-id
	// program, setgid and sticky directories and a 0750 brain directory.
	// The destructive drill snapshots them (revision 2 trees), restores
	// them, and puts back what a restore strips (saying so): the brain
	// ends as it was, links included. The read-only drill then finds no
	// difference, only notes of what the restore stripped.
	t.Run("links, special bits and the root: notes, not differences", func(t *testing.T) {
		writeFile(t, filepath.Join(brain, "tools/suid"), []byte("#!/bin/sh\n"), 0o755|fs.ModeSetuid|fs.ModeSetgid)
		if err := os.Link(filepath.Join(brain, "skills/reentrancy.md"), filepath.Join(brain, "skills/alias.md")); err != nil {
			t.Fatal(err)
		}
		for p, m := range map[string]fs.FileMode{"shared": 0o775 | fs.ModeSetgid, "tmp": 0o777 | fs.ModeSticky} {
			if err := os.Mkdir(filepath.Join(brain, p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(brain, p), m); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(brain, 0o750); err != nil {
			t.Fatal(err)
		}
		sameFile := func() bool {
			a, err1 := os.Stat(filepath.Join(brain, "skills/reentrancy.md"))
			b, err2 := os.Stat(filepath.Join(brain, "skills/alias.md"))
			return err1 == nil && err2 == nil && os.SameFile(a, b)
		}
		before := tree(t, brain)

		o := w.opts("alpha")
		o.Destructive = true
		rep, err := Run(t.Context(), o)
		if err != nil {
			t.Fatalf("%v\n%+v", err, rep)
		}
		notes := strings.Join(rep.Notes, "\n")
		if rep.Snapshot != "snapshotted" || len(rep.Mismatches) != 0 ||
			!strings.Contains(notes, "tools/suid: special bits differ (live 6755, restored 0755): a restore never sets setuid or setgid on a file") ||
			!strings.Contains(notes, "tools/suid: its special bits put back as they were before the wipe (6755; restored 0755)") {
			t.Fatalf("report %+v", rep)
		}
		sameButSnapshot(t, before, brain)
		if !sameFile() {
			t.Error("skills/alias.md is no longer a hard link of skills/reentrancy.md")
		}
		blob = rep.BlobID

		rep, err = Run(t.Context(), w.opts("alpha"))
		if err != nil {
			t.Fatalf("%v\n%+v", err, rep)
		}
		notes = strings.Join(rep.Notes, "\n")
		var trees string
		for _, st := range rep.Stages {
			if st.Name == "trees" {
				trees = st.Detail
			}
		}
		if rep.BlobID != blob || len(rep.Mismatches) != 0 || len(rep.MovedOn) != 0 ||
			!strings.Contains(notes, "restored without a special bit: tools/suid: setuid+setgid not restored (recorded 6755, restored 0755)") ||
			!strings.Contains(notes, "tools/suid: special bits differ") || strings.Contains(notes, "hard link") ||
			!strings.Contains(trees, "1 hard links, as links") || !strings.Contains(trees, "and the brain directory") {
			t.Errorf("read-only drill: report %+v", rep)
		}
	})

	t.Run("destructive: a failure after the wipe puts the brain back", func(t *testing.T) {
		before := tree(t, brain)
		beside := siblings(t, brain)
		o := w.opts("alpha")
		o.Destructive = true
		o.hooks.afterWipe = func() {
			if _, err := os.Stat(brain); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("brain still in place after the wipe: %v", err)
			}
			w.tamper(blob)
		}
		rep, err := Run(t.Context(), o)
		if !errors.Is(err, cipher.ErrAuth) && !errors.Is(err, repo.ErrAuth) || rep.Passed() {
			t.Fatalf("err %v, report %+v", err, rep)
		}
		if !strings.Contains(strings.Join(rep.Notes, "\n"), "put back") {
			t.Errorf("notes %v", rep.Notes)
		}
		diffTrees(t, "brain after failed destructive drill", before, tree(t, brain))
		if got := siblings(t, brain); strings.Join(got, ",") != strings.Join(beside, ",") {
			t.Errorf("left beside the brain: %v, before %v", got, beside)
		}
		emptyDir(t, o.ScratchDir)
	})

	// The blob is now tampered with; the brain has not changed, so the
	// destructive drill's snapshot step finds nothing to do, and every
	// restore reads those bytes.
	t.Run("tampered blob fails", func(t *testing.T) {
		before := tree(t, brain)
		for _, mode := range []Mode{ModeB, ModeA} {
			o := w.opts("alpha")
			o.Mode = mode
			if mode == ModeA {
				o.BlobID = blob
			}
			rep, err := Run(t.Context(), o)
			if !errors.Is(err, cipher.ErrAuth) && !errors.Is(err, repo.ErrAuth) || rep.Result != "fail" {
				t.Fatalf("mode %s: err %v, report %+v", mode, err, rep)
			}
			if last := rep.Stages[len(rep.Stages)-1]; last.Name != "unpack" || last.OK {
				t.Errorf("mode %s: failed at %+v", mode, last)
			}
			emptyDir(t, o.ScratchDir)
		}
		o := w.opts("alpha")
		o.Destructive = true
		rep, err := Run(t.Context(), o)
		if !errors.Is(err, ErrRefused) || !errors.Is(err, walrus.ErrMismatch) {
			t.Fatalf("destructive: err %v, report %+v", err, rep)
		}
		if strings.Contains(stageNames(rep), "wipe") {
			t.Errorf("wiped despite the refusal: %s", stageNames(rep))
		}
		diffTrees(t, "brain after refused drill", before, tree(t, brain))
	})
}

// noChain is cfg with the chain's RPC at an address where nothing
// listens.
func noChain(t *testing.T, cfg *config.Config) *config.Config {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := *cfg
	c.Chain.RPC = "http://" + addr
	return &c
}

func TestDrillAgentWithoutENS(t *testing.T) {
	w := newWorld(t)
	o := w.opts("solo")
	if _, err := Run(t.Context(), o); !errors.Is(err, ErrOptions) {
		t.Fatalf("mode b without ENS name: %v", err)
	}
	o.Mode = ModeA
	if _, err := Run(t.Context(), o); !errors.Is(err, ErrNoSnapshot) || !strings.Contains(err.Error(), "--blob") {
		t.Fatalf("mode a before any snapshot: %v", err)
	}
	before := tree(t, w.brain("solo"))
	o.Destructive = true
	rep, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("destructive: %v\n%+v", err, rep)
	}
	if strings.Contains(stageNames(rep), "publish") {
		t.Errorf("published for an agent without a name: %s", stageNames(rep))
	}
	o.Destructive = false
	if rep, err := Run(t.Context(), o); err != nil || !strings.Contains(rep.Source, "not published (no ENS name)") {
		t.Fatalf("mode a: %v\n%+v", err, rep)
	}
	after := tree(t, w.brain("solo"))
	for _, p := range []string{"bundle.lock.json", "receipts.ndjson"} {
		delete(before, p)
		delete(after, p)
	}
	diffTrees(t, "solo brain", before, after)
	o.Destructive = true

	t.Run("refusals", func(t *testing.T) {
		sd, err := compose.OpenState(w.dn.Config)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Run(t.Context(), o)
		ro := o
		ro.Destructive = false
		rep, roErr := Run(t.Context(), ro)
		sd.Close()
		if !errors.Is(err, state.ErrLocked) || !strings.Contains(err.Error(), "stop hermesd") {
			t.Errorf("destructive with the state locked: %v", err)
		}
		if roErr != nil || !rep.Passed() {
			t.Errorf("read-only with the state locked: %v", roErr)
		}

		lnk := filepath.Join(w.brain("solo"), "link")
		if err := os.Symlink("system.md", lnk); err != nil {
			t.Fatal(err)
		}
		_, err = Run(t.Context(), o)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "symlink link") {
			t.Errorf("destructive with a symlink: %v", err)
		}
		o.Destructive = false
		rep, err = Run(t.Context(), o)
		if err != nil || !strings.Contains(strings.Join(rep.Notes, "\n"), "link is a symlink") {
			t.Errorf("non-destructive with a symlink: %v, notes %v", err, rep.Notes)
		}

		// Once the brain's files change, the snapshot holds the symlink:
		// the destructive drill restores it as the same symlink, and
		// compares it as a symlink (its target).
		sys := filepath.Join(w.brain("solo"), "system.md")
		old, err := os.ReadFile(sys)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sys, append(old, "with a link\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		o.Destructive = true
		rep, err = Run(t.Context(), o)
		if err != nil || !rep.Passed() {
			t.Fatalf("destructive with a snapshotted symlink: %v\n%+v", err, rep)
		}
		if got, err := os.Readlink(lnk); err != nil || got != "system.md" {
			t.Errorf("after the destructive drill: link -> %q (%v)", got, err)
		}
		if st := rep.Stages[len(rep.Stages)-1]; !strings.Contains(strings.Join(stageDetails(rep), "\n"), "1 symlinks identical") {
			t.Errorf("compare does not count the symlink: %+v", st)
		}
		// A symlink with another target than the snapshot's is a
		// difference (the read-only drill, against the live brain).
		os.Remove(lnk)
		if err := os.Symlink("elsewhere.md", lnk); err != nil {
			t.Fatal(err)
		}
		o.Destructive = false
		rep, err = Run(t.Context(), o)
		if !errors.Is(err, ErrMismatch) && !strings.Contains(fmt.Sprint(rep.MovedOn), "symlink") {
			t.Errorf("a symlink with another target: %v, moved on %v", err, rep.MovedOn)
		}
		os.Remove(lnk)
		if err := os.WriteFile(sys, old, 0o644); err != nil {
			t.Fatal(err)
		}
		o.Destructive = true

		o.BlobID = strings.Repeat("A", 43)
		if _, err := Run(t.Context(), o); !errors.Is(err, ErrRefused) {
			t.Errorf("destructive with another blob: %v", err)
		}
	})

	t.Run("cancelled after the wipe: brain put back", func(t *testing.T) {
		before := tree(t, w.brain("solo"))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		o := w.opts("solo")
		o.Mode, o.Destructive = ModeA, true
		o.hooks.afterWipe = cancel
		rep, err := Run(ctx, o)
		if !errors.Is(err, context.Canceled) || rep.Passed() {
			t.Fatalf("err %v, report %+v", err, rep)
		}
		diffTrees(t, "brain", before, tree(t, w.brain("solo")))
	})

	t.Run("brain_dir is a symlink", func(t *testing.T) {
		o := w.opts("solo")
		o.Mode = ModeA
		ac, _ := o.Config.Agent("solo")
		saved := ac.BrainDir
		link := filepath.Join(t.TempDir(), "brain-link")
		if err := os.Symlink(saved, link); err != nil {
			t.Fatal(err)
		}
		ac.BrainDir = link
		defer func() { ac.BrainDir = saved }()
		if rep, err := Run(t.Context(), o); err != nil {
			t.Fatalf("non-destructive through a link: %v\n%+v", err, rep)
		}
		o.Destructive = true
		if _, err := Run(t.Context(), o); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "symlink") {
			t.Fatalf("destructive through a link: %v", err)
		}
		if st, err := os.Lstat(link); err != nil || st.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("link replaced: %v %v", st, err)
		}
	})

	t.Run("missing brain", func(t *testing.T) {
		o := w.opts("solo")
		o.Mode = ModeA
		ac, _ := o.Config.Agent("solo")
		saved := ac.BrainDir
		ac.BrainDir = filepath.Join(t.TempDir(), "none")
		defer func() { ac.BrainDir = saved }()
		if _, err := Run(t.Context(), o); !errors.Is(err, ErrNoBrain) {
			t.Errorf("missing brain: %v", err)
		}
	})
}

// A blob that is not on Walrus fails the drill at the download stage,
// and the report says what failed instead of "0 B from , 0 attempt(s)".
func TestDrillMissingBlob(t *testing.T) {
	w := newWorld(t)
	w.brain("alpha")
	o := w.opts("alpha")
	o.Mode = ModeA
	o.BlobID = strings.Repeat("A", 43)
	rep, err := Run(t.Context(), o)
	if err == nil || rep.Passed() {
		t.Fatalf("err %v, report %+v", err, rep)
	}
	last := rep.Stages[len(rep.Stages)-1]
	if last.Name != "download" || last.OK || last.Error == "" {
		t.Fatalf("last stage %+v", last)
	}
	for _, s := range rep.Stages {
		if strings.Contains(s.Detail, "0 B from") || strings.Contains(s.Detail, "0 attempt") {
			t.Errorf("stage %s reports an empty download: %q", s.Name, s.Detail)
		}
	}
	emptyDir(t, o.ScratchDir)
}

func stageDetails(rep Report) []string {
	var out []string
	for _, s := range rep.Stages {
		out = append(out, s.Name+": "+s.Detail)
	}
	return out
}
