//go:build !linux

package repo

import (
	"os"
	"sync"
)

// restoreDir writes restored files below a directory through os.Root.
type restoreDir struct {
	root *os.Root

	mu     sync.Mutex
	retime []Retimed
}

func openRestoreDir(root *os.Root, _ string) (*restoreDir, error) {
	return &restoreDir{root: root}, nil
}

func (d *restoreDir) close() {}

func (d *restoreDir) writeAt(path string, create bool, data []byte, off int64, f *rfile) error {
	return d.writeAtRoot(path, create, data, off, f)
}

// create creates the file at path, exclusively, for writing.
func (d *restoreDir) create(path string) (*os.File, error) {
	return d.createRoot(path)
}
