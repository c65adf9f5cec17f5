package fleet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Hooks are the commands run as an agent's ownership changes (argv, no
// shell); nil runs nothing.
type Hooks struct {
	OnAcquire []string
	OnRelease []string
	Timeout   time.Duration
}

// hookOutput bounds what a hook's output adds to the log.
const hookOutput = 2 << 10

// runHook runs argv for event ("acquire", "release") of agent ag, bounded
// by timeout; a hook still running then is killed with its process group.
func (n *Node) runHook(ctx context.Context, event string, ag Agent, argv []string, timeout time.Duration) error {
	if len(argv) == 0 {
		return nil
	}
	if event == "acquire" {
		// Starting a runtime is a write like any other; stopping one
		// (on_release) never waits for the lease.
		if err := n.Check("hook"); err != nil {
			n.log.Warn("hook not run", "agent", ag.ID, "hook", "on_acquire", "error", err)
			return err
		}
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	repl := strings.NewReplacer("{agent}", ag.ID, "{brain_dir}", ag.BrainDir, "{node}", n.cfg.Node, "{fleet}", n.cfg.Fleet)
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = repl.Replace(a)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(),
		"HERMESD_EVENT="+event, "HERMESD_AGENT="+ag.ID, "HERMESD_BRAIN_DIR="+ag.BrainDir,
		"HERMESD_NODE="+n.cfg.Node, "HERMESD_FLEET="+n.cfg.Fleet, "HERMESD_ENS_NAME="+ag.ENSName)
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	ownGroup(cmd)
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("killed after %s: %w", timeout, ctx.Err())
	}
	n.obs.Hook(event, err)
	log := n.log.With("agent", ag.ID, "hook", "on_"+event, "took", took.Round(time.Millisecond))
	if err != nil {
		log.Error("hook failed; the transition goes on", "error", err, "output", out.String())
		return err
	}
	log.Info("hook ran")
	return nil
}

// limitedBuffer keeps the first hookOutput bytes written to it.
type limitedBuffer struct{ b bytes.Buffer }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := hookOutput - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return strings.TrimSpace(l.b.String()) }
