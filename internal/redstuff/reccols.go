package redstuff

import (
	"fmt"
	"os"
	"runtime"
)

// recCols holds the secondary code's recovery columns between the two
// passes of an id: written by rows (every column, a few rows at a time),
// read by columns (each column whole, once).
type recCols interface {
	// put writes b into column j at byte offset off.
	put(j, off int, b []byte) error
	// get returns column j, read into buf (len(buf) = the column's size)
	// or held.
	get(j int, buf []byte) ([]byte, error)
	close() error
}

// newRecCols holds cols columns of size bytes in a file in dir when they
// take more than SpillAbove bytes and one can be created there, else in
// memory.
func newRecCols(cols, size int, dir string) recCols {
	if dir != "" && int64(cols)*int64(size) > SpillAbove {
		if f, err := os.CreateTemp(dir, ".hermesd-blobid-*"); err == nil {
			// Removed at once where an open file can be (a crash leaves
			// nothing); on Windows when closed.
			if runtime.GOOS != "windows" {
				os.Remove(f.Name())
			}
			return &fileCols{f: f, size: size}
		}
	}
	m := &memCols{cols: make([][]byte, cols)}
	for j := range m.cols {
		m.cols[j] = make([]byte, size)
	}
	return m
}

type memCols struct{ cols [][]byte }

func (m *memCols) put(j, off int, b []byte) error { copy(m.cols[j][off:], b); return nil }

func (m *memCols) get(j int, _ []byte) ([]byte, error) { return m.cols[j], nil }

func (m *memCols) close() error { return nil }

// fileCols keeps column j at [j·size, (j+1)·size) of an unlinked file:
// the page cache holds it, not the heap, and the kernel may write it out
// under memory pressure.
type fileCols struct {
	f    *os.File
	size int
}

func (c *fileCols) put(j, off int, b []byte) error {
	if _, err := c.f.WriteAt(b, int64(j)*int64(c.size)+int64(off)); err != nil {
		return fmt.Errorf("redstuff: keep recovery columns: %w", err)
	}
	return nil
}

func (c *fileCols) get(j int, buf []byte) ([]byte, error) {
	if _, err := c.f.ReadAt(buf[:c.size], int64(j)*int64(c.size)); err != nil {
		return nil, fmt.Errorf("redstuff: read recovery columns back: %w", err)
	}
	return buf[:c.size], nil
}

func (c *fileCols) close() error {
	err := c.f.Close()
	if runtime.GOOS == "windows" {
		os.Remove(c.f.Name())
	}
	return err
}
