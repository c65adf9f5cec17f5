//go:build unix

package secretfile

import "syscall"

// nonblock keeps a fifo at a secret's path from blocking Open until a
// writer comes; a regular file reads the same with it.
const nonblock = syscall.O_NONBLOCK
