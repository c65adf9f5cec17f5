package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/drill"
)

// drillWorld is a devnet with one agent, "alpha", whose seeded brain has
// nested directories, a dotfile, several modes, a 1 MiB file and an empty
// file.
type drillWorld struct {
	t     *testing.T
	dn    *devnet.Devnet
	brain string
}

func newDrillWorld(t *testing.T) *drillWorld {
	t.Helper()
	dn, err := devnet.Start(t.Context(), devnet.Options{
		Dir:    t.TempDir(),
		Agents: []devnet.Agent{{ID: "alpha", ENSName: "alpha.hermes.eth"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dn.Close() })
	w := &drillWorld{t: t, dn: dn, brain: filepath.Join(dn.Dir, "brains", "alpha")}
	big := make([]byte, 1<<20)
	rand.Read(big)
	for _, f := range []struct {
		path string
		data []byte
		mode fs.FileMode
	}{
		{"system.md", []byte("You are a test agent.\n"), 0o644},
		{"skills/a/deep.md", []byte("deep skill\n"), 0o600},
		{"patterns/p.md", []byte("pattern\n"), 0o640},
		{"bin/tool", []byte("#!/bin/sh\n"), 0o755},
		{".env", []byte("dot\n"), 0o600},
		{"memory.db", big, 0o644},
		{"empty", nil, 0o644},
	} {
		p := filepath.Join(w.brain, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// run runs `hermesd drill -config <devnet config> args...` in-process.
func (w *drillWorld) run(args ...string) (stdout string, code int, err error) {
	w.t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"drill", "-config", w.dn.ConfigPath, "--scratch", w.t.TempDir()}, args...)
	err = Run(w.t.Context(), args, strings.NewReader(""), &out, &errOut)
	if testing.Verbose() {
		w.t.Logf("hermesd %s → exit %d\n%s%s", strings.Join(args, " "), exitCode(err), out.String(), errOut.String())
	}
	return out.String(), exitCode(err), err
}

// drillTree maps every entry under dir (the root as ".") to its mode and
// contents.
func drillTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		v := info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += ":" + string(b)
		}
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameDrillTree(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for p, v := range want {
		if got[p] != v {
			t.Errorf("%s: %s differs or is missing", what, p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: unexpected %s", what, p)
		}
	}
}

func TestDrillCommand(t *testing.T) {
	t.Parallel()
	w := newDrillWorld(t)
	var blob string

	t.Run("mode b passes", func(t *testing.T) {
		out, code, err := w.run("alpha")
		if code != exitOK {
			t.Fatalf("exit %d: %v\n%s", code, err, out)
		}
		for _, want := range []string{"mode b: ENS pointer cold boot", "ens-read", "publish", "rehash", "\nPASS: 7 files"} {
			if !strings.Contains(out, want) {
				t.Errorf("report lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("mode a, flags after the agent, JSON", func(t *testing.T) {
		out, code, err := w.run("alpha", "--mode", "a", "--json")
		if code != exitOK {
			t.Fatalf("exit %d: %v\n%s", code, err, out)
		}
		var rep drill.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if rep.Result != "pass" || rep.Mode != drill.ModeA || rep.Snapshot != "unchanged" || rep.Files != 7 ||
			rep.BlobBytes == 0 || rep.Mismatches == nil || len(rep.Stages) == 0 {
			t.Fatalf("report %+v", rep)
		}
		if !strings.Contains(out, `"mismatches":[]`) || !strings.Contains(out, `"ms":`) {
			t.Errorf("JSON lacks fields: %s", out)
		}
		for _, s := range rep.Stages {
			if s.Name == "ens-read" || !s.OK {
				t.Errorf("stage %+v", s)
			}
		}
		blob = rep.BlobID
	})

	t.Run("destructive on the devnet's throwaway brain", func(t *testing.T) {
		before := drillTree(t, w.brain)
		out, code, err := w.run("--destructive", "alpha")
		if code != exitOK {
			t.Fatalf("exit %d: %v\n%s", code, err, out)
		}
		if !strings.Contains(out, "DESTRUCTIVE") || !strings.Contains(out, "brain back in place, byte-identical") {
			t.Errorf("report:\n%s", out)
		}
		sameDrillTree(t, "brain", before, drillTree(t, w.brain))
	})

	t.Run("refused while hermesd holds the state", func(t *testing.T) {
		sd, err := compose.OpenState(w.dn.Config)
		if err != nil {
			t.Fatal(err)
		}
		defer sd.Close()
		_, code, err := w.run("alpha")
		if code != exitLocked || !strings.Contains(err.Error(), "stop hermesd") {
			t.Fatalf("exit %d: %v", code, err)
		}
	})

	t.Run("tampered blob fails", func(t *testing.T) {
		flipPackByte(t, w.dn, blob, 0x80)
		before := drillTree(t, w.brain)

		out, code, err := w.run("alpha")
		if code != exitAuth || !strings.Contains(err.Error(), "decrypt") || !strings.Contains(out, "FAIL:") {
			t.Fatalf("mode b: exit %d: %v\n%s", code, err, out)
		}
		out, code, err = w.run("alpha", "--mode=a", "--blob", blob, "--json")
		var rep drill.Report
		if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil || code != exitAuth || rep.Result != "fail" || rep.Error == "" {
			t.Fatalf("mode a: exit %d: %v, %v\n%s", code, err, jerr, out)
		}
		out, code, err = w.run("alpha", "--destructive")
		if code != exitMismatch || !strings.Contains(err.Error(), "refusing to wipe") {
			t.Fatalf("destructive: exit %d: %v\n%s", code, err, out)
		}
		sameDrillTree(t, "brain", before, drillTree(t, w.brain))
	})

	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{},
			{"alpha", "beta"},
			{"--mode", "c", "alpha"},
			{"--blob", blob, "alpha"},
			{"nobody"},
		} {
			if _, code, err := w.run(args...); code != exitUsage {
				t.Errorf("%v: exit %d, %v", args, code, err)
			}
		}
	})
}
