//go:build !unix

package secretfile

// nonblock: systems without fifos in the file system need no O_NONBLOCK.
const nonblock = 0
