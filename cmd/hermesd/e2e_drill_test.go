package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EReadmeDrill follows the README's drill steps (Amnesia drills) as
// written, with the devnet's directory and ports of its own, as separate
// processes like a user's terminals:
//
//  1. make run (hermesd-devnet -- hermesd run); beside it, with
//     HERMESD_CONFIG set, `hermesd drill auditor` and `--mode a` pass and
//     leave brain and state as they were; `--destructive` exits 5 saying
//     to stop hermesd.
//  2. make devnet (hermesd-devnet alone) and `hermesd run` in another
//     terminal, the daemon stopped: `drill auditor` and `drill
//     --destructive auditor` pass.
//  3. The devnet stopped too: `drill auditor` exits 1 with one line saying
//     where the chain was looked for and how to start it; with `hermesd
//     walrus serve --dir DIR/walrus` serving the devnet's blobs, `drill
//     --mode a auditor` passes without any chain.
func TestE2EReadmeDrill(t *testing.T) {
	t.Parallel()
	hermesd, devnetBin := hermesdBinary(t), devnetBinary(t)
	w := newProcessWorld(t)
	dir := t.TempDir()
	seed := seedDir(t, map[string]string{"system.md": "You are a test agent.\n", "skills/a.md": "skill a\n", "memory.db": strings.Repeat("page\n", 4000)})
	chainPort, walrusPort := loopbackPort(t), loopbackPort(t)
	devnetArgs := []string{"-dir", dir, "-seed", seed, "-chain-port", chainPort, "-walrus-port", walrusPort, "-http", w.http}
	cfg := filepath.Join(dir, "hermesd.yml")
	w.extraEnv = []string{"HERMESD_CONFIG=" + cfg} // export HERMESD_CONFIG=.devnet/hermesd.yml
	group := &syscall.SysProcAttr{Setpgid: true}   // a terminal's foreground job
	brain := filepath.Join(dir, "brains", "auditor")
	drill := func(want int, args ...string) (string, string) {
		t.Helper()
		code, stdout, stderr := w.runOnce(append([]string{"drill"}, args...)...)
		if code != want {
			t.Fatalf("hermesd drill %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, stdout, stderr)
		}
		return stdout, stderr
	}

	t.Log("1. make run, and drills beside it")
	run := w.startBinary(devnetBin, group, append(devnetArgs, "--", hermesd, "run")...)
	if !run.waitLines(1, 2*time.Minute, msgPublished, "agent=auditor") {
		t.Fatalf("make run did not publish auditor's pointer:\n%s", run.out.String())
	}
	if first := firstLine(t, cfg); first != devnetConfigHeader {
		t.Fatalf("the devnet's configuration begins %q, not %q (what the drill's hint looks for)", first, devnetConfigHeader)
	}
	brainBefore, stateBefore := hashedTree(t, brain), listDir(t, filepath.Join(dir, "state", "agents", "auditor"))
	if out, _ := drill(exitOK, "auditor"); !strings.Contains(out, "read-only") || !strings.Contains(out, "PASS:") {
		t.Errorf("drill beside make run:\n%s", out)
	}
	if out, _ := drill(exitOK, "--mode", "a", "auditor"); !strings.Contains(out, "the state directory's newest verified snapshot") {
		t.Errorf("drill --mode a beside make run:\n%s", out)
	}
	if diffs := sameTree(brainBefore, hashedTree(t, brain)); len(diffs) > 0 {
		t.Errorf("the drills changed the brain: %v", diffs)
	}
	if got := listDir(t, filepath.Join(dir, "state", "agents", "auditor")); strings.Join(got, ",") != strings.Join(stateBefore, ",") {
		t.Errorf("the drills changed the state directory: %v, before %v", got, stateBefore)
	}
	if _, stderr := drill(exitLocked, "--destructive", "auditor"); !strings.Contains(stderr, "stop hermesd first") {
		t.Errorf("drill --destructive beside the daemon: %s", stderr)
	}
	if err := syscall.Kill(-run.pid(), syscall.SIGINT); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	if code := run.wait(time.Minute); code != 0 {
		t.Fatalf("make run exited %d on Ctrl-C", code)
	}

	t.Log("2. make devnet, hermesd run in another terminal, stopped")
	dn := w.startBinary(devnetBin, group, devnetArgs...)
	dn.mustWaitLine("devnet running", 1, 2*time.Minute)
	daemon := w.start("run")
	daemon.mustWaitLine(msgReady, 2, time.Minute)
	daemon.signal(syscall.SIGINT) // Ctrl-C
	if code := daemon.wait(time.Minute); code != 0 {
		t.Fatalf("hermesd run exited %d on Ctrl-C", code)
	}
	if out, _ := drill(exitOK, "auditor"); !strings.Contains(out, "PASS:") {
		t.Errorf("drill with the daemon stopped:\n%s", out)
	}
	before := hashedTree(t, brain)
	if out, _ := drill(exitOK, "--destructive", "auditor"); !strings.Contains(out, "brain back in place, byte-identical") {
		t.Errorf("drill --destructive:\n%s", out)
	}
	if diffs := sameTree(before, hashedTree(t, brain)); len(diffs) > 0 {
		t.Errorf("the destructive drill changed the brain: %v", diffs)
	}

	t.Log("3. no chain at all")
	if err := syscall.Kill(-dn.pid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := dn.wait(time.Minute); code != 0 {
		t.Fatalf("make devnet exited %d on Ctrl-C", code)
	}
	_, stderr := drill(exitFailure, "auditor")
	want := "hermesd: chain unreachable at http://127.0.0.1:" + chainPort + ": start the devnet with `make devnet` (or `make run`, or bin/hermesd-devnet -dir " +
		dir + "); a drill with --mode a needs no chain\n"
	if stderr != want {
		t.Errorf("drill without a chain says\n%q\nwant\n%q", stderr, want)
	}
	walrus := w.start("walrus", "serve", "--dir", filepath.Join(dir, "walrus"), "--listen", "127.0.0.1:"+walrusPort)
	walrus.mustWaitLine("local walrus listening", 1, time.Minute)
	if out, _ := drill(exitOK, "--mode", "a", "auditor"); !strings.Contains(out, "PASS:") || !strings.Contains(out, "the key + blob id alone") {
		t.Errorf("drill --mode a without a chain:\n%s", out)
	}
	walrus.signal(syscall.SIGINT)
	walrus.wait(time.Minute)
}

// firstLine is a file's first line.
func firstLine(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Scan()
	return s.Text()
}
