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
// Direct I/O writes whole aligned blocks from aligned memory, and chunks
// end anywhere: a chunk's aligned middle is copied to bounce buffers, its
// ragged ends are kept in per-block buffers until the neighbouring chunks
// fill the rest of their blocks (chunks arrive in any order). A file's
// last block is written padded and the file cut to its size at the end.
// Where the file system offers no direct I/O (statx reports no alignment:
// tmpfs, FUSE, old kernels) or openat2 is unavailable, every file is
// written buffered.
//
// The writes themselves run on one goroutine of the writer's, from a few
// bounce buffers, so that the restore's workers go on decrypting and
// hashing while the disk takes a buffer; done waits for them.
//
// Not safe for concurrent use: the restore calls it under its write lock.
type directWriter struct {
	d     *restoreDir
	off   bool  // direct I/O unavailable below the target
	align int64 // offset, length and memory alignment of a direct write

	files  map[int32]*directFile
	direct int64 // bytes written direct (tests)

	// Set up at the first direct file (start).
	jobs    chan directJob
	bufs    chan []byte // free bounce buffers
	blocks  chan []byte // spare block buffers
	pending sync.WaitGroup
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error // the first write that failed
}

// directJob is one write for the writer's goroutine.
type directJob struct {
	df    *directFile
	buf   []byte
	off   int64
	block bool // buf is a block buffer, not a bounce buffer
}

// directBufs is how many bounce buffers are in flight at most.
const directBufs = 4

type directFile struct {
	fd   int
	path string
	size int64
	part map[int64]*partBlock // ragged blocks by offset
}

// partBlock is a block whose bytes come from more than one chunk: filled
// counts the bytes copied in so far.
type partBlock struct {
	buf    []byte
	filled int64
}

func newDirectWriter(d *restoreDir) *directWriter {
	return &directWriter{d: d, files: map[int32]*directFile{}}
}

// file returns the direct writer of the plan's multi-chunk file i, opening
// it at its first chunk, or nil when the file is written buffered.
func (w *directWriter) file(i int32, path string, size int64) (*directFile, error) {
	if df := w.files[i]; df != nil {
		return df, nil
	}
	if w.off || size < directMin || noOpenat2.Load() {
		return nil, nil
	}
	how := unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_DIRECT,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := retry(func() (int, error) { return unix.Openat2(w.d.fd, path, &how) })
	switch err {
	case nil:
	case unix.EINVAL, unix.ENOSYS, unix.EPERM: // no O_DIRECT here, or no openat2
		w.off = true
		return nil, nil
	default:
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	if w.align == 0 {
		w.align = dioAlign(fd)
		if w.align == 0 {
			unix.Close(fd)
			w.off = true
			return nil, nil
		}
		w.start()
	}
	df := &directFile{fd: fd, path: path, size: size, part: map[int64]*partBlock{}}
	w.files[i] = df
	return df, nil
}

// put writes data, the chunk at off of the plan's multi-chunk file i
// (path, size bytes): direct when it can, buffered otherwise.
func (w *directWriter) put(i int32, path string, size int64, data []byte, off int64) error {
	df, err := w.file(i, path, size)
	switch {
	case err != nil:
		return err
	case df == nil:
		return w.d.writeAt(path, false, data, off, nil)
	}
	return w.write(df, data, off)
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
	w.jobs = make(chan directJob, 64)
	w.bufs = make(chan []byte, directBufs)
	w.blocks = make(chan []byte, 64)
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
		if j.block {
			select {
			case w.blocks <- j.buf:
			default:
			}
		} else {
			w.bufs <- j.buf[:cap(j.buf)]
		}
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

// write writes data, the chunk at off of the file.
func (w *directWriter) write(df *directFile, data []byte, off int64) error {
	a := w.align
	if off < 0 || int64(len(data)) > df.size-off {
		return fmt.Errorf("%s: a chunk at %d of %d bytes past the size %d", df.path, off, len(data), df.size)
	}
	if err := w.failure(); err != nil {
		return err
	}
	if head := off & (a - 1); head != 0 && len(data) > 0 { // the ragged start
		n := min(int64(len(data)), a-head)
		if err := w.fill(df, off-head, head, data[:n]); err != nil {
			return err
		}
		data, off = data[n:], off+n
	}
	for int64(len(data)) >= a { // the aligned middle
		buf := <-w.bufs
		n := min(int64(len(data))&^(a-1), int64(len(buf)))
		copy(buf, data[:n])
		w.submit(directJob{df: df, buf: buf[:n], off: off})
		w.direct += n
		data, off = data[n:], off+n
	}
	if len(data) > 0 { // the ragged end, at a block's start
		return w.fill(df, off, 0, data)
	}
	return nil
}

// fill copies p to offset at of the block at blk and writes the block once
// every byte of it that lies in the file is there.
func (w *directWriter) fill(df *directFile, blk, at int64, p []byte) error {
	b := df.part[blk]
	if b == nil {
		b = &partBlock{}
		select {
		case b.buf = <-w.blocks:
			clear(b.buf)
		default:
			b.buf = alignedBuf(w.align, w.align)
		}
		df.part[blk] = b
	}
	copy(b.buf[at:], p)
	b.filled += int64(len(p))
	want := min(w.align, df.size-blk)
	switch {
	case b.filled < want:
		return nil
	case b.filled > want: // chunks overlap: the plan never makes them
		return fmt.Errorf("%s: the block at %d filled twice", df.path, blk)
	}
	// The last block goes whole, zero-padded; done truncates the file.
	w.submit(directJob{df: df, buf: b.buf, off: blk, block: true})
	w.direct += want
	delete(df.part, blk)
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

// done finishes file i once every chunk of it was written: its padded
// last block is cut to its size and the direct descriptor closed.
func (w *directWriter) done(i int32) error {
	df := w.files[i]
	if df == nil {
		return nil
	}
	delete(w.files, i)
	w.pending.Wait() // its writes, and any queued after them
	err := func() error {
		if err := w.failure(); err != nil {
			return err
		}
		if len(df.part) > 0 {
			return fmt.Errorf("%s: %d blocks not filled", df.path, len(df.part))
		}
		if df.size&(w.align-1) != 0 {
			if _, err := retry(func() (struct{}, error) { return struct{}{}, unix.Ftruncate(df.fd, df.size) }); err != nil {
				return &fs.PathError{Op: "truncate", Path: df.path, Err: err}
			}
		}
		return nil
	}()
	if cerr := unix.Close(df.fd); err == nil && cerr != nil {
		err = &fs.PathError{Op: "close", Path: df.path, Err: cerr}
	}
	return err
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
		unix.Close(df.fd)
		delete(w.files, i)
	}
}
