package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/wait"
)

// TestE2EMakeRun runs what `make run` runs: hermesd-devnet with the daemon
// as its supervised child (`-- hermesd run`, the configuration handed over
// in HERMESD_CONFIG), in a process group of their own like a terminal's
// foreground job.
//
//   - The daemon restores nothing, takes the seed and publishes its pointer.
//   - A second hermesd-devnet on the same directory is refused: exit 5 and
//     one line saying so, and the running one is untouched.
//   - One Ctrl-C (SIGINT to the whole group, as a terminal sends it)
//     reaches the daemon exactly once: it flushes, is not told to abort the
//     flush, and stops; only then the devnet stops; exit 0.
//   - Started again on the same directory, the devnet resumes the chain
//     and the daemon finds its pointer published; when the devnet dies
//     (kill -9), the daemon is stopped too, not left running.
func TestE2EMakeRun(t *testing.T) {
	t.Parallel()
	hermesd, devnetBin := hermesdBinary(t), devnetBinary(t)
	w := newProcessWorld(t)
	dir, seed := t.TempDir(), seedDir(t, map[string]string{"system.md": "You are a test agent.\n", "skills/a.md": "skill a\n"})
	args := []string{"-dir", dir, "-seed", seed, "-chain-port", devnetChainPort(t), "-walrus-port", loopbackPort(t), "-http", w.http}
	group := &syscall.SysProcAttr{Setpgid: true} // a foreground job of its own
	makeRun := func() *hermesdProc {
		t.Helper()
		return w.startBinary(devnetBin, group, append(args, "--", hermesd, "run")...)
	}

	p := makeRun()
	p.mustWaitLine(msgPublished, 1, 2*time.Minute)
	daemon := childPID(t, p)
	if got, err := syscall.Getpgid(daemon); err != nil || got == p.pid() {
		t.Fatalf("the daemon's process group is %d (%v), the devnet's: a Ctrl-C would reach it twice", got, err)
	}

	second := w.startBinary(devnetBin, nil, "-dir", dir, "-chain-port", devnetChainPort(t), "-walrus-port", loopbackPort(t))
	if code := second.wait(time.Minute); code != exitLocked {
		t.Fatalf("a second devnet on the same directory exited %d, want %d:\n%s", code, exitLocked, second.out.String())
	}
	if out := second.out.String(); !strings.Contains(out, "in use by another hermesd-devnet") {
		t.Errorf("the second devnet's refusal does not say why:\n%s", out)
	}
	if p.exited() {
		t.Fatalf("the running devnet exited: %v", p.err)
	}

	if err := syscall.Kill(-p.pid(), syscall.SIGINT); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	if code := p.wait(time.Minute); code != 0 {
		t.Fatalf("make run exited %d on Ctrl-C:\n%s", code, p.out.String())
	}
	out := p.out.String()
	for _, want := range []string{"shutting down; flushing pending pointers", "hermesd stopped", "devnet stopping"} {
		if n, _ := p.out.count(want); n != 1 {
			t.Errorf("%q logged %d times, want once", want, n)
		}
	}
	if strings.Contains(out, "second signal") {
		t.Errorf("one Ctrl-C reached the daemon twice: it aborted its flush")
	}
	if strings.Index(out, "hermesd stopped") > strings.Index(out, "devnet stopping") {
		t.Errorf("the devnet stopped before the daemon had:\n%s", out)
	}

	// Again, on the same directory: the pointers (the L1 agent's and the
	// L2 agent's) are still published.
	p = makeRun()
	p.mustWaitLine(msgReady, 1, 2*time.Minute)
	wait.Within(t, time.Minute, "the daemon to report every pointer published", func() bool {
		rep, err := w.status()
		if err != nil || len(rep.Agents) != 2 {
			return false
		}
		for _, a := range rep.Agents {
			if a.Last == nil || a.Published != a.Last.BlobID || a.Pending != nil {
				return false
			}
		}
		return true
	})
	daemon = childPID(t, p)
	t.Cleanup(func() {
		if !exitedPID(daemon) {
			syscall.Kill(daemon, syscall.SIGKILL) // the test leaves nothing behind either
		}
	})
	p.signal(syscall.SIGKILL)
	wait.Within(t, time.Minute, "the daemon to stop after the devnet died", func() bool { return exitedPID(daemon) })
	p.wait(time.Minute)
}

// seedDir is a seed directory holding files (path → content).
func seedDir(t *testing.T, files map[string]string) string {
	t.Helper()
	seed := t.TempDir()
	for name, body := range files {
		p := filepath.Join(seed, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return seed
}

// loopbackPort is a free port on 127.0.0.1 (freePort's), without the host.
func loopbackPort(t *testing.T) string {
	t.Helper()
	_, p, _ := net.SplitHostPort(freePort(t))
	return p
}

// childPID is the pid of the command hermesd-devnet runs, from its banner.
func childPID(t *testing.T, p *hermesdProc) int {
	t.Helper()
	m := regexp.MustCompile(`running .* \(pid (\d+)\)`).FindStringSubmatch(p.out.String())
	if m == nil {
		t.Fatalf("hermesd-devnet did not say what it runs:\n%s", p.out.String())
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// exitedPID reports whether process pid has exited (gone, or a zombie
// that whoever inherited it has not reaped yet). Linux: /proc.
func exitedPID(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	// pid (comm) state ...; comm may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	return err == nil && i > 0 && bytes.HasPrefix(b[i+1:], []byte(" Z"))
}
