//go:build !linux

package repo

// directWriter: direct I/O is Linux's here (direct_linux.go); elsewhere
// every restored file is written buffered, where its chunks land.
type directWriter struct{}

// directMin is direct_linux.go's; no file is written direct here.
var directMin int64 = 8 << 20

func newDirectWriter(*restoreDir) *directWriter { return &directWriter{} }

func (w *directWriter) probe(string) error { return nil }

func (w *directWriter) wants(int64) bool { return false }

func (w *directWriter) append(int32, string, int64, []byte) error {
	panic("repo: direct writes on a system without them")
}

func (w *directWriter) done(int32) error { return nil }

func (w *directWriter) close() {}
