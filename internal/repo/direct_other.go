//go:build !linux

package repo

// directWriter: direct I/O is Linux's here (direct_linux.go); elsewhere
// every restored file is written buffered.
type directWriter struct{ d *restoreDir }

func newDirectWriter(d *restoreDir) *directWriter { return &directWriter{d: d} }

func (w *directWriter) put(_ int32, path string, _ int64, data []byte, off int64) error {
	return w.d.writeAt(path, false, data, off, nil)
}

func (w *directWriter) done(int32) error { return nil }

func (w *directWriter) close() {}
