//go:build !unix

package fsys

// nonblock: systems without fifos in the file system need no O_NONBLOCK.
const nonblock = 0
