//go:build unix

package tarball

import "syscall"

func umask(mask int) int { return syscall.Umask(mask) }

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o644) }
