//go:build linux

package repo

import (
	"fmt"
	"io"
	"io/fs"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directMin is the smallest file a restore writes with direct I/O; a
// variable so that tests can reach the path with small files.
var directMin int64 = 8 << 20

// directBounce is the size of the aligned buffer that a direct write's
// bytes go through (a chunk's plaintext sits at any address).
const directBounce = 1 << 20

// directWriter writes a restore's large files with O_DIRECT, past the page
// cache. A buffered write of a large file spends most of its time in the
// kernel allocating page-cache pages, and on a VM that returns free memory
// to its host (free page reporting, ballooning) a fresh page can cost a
// host fault: on the bench machine, 1 GiB written buffered and synced took
// 0.5 or 2.8 s from one run to the next (up to 2.5 s in the kernel), and
// 0.4–0.5 s direct (0.1 s in the kernel). It also leaves the page cache to
// the agent about to run, and the final syncfs little to flush.
//
// Direct I/O writes whole aligned blocks from aligned memory. A file is
// written in order, as the restore delivers its chunks to be hashed: the
// bytes are copied into aligned bounce buffers, each written whole at the
// next offset, one after another, as a sequential copy writes; the last
// one zero-padded to a block, and the file cut to its size at the end.
// (Writing each chunk where it belongs as it arrived, in any order, its
// ragged ends as blocks once their neighbours had arrived, kept the disk
// busy 1.4 s in a 1 GiB restore, small writes and out of order, against
// 0.55 s for dd's 1 MiB writes; in order, 1.0 s, beside the hashing.)
// Where the file system offers no direct I/O (statx reports no alignment:
// tmpfs, FUSE, old kernels) or openat2 is unavailable, every file is
// written buffered, where its chunks land.
//
// The writes themselves run on one goroutine of the writer's, from a few
// bounce buffers, so that the restore goes on decrypting and hashing while
// the disk takes a buffer; done waits for them.
//
// Not safe for concurrent use, except wants.
type directWriter struct {
	d     *restoreDir
	align int64 // offset, length and memory alignment of a direct write (0: none below the target)

	files  map[int32]*directFile
	direct int64 // bytes written direct (tests)

	// Set up by probe.
	jobs    chan directJob
	bufs    chan []byte // free bounce buffers
	pending sync.WaitGroup
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error // the first write that failed
}

// directJob is one write for the writer's goroutine.
type directJob struct {
	df  *directFile
	buf []byte
	off int64
}

// directBufs is how many bounce buffers are in flight at most.
const directBufs = 4

type directFile struct {
	fd   int // -1: written buffered (its direct open failed)
	path string
	size int64
	next int64  // bytes appended so far
	buf  []byte // the bounce buffer being filled, with the bytes from at
	at   int64
}

func newDirectWriter(d *restoreDir) *directWriter {
	return &directWriter{d: d, files: map[int32]*directFile{}}
}

// probe finds out, before any chunk arrives, whether direct writes work
// below the target, by opening path (a file the restore created, of at
// least directMin bytes) direct once; wants says so from then on.
func (w *directWriter) probe(path string) error {
	fd, err := w.open(path)
	if err != nil || fd < 0 {
		return err
	}
	w.align = dioAlign(fd)
	unix.Close(fd)
	if w.align != 0 {
		w.start()
	}
	return nil
}

// wants reports whether a file of size bytes is written direct, in order
// (append), rather than where its chunks land. It is fixed once probe
// ran, and safe for concurrent use then.
func (w *directWriter) wants(size int64) bool {
	return w.align != 0 && size >= directMin
}

// open opens path for direct writes beneath the target: -1 where the
// file system or kernel takes none. (It never changes what wants says:
// the chunks of a file wants named are appended, direct or not.)
func (w *directWriter) open(path string) (int, error) {
	if noOpenat2.Load() {
		return -1, nil
	}
	how := unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_DIRECT,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := retry(func() (int, error) { return unix.Openat2(w.d.fd, path, &how) })
	switch err {
	case nil:
		return fd, nil
	case unix.EINVAL, unix.ENOSYS, unix.EPERM: // no O_DIRECT here, or no openat2
		return -1, nil
	}
	return -1, &fs.PathError{Op: "open", Path: path, Err: err}
}

// file returns the plan's multi-chunk file i, opening it at its first
// chunk.
func (w *directWriter) file(i int32, path string, size int64) (*directFile, error) {
	if df := w.files[i]; df != nil {
		return df, nil
	}
	fd, err := w.open(path)
	if err != nil {
		return nil, err
	}
	df := &directFile{fd: fd, path: path, size: size}
	w.files[i] = df
	return df, nil
}

// dioAlign returns the alignment direct writes to fd need (at least a
// page, at most directBounce), or 0 when the file system offers none.
func dioAlign(fd int) int64 {
	var st unix.Statx_t
	if _, err := retry(func() (struct{}, error) {
		return struct{}{}, unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &st)
	}); err != nil || st.Mask&unix.STATX_DIOALIGN == 0 || st.Dio_offset_align == 0 || st.Dio_mem_align == 0 {
		return 0
	}
	a := max(4096, int64(st.Dio_offset_align), int64(st.Dio_mem_align))
	if a > directBounce || a&(a-1) != 0 {
		return 0
	}
	return a
}

// alignedBuf returns n bytes starting at a multiple of align (a power of
// two). The Go heap does not move objects, so the alignment holds.
func alignedBuf(n, align int64) []byte {
	b := make([]byte, n+align)
	skip := (align - int64(uintptr(unsafe.Pointer(&b[0])))&(align-1)) & (align - 1)
	return b[skip : skip+n : skip+n]
}

func (w *directWriter) start() {
	w.jobs = make(chan directJob, directBufs)
	w.bufs = make(chan []byte, directBufs)
	for range directBufs {
		w.bufs <- alignedBuf(max(directBounce, w.align), w.align)
	}
	w.wg.Add(1)
	go w.run()
}

// run writes the jobs in order; after a failure it only gives the
// buffers back, and failure reports it.
func (w *directWriter) run() {
	defer w.wg.Done()
	for j := range w.jobs {
		if w.failure() == nil {
			if err := pwriteDirect(j.df, j.buf, j.off); err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
			}
		}
		w.bufs <- j.buf[:cap(j.buf)]
		w.pending.Done()
	}
}

func (w *directWriter) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *directWriter) submit(j directJob) {
	w.pending.Add(1)
	w.jobs <- j
}

// append writes data, the next bytes of the plan's multi-chunk file i
// (path, size bytes), whose chunks come in order.
func (w *directWriter) append(i int32, path string, size int64, data []byte) error {
	df, err := w.file(i, path, size)
	if err != nil {
		return err
	}
	if int64(len(data)) > df.size-df.next {
		return fmt.Errorf("%s: %d bytes at %d, past the size %d", df.path, len(data), df.next, df.size)
	}
	if df.fd < 0 {
		err := w.d.writeAt(path, false, data, df.next, nil)
		df.next += int64(len(data))
		return err
	}
	if err := w.failure(); err != nil {
		return err
	}
	for len(data) > 0 {
		if df.buf == nil {
			df.buf, df.at = (<-w.bufs)[:0], df.next
		}
		n := copy(df.buf[len(df.buf):cap(df.buf)], data)
		df.buf = df.buf[:len(df.buf)+n]
		data = data[n:]
		df.next += int64(n)
		if len(df.buf) == cap(df.buf) {
			w.submit(directJob{df: df, buf: df.buf, off: df.at})
			w.direct += int64(len(df.buf))
			df.buf = nil
		}
	}
	return nil
}

func pwriteDirect(df *directFile, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := retry(func() (int, error) { return unix.Pwrite(df.fd, b, off) })
		if err == nil && n == 0 {
			err = io.ErrShortWrite
		}
		if err != nil {
			return &fs.PathError{Op: "write", Path: df.path, Err: err}
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// done finishes file i once every byte of it was appended: its last
// bounce buffer is written padded to a block, the file cut to its size
// and the direct descriptor closed.
func (w *directWriter) done(i int32) error {
	df := w.files[i]
	if df == nil {
		return nil
	}
	delete(w.files, i)
	var err error
	switch n := int64(len(df.buf)); {
	case df.next != df.size:
		err = fmt.Errorf("%s: %d of %d bytes written", df.path, df.next, df.size)
	case df.fd < 0:
		return nil
	case n > 0:
		padded := (n + w.align - 1) &^ (w.align - 1)
		clear(df.buf[n:padded])
		w.submit(directJob{df: df, buf: df.buf[:padded], off: df.at})
		w.direct += n
		df.buf = nil
	}
	if df.fd < 0 {
		return err
	}
	// Its writes end before its descriptor closes, whatever happened: a
	// write queued to a closed descriptor's number would land in whatever
	// file took the number next.
	w.pending.Wait()
	if err == nil {
		err = w.finish(df)
	}
	if df.buf != nil {
		w.bufs <- df.buf[:cap(df.buf)]
	}
	if cerr := unix.Close(df.fd); err == nil && cerr != nil {
		err = &fs.PathError{Op: "close", Path: df.path, Err: cerr}
	}
	return err
}

// finish checks that df's writes succeeded and cuts it to its size.
func (w *directWriter) finish(df *directFile) error {
	if err := w.failure(); err != nil {
		return err
	}
	if df.size&(w.align-1) != 0 {
		if _, err := retry(func() (struct{}, error) { return struct{}{}, unix.Ftruncate(df.fd, df.size) }); err != nil {
			return &fs.PathError{Op: "truncate", Path: df.path, Err: err}
		}
	}
	return nil
}

// close stops the writer's goroutine, once its queued writes are done,
// and closes the files of a restore that ended early.
func (w *directWriter) close() {
	if w.jobs != nil {
		close(w.jobs)
		w.wg.Wait()
		w.jobs = nil
	}
	for i, df := range w.files {
		if df.fd >= 0 {
			unix.Close(df.fd)
		}
		delete(w.files, i)
	}
}
