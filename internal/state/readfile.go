package state

import (
	"fmt"
	"io"
	"os"
)

// ReadFile reads a small file of the state directory (another package's,
// such as the cost ledger's) as this package reads its own: without
// following a symbolic link planted at its name, a regular file only, at
// most limit bytes. A missing file is an error matching os.ErrNotExist.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := openNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}
