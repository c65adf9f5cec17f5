//go:build unix

package fleet

import (
	"os/exec"
	"syscall"
)

// ownGroup runs cmd in a process group of its own and kills the whole
// group when its context ends, so a hook's children go with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
