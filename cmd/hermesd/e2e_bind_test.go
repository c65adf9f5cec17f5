package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/wait"
	"github.com/hermesd/hermesd/internal/walrus"
)

// replayMsg is what every refusal of a replay says: "... than the
// pointer names" for a v3 head named with its digest, "... than the blob
// id names" for a whole blob checked against its Walrus blob id.
const replayMsg = "the aggregator served other bytes than the"

// TestE2EBindReplay is the replay of docs/format-v3.md §14: the
// aggregator answers the ENS record's id with the same agent's older
// snapshot, genuine in every other way (AEAD, ids, bundle hash, agent).
// Every path refuses it with exit 6 and the reason, installs nothing and
// writes no byte into the brain: `hermesd restore` (the cold restore and
// --blob, with the reference or a bare id), the drill in modes a and b,
// and the daemon's cold start on a fresh machine (its agent failed, the
// reason in its status). A v3 head — a blob of its own or a quilt patch —
// is named with its digest; v1 and v2 records stay plain blob ids, which
// the reference runtime reads, and are bound by the blob id check. Only a
// bare patch id nobody recorded a digest for restores what is served,
// with a warning.
func TestE2EBindReplay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		format  string
		noQuilt bool
		patch   bool // the head is a quilt patch
	}{
		{"v3 blob", "v3", true, false},
		{"v3 patch", "v3", false, true},
		{"v2", "v2", true, false},
		{"v1", "v1", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newE2EWorldWith(t, devnet.Options{Format: tc.format, NoQuilts: tc.noQuilt},
				devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
			cfg, brain := w.dn.ConfigPath, w.brain("alpha")
			write := func(rel, content string) {
				t.Helper()
				p := filepath.Join(brain, rel)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("system.md", "You are alpha, before.\n")
			write("skills/old.md", "an old skill\n")
			settleAgents(t, w, "alpha")
			older, olderHash := w.pointer("alpha.hermes.eth"), dirHash(t, brain)
			write("system.md", "You are alpha, after.\n")
			write("skills/new.md", "a skill learned since\n")
			settleAgents(t, w, "alpha")
			newer, newerHash := w.pointer("alpha.hermes.eth"), dirHash(t, brain)
			ref, err := headref.Parse(newer)
			switch {
			case err != nil:
				t.Fatalf("the record %q: %v", newer, err)
			case ref.Bound != (tc.format == "v3"):
				t.Fatalf("the %s record %q: a digest is for v3 heads only", tc.format, newer)
			case walrus.IsPatchID(ref.ID) != tc.patch:
				t.Fatalf("the record %q: want a patch %v", newer, tc.patch)
			case olderHash == newerHash:
				t.Fatal("the two snapshots hold the same state")
			}
			t.Logf("record %s (%d characters)", newer, len(newer))

			// The aggregator serves the older snapshot under the newer id.
			w.dn.Walrus.Forge(ref.ID, packBytes(t, w.dn, older))
			live := hashedTree(t, brain)
			unchanged := func(what string) {
				t.Helper()
				if d := sameTree(live, hashedTree(t, brain)); len(d) > 0 {
					t.Fatalf("%s changed the live brain: %v", what, d)
				}
			}
			// refused checks a command's answer to the replay: exit 6 and
			// the reason on stderr.
			refused := func(what string, code int, stderr string) {
				t.Helper()
				if code != exitAuth || !strings.Contains(stderr, replayMsg) {
					t.Fatalf("%s: exit %d, stderr %q; want 6 and %q", what, code, lastLine(stderr), replayMsg)
				}
				t.Logf("%s: exit %d: %s", what, code, lastLine(stderr))
			}

			for _, mode := range []string{"b", "a"} {
				t.Run("drill mode "+mode, func(t *testing.T) {
					code, stdout, stderr := w.runOnce("drill", "-config", cfg, "--mode", mode, "alpha")
					// The report names the failed stage and the reason.
					if code != exitAuth || !strings.Contains(stdout, replayMsg) || !strings.Contains(stdout, "FAIL") {
						t.Fatalf("exit %d, report %q, stderr %q", code, stdout, lastLine(stderr))
					}
					unchanged("the drill")
				})
			}

			t.Run("restore --blob", func(t *testing.T) {
				// The record's value, and the bare id: the agent's state
				// knows its digest (a patch), or the blob id check binds
				// it (a blob).
				ids := []string{newer}
				if ref.Bound {
					ids = append(ids, ref.ID)
				}
				for _, id := range ids {
					dir := filepath.Join(t.TempDir(), "restored")
					code, _, stderr := w.runOnce("restore", "-config", cfg, "--blob", id, "--dir", dir, "alpha")
					refused("restore --blob "+id, code, stderr)
					if left := listDir(t, filepath.Dir(dir)); left != nil {
						t.Fatalf("a refused restore left %v", left)
					}
				}
				unchanged("restore --dir")
			})

			// A cold restore: the brain is gone (moved aside here, put
			// back after).
			aside := brain + ".live"
			if err := os.Rename(brain, aside); err != nil {
				t.Fatal(err)
			}
			parent := listDir(t, filepath.Dir(brain))
			untouched := func(what string) {
				t.Helper()
				if has := listDir(t, brain); len(has) > 0 {
					t.Fatalf("%s wrote into the brain: %v", what, has)
				}
				if got := listDir(t, filepath.Dir(brain)); !slices.Equal(got, parent) && !slices.Equal(got, append(slices.Clone(parent), "alpha")) {
					t.Fatalf("%s left %v beside the brain (before: %v)", what, got, parent)
				}
			}
			t.Run("restore", func(t *testing.T) {
				code, _, stderr := w.runOnce("restore", "-config", cfg, "alpha")
				refused("restore", code, stderr)
				untouched("the cold restore")
			})

			// A fresh machine: no state directory either, so the record is
			// all it has.
			if err := os.RemoveAll(w.dn.Config.StateDir); err != nil {
				t.Fatal(err)
			}
			t.Run("daemon cold start", func(t *testing.T) {
				p := w.run()
				var st agent.Status
				wait.Within(t, 30*time.Second, "alpha to be restored or failed", func() bool {
					rep, err := w.status()
					if err != nil || len(rep.Agents) != 1 {
						return false
					}
					st = rep.Agents[0]
					return st.Phase == agent.PhaseFailed || st.Phase == agent.PhaseReady
				})
				if st.Phase != agent.PhaseFailed || !strings.Contains(st.Reason, replayMsg) {
					t.Fatalf("alpha is %s (%q), want failed: %s", st.Phase, st.Reason, replayMsg)
				}
				untouched("the daemon's cold start")
				t.Logf("alpha failed: %s", st.Reason)
				p.signal(syscall.SIGTERM)
				p.wait(15 * time.Second)
			})

			if tc.patch {
				// A bare patch id nobody recorded a digest for (the state
				// directory is gone): the patch cannot be checked against
				// its id without its whole quilt, so the older brain
				// restores, with the warning that names the risk.
				dir := filepath.Join(t.TempDir(), "restored")
				code, stdout, stderr := w.runOnce("restore", "-config", cfg, "--blob", ref.ID, "--dir", dir, "alpha")
				if code != exitOK || !strings.Contains(stdout, "warning: ") || dirHash(t, dir) != olderHash {
					t.Fatalf("restore --blob of a bare patch id: exit %d, stdout %q, stderr %q: want the older brain (%s) and a warning",
						code, stdout, lastLine(stderr), olderHash)
				}
			}

			if err := os.RemoveAll(brain); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(aside, brain); err != nil {
				t.Fatal(err)
			}
		})
	}
}
