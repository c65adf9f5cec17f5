//go:build !unix

package walrus

import "errors"

// canCountFile is false: a file body is read through a buffer.
const canCountFile = false

func fileOffset(fd uintptr) (int64, error) {
	return 0, errors.New("walrus: file offsets are not read on this platform")
}
