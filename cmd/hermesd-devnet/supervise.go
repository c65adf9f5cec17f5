package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/hermesd/hermesd/internal/config"
)

// supervise runs argv with HERMESD_CONFIG set to cfgPath until it exits,
// passing on every signal of env.signals, and returns its exit status.
//
// The child runs in a process group of its own, so that a Ctrl-C on the
// terminal reaches it once, through this process, and not twice (the
// terminal signals the whole foreground group, and a second SIGINT would
// abort the daemon's pointer flush). Where the system allows, it is sent
// SIGTERM if this process dies, so it never outlives the devnet unnoticed.
func supervise(argv []string, cfgPath string, env *cmdEnv) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), config.EnvPath+"="+cfgPath)
	cmd.Stdout, cmd.Stderr = env.stdout, env.stderr // stdin: /dev/null
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	fmt.Fprintf(env.stdout, "  running           %s (pid %d)\n", strings.Join(argv, " "), cmd.Process.Pid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-env.signals:
			_ = cmd.Process.Signal(sig) // fails only once it has exited
		case err := <-done:
			return childStatus(strings.Join(argv, " "), err)
		}
	}
}

// childStatus turns the child's end into this process's exit status: its
// exit code, or 128+N when signal N killed it, as a shell reports it.
func childStatus(name string, err error) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err // nil, or the wait itself failed
	}
	code := ee.ExitCode()
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return withCode(code, fmt.Errorf("%s: %v", name, ee))
}
