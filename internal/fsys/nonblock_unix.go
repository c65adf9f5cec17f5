//go:build unix && (!linux || fsys_portable)

package fsys

import "syscall"

// nonblock keeps a fifo that replaced a listed file from blocking Open.
const nonblock = syscall.O_NONBLOCK
