package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devnet"
)

// superviseNodes runs argv once per node, each with HERMESD_CONFIG set to
// its node's configuration and its output lines prefixed with the node's
// name, passes every signal of env.signals on to every child still
// running, and returns when all have exited.
//
// A node that exits on its own (an operator's kill -9, a crash) is
// reported and the others go on: the fleet is there to be broken. The
// status returned is that of the children the signal stopped (the first
// that failed), or, when every child exited on its own, the first that
// failed.
func superviseNodes(argv []string, nodes []devnet.Node, env *cmdEnv) error {
	type exit struct {
		i   int
		err error
	}
	var outMu sync.Mutex // one line at a time on env.stdout
	done := make(chan exit, len(nodes))
	cmds := make([]*exec.Cmd, len(nodes))
	outs := make([]*prefixWriter, len(nodes))
	name := strings.Join(argv, " ")
	for i, n := range nodes {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), config.EnvPath+"="+n.ConfigPath)
		outs[i] = &prefixWriter{w: env.stdout, mu: &outMu, prefix: []byte(fmt.Sprintf("%-7s| ", n.Name))}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		cmd.SysProcAttr = childAttr()
		if err := cmd.Start(); err != nil {
			for _, c := range cmds[:i] {
				_ = c.Process.Signal(os.Interrupt)
				_ = c.Wait()
			}
			return fmt.Errorf("start %s for %s: %w", argv[0], n.Name, err)
		}
		cmds[i] = cmd
		outMu.Lock()
		fmt.Fprintf(env.stdout, "  %-17s %s (pid %d), HERMESD_CONFIG=%s\n", n.Name, name, cmd.Process.Pid, n.ConfigPath)
		outMu.Unlock()
		go func() { done <- exit{i, cmd.Wait()} }()
	}
	running := make([]bool, len(nodes))
	for i := range running {
		running[i] = true
	}
	left, stopping := len(nodes), false
	var stopErr, ownErr error
	for left > 0 {
		select {
		case sig := <-env.signals:
			stopping = true
			for i, c := range cmds {
				if running[i] {
					_ = c.Process.Signal(sig) // fails only once it has exited
				}
			}
		case e := <-done:
			left--
			running[e.i] = false
			outs[e.i].flush()
			status := childStatus(name, e.err)
			if status != nil {
				status = fmt.Errorf("%s: %w", nodes[e.i].Name, status)
			}
			switch {
			case stopping:
				if status != nil && stopErr == nil {
					stopErr = status
				}
			default:
				if status != nil && ownErr == nil {
					ownErr = status
				}
				what := nodes[e.i].Name + ": exited"
				if status != nil {
					what = status.Error()
				}
				outMu.Lock()
				fmt.Fprintf(env.stderr, "%s; %d node(s) still running (start it again: HERMESD_CONFIG=%s %s)\n",
					what, left, nodes[e.i].ConfigPath, name)
				outMu.Unlock()
			}
		}
	}
	if stopping {
		return stopErr
	}
	return ownErr
}

// prefixWriter writes whole lines to w, each after prefix, holding mu
// for a write so that lines of several writers do not interleave.
type prefixWriter struct {
	w       io.Writer
	mu      *sync.Mutex
	prefix  []byte
	partial []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	var out []byte
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		out = append(append(out, p.prefix...), p.partial[:i+1]...)
		p.partial = p.partial[i+1:]
	}
	if len(p.partial) > 64<<10 { // a line that never ends is written in pieces
		out = append(append(append(out, p.prefix...), p.partial...), '\n')
		p.partial = p.partial[:0]
	}
	if len(out) > 0 {
		if _, err := p.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// flush writes what is left of an unfinished last line.
func (p *prefixWriter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.partial) > 0 {
		p.w.Write(append(append(append([]byte(nil), p.prefix...), p.partial...), '\n'))
		p.partial = nil
	}
}
