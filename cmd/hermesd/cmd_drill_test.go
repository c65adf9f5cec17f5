package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
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
		Shards: e2eShards,
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

// noChainConfig is a copy of the devnet's configuration whose chain.rpc
// is an address where nothing listens.
func noChainConfig(t *testing.T, devnetConfig string) string {
	t.Helper()
	b, err := os.ReadFile(devnetConfig)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	body := regexp.MustCompile(`(?m)^  rpc: .*$`).ReplaceAllString(string(b), "  rpc: http://"+dead)
	p := filepath.Join(t.TempDir(), "hermesd.yml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
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

	t.Run("nothing to drill yet", func(t *testing.T) {
		if _, code, err := w.run("alpha", "--mode", "a"); code != exitNotFound || !strings.Contains(err.Error(), "--blob ID") {
			t.Errorf("mode a: exit %d: %v", code, err)
		}
		if _, code, err := w.run("alpha"); code != exitNotFound {
			t.Errorf("mode b: exit %d: %v", code, err)
		}
	})

	t.Run("destructive snapshots and publishes first", func(t *testing.T) {
		before := drillTree(t, w.brain)
		out, code, err := w.run("--destructive", "alpha")
		if code != exitOK {
			t.Fatalf("exit %d: %v\n%s", code, err, out)
		}
		for _, want := range []string{"DESTRUCTIVE", "publish", "brain back in place, byte-identical", "snapshot taken now"} {
			if !strings.Contains(out, want) {
				t.Errorf("report lacks %q:\n%s", want, out)
			}
		}
		after := drillTree(t, w.brain)
		delete(after, "bundle.lock.json") // the snapshot step wrote them
		delete(after, "receipts.ndjson")
		sameDrillTree(t, "brain", before, after)
	})

	t.Run("mode b beside a running hermesd", func(t *testing.T) {
		sd, err := compose.OpenState(w.dn.Config)
		if err != nil {
			t.Fatal(err)
		}
		defer sd.Close()
		out, code, err := w.run("alpha")
		if code != exitOK {
			t.Fatalf("exit %d: %v\n%s", code, err, out)
		}
		for _, want := range []string{"mode b: ENS pointer cold boot", "read-only", "ens-read", "rehash", "trees", "\nPASS: 7 files"} {
			if !strings.Contains(out, want) {
				t.Errorf("report lacks %q:\n%s", want, out)
			}
		}
		// The destructive drill changes the brain: it needs the state.
		_, code, err = w.run("alpha", "--destructive")
		if code != exitLocked || !strings.Contains(err.Error(), "stop hermesd first") {
			t.Fatalf("destructive: exit %d: %v", code, err)
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
		if rep.Result != "pass" || rep.Mode != drill.ModeA || rep.Files != 7 || !strings.Contains(rep.Source, "state directory") ||
			rep.BlobBytes == 0 || rep.Mismatches == nil || rep.MovedOn == nil || len(rep.Stages) == 0 {
			t.Fatalf("report %+v", rep)
		}
		if !strings.Contains(out, `"mismatches":[]`) || !strings.Contains(out, `"movedOn":[]`) || !strings.Contains(out, `"ms":`) {
			t.Errorf("JSON lacks fields: %s", out)
		}
		for _, s := range rep.Stages {
			if s.Name == "ens-read" || !s.OK {
				t.Errorf("stage %+v", s)
			}
		}
		blob = rep.BlobID
	})

	t.Run("without a chain", func(t *testing.T) {
		cfg := noChainConfig(t, w.dn.ConfigPath)
		var out, errOut bytes.Buffer
		err := Run(t.Context(), []string{"drill", "-config", cfg, "--scratch", t.TempDir(), "--mode", "a", "alpha"}, strings.NewReader(""), &out, &errOut)
		if err != nil {
			t.Fatalf("mode a without a chain: %v\n%s", err, out.String())
		}
		out.Reset()
		code := report(&errOut, Run(t.Context(), []string{"drill", "-config", cfg, "--scratch", t.TempDir(), "alpha"}, strings.NewReader(""), &out, &errOut))
		line := strings.TrimSpace(errOut.String())
		if code != exitFailure || strings.Count(line, "\n") != 0 || !strings.HasPrefix(line, "hermesd: chain unreachable at http://127.0.0.1:") ||
			!strings.Contains(line, "start the devnet with `make devnet`") || !strings.Contains(line, "--mode a needs no chain") {
			t.Fatalf("mode b without a chain: exit %d, stderr %q", code, line)
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
