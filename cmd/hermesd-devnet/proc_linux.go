package main

import "syscall"

// childAttr: a process group of its own, and SIGTERM (a clean stop, which
// flushes) if this process dies first.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
