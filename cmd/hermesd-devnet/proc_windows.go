package main

import "syscall"

// childAttr: nothing to set; hermesd itself does not run on Windows.
func childAttr() *syscall.SysProcAttr { return nil }
