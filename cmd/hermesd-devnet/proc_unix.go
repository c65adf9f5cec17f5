//go:build unix && !linux

package main

import "syscall"

// childAttr: a process group of its own (no parent-death signal here).
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
