package tarball

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
)

// WriteOptions tunes Write.
type WriteOptions struct {
	// Workers is the number of read-ahead goroutines that open, read and
	// hash upcoming small files while the archive is being written; 0
	// means runtime.GOMAXPROCS(0).
	Workers int
	// Overlay, when set, makes Write archive the tree as the overlay shows
	// it (see fsys.Overlay): substitutes in place of the files they stand
	// for, hidden paths left out. Hash through the same overlay.
	Overlay *fsys.Overlay
}

// Read-ahead shape: batchCount batches of up to batchJobs entries are in
// flight; a batch's small files (up to smallMax bytes) are read whole into
// its arena, bigger ones are streamed by the writer goroutine itself. Peak
// memory: batchCount × arenaSize + the hash pipe's buffers ≈ 3 MiB.
const (
	batchJobs  = 32
	batchCount = 8
	arenaSize  = 256 << 10
	smallMax   = 64 << 10
)

// epoch is the mtime of every header.
var epoch = time.Unix(0, 0)

// job is one archive entry on its way through the pipeline.
type job struct {
	name string // entry name; a directory's ends in '/'
	rel  string // path below the root, without trailing '/'
	dir  bool
	mode fs.FileMode // directories: permission bits

	// Symlinks, filled by a reader: the target, or skip when the link is
	// gone (or can no longer be kept) by the time it is read.
	symlink bool
	target  string
	skip    string

	// Files, filled by a reader:
	info   fsys.Info
	data   []byte    // contents read ahead (in the batch arena) unless streamed
	f      fsys.File // open file for the writer to stream, if stream
	stream bool
	sum    [32]byte
	err    error
}

type batch struct {
	jobs  []job
	arena []byte
	ready chan struct{} // a reader signals once the batch's files are read
}

type writer struct {
	root    fsys.Root
	links   map[devIno]firstName // files with several names: the first archived
	free    chan *batch
	work    chan *batch // to readers
	ordered chan *batch // to the writer, in archive order
	walkErr error       // set before ordered is closed
	skipped []Skipped   // walker-owned until ordered is closed
	pipe    *hashPipe
}

type devIno struct{ dev, ino uint64 }

// firstName is the first name of a file with several names the archive
// holds: the later ones are hard link entries naming it.
type firstName struct {
	rel, name string
	size      int64
	sum       [32]byte
}

// Write archives the tree at root into w (see the package documentation
// for the exact format) and returns what it archived. Output is buffered;
// w need not be. On error the bytes already written are not a valid
// archive; an ErrChanged error means a retry may succeed.
func Write(ctx context.Context, w io.Writer, root string, opts WriteOptions) (Manifest, error) {
	rh, err := fsys.OpenRootOverlay(root, opts.Overlay)
	if err != nil {
		return Manifest{}, fmt.Errorf("tarball: %w", err)
	}
	defer rh.Close()
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	wr := &writer{
		root:    rh,
		free:    make(chan *batch, batchCount),
		work:    make(chan *batch, batchCount),
		ordered: make(chan *batch, batchCount),
	}
	all := make([]*batch, batchCount)
	for i := range all {
		all[i] = &batch{jobs: make([]job, 0, batchJobs), arena: make([]byte, 0, arenaSize), ready: make(chan struct{}, 1)}
		wr.free <- all[i]
	}
	var wg sync.WaitGroup
	wg.Go(func() { wr.walk(ctx) })
	for range workers {
		wg.Go(func() { wr.read(ctx) })
	}
	defer func() {
		cancel()
		wg.Wait()
		for _, b := range all { // files handed over but never streamed
			for i := range b.jobs {
				if b.jobs[i].stream {
					b.jobs[i].f.Close()
					b.jobs[i].f, b.jobs[i].stream = fsys.File{}, false
				}
			}
		}
		if wr.pipe != nil {
			wr.pipe.close()
		}
	}()

	bw := bufio.NewWriterSize(w, 64<<10)
	tw := tar.NewWriter(bw)
	var m Manifest
	for b := range wr.ordered {
		<-b.ready
		if err := ctx.Err(); err != nil {
			return Manifest{}, err
		}
		for i := range b.jobs {
			if err := wr.emit(ctx, tw, &b.jobs[i], &m); err != nil {
				return Manifest{}, err
			}
		}
		b.jobs = b.jobs[:0]
		b.arena = b.arena[:0]
		wr.free <- b
	}
	if wr.walkErr != nil {
		return Manifest{}, wr.walkErr
	}
	if err := tw.Close(); err != nil {
		return Manifest{}, fmt.Errorf("tarball: write: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return Manifest{}, fmt.Errorf("tarball: write: %w", err)
	}
	// Links a reader found unkeepable join those the walk skipped, in
	// archive order.
	m.Skipped = append(wr.skipped, m.Skipped...)
	slices.SortStableFunc(m.Skipped, func(a, b Skipped) int { return strings.Compare(a.Path, b.Path) })
	return m, nil
}

// walk lists the tree depth-first, each directory sorted so that the
// entries come out in byte order of their full names, and feeds batches
// to the readers and, in the same order, to the writer.
func (wr *writer) walk(ctx context.Context) {
	defer close(wr.ordered)
	defer close(wr.work)
	var cur *batch
	send := func() bool {
		select {
		case wr.ordered <- cur:
		case <-ctx.Done():
			return false
		}
		wr.work <- cur // cannot block: at most batchCount batches exist
		cur = nil
		return true
	}
	add := func(j job) error {
		if cur == nil {
			select {
			case cur = <-wr.free:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		cur.jobs = append(cur.jobs, j)
		if len(cur.jobs) == batchJobs && !send() {
			return ctx.Err()
		}
		return nil
	}
	var dir func(rel string) error
	dir = func(rel string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, info, err := wr.root.ReadDir(rel)
		if err != nil {
			if rel != "" && fsys.IsGone(err) {
				return fmt.Errorf("%w: directory %s vanished", ErrChanged, rel)
			}
			return fmt.Errorf("tarball: read directory %s: %w", displayPath(rel), err)
		}
		// The root is "./", as GNU tar names it: it carries the brain
		// directory's own mode.
		name := "./"
		if rel != "" {
			name = rel + "/"
		}
		if err := add(job{name: name, rel: rel, dir: true, mode: info.Mode & fsys.Meta}); err != nil {
			return err
		}
		slices.SortFunc(ents, func(a, b fsys.Entry) int {
			return compareEntry(a.Name, a.Type.IsDir(), b.Name, b.Type.IsDir())
		})
		for _, e := range ents {
			if e.Type == fs.ModeSymlink {
				p, jerr := fsys.Join(rel, e.Name)
				switch {
				case jerr != nil:
					// The hasher counts no symlink, so its name cannot
					// fail a snapshot: it is left out.
					p = e.Name
					if rel != "" {
						p = rel + "/" + e.Name
					}
					wr.skipped = append(wr.skipped, Skipped{Path: p, Reason: "symlink with a name outside the name policy"})
				case rel == "" && (e.Name == "bundle.lock.json" || e.Name == "receipts.ndjson"):
					wr.skipped = append(wr.skipped, Skipped{Path: p, Reason: "symlink in the place of a file hermesd keeps"})
				default:
					if err := add(job{name: p, rel: p, symlink: true}); err != nil {
						return err
					}
				}
				continue
			}
			if !e.Type.IsRegular() && !e.Type.IsDir() {
				// Skipped whatever its name: the name policy is for what
				// the archive holds.
				p := e.Name
				if rel != "" {
					p = rel + "/" + e.Name
				}
				wr.skipped = append(wr.skipped, Skipped{Path: p, Reason: typeReason(e.Type)})
				continue
			}
			p, err := fsys.Join(rel, e.Name)
			if err != nil {
				return fmt.Errorf("tarball: %w", err)
			}
			if e.Type.IsDir() {
				err = dir(p)
			} else {
				err = add(job{name: p, rel: p})
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := dir(""); err != nil {
		wr.walkErr = err
		return
	}
	if cur != nil && len(cur.jobs) > 0 {
		send()
	}
}

// read is a read-ahead goroutine: it opens, reads and hashes the small
// files of each batch and opens the big ones for the writer to stream.
func (wr *writer) read(ctx context.Context) {
	for b := range wr.work {
		for i := range b.jobs {
			j := &b.jobs[i]
			if j.dir {
				continue
			}
			if j.symlink {
				wr.readlink(j)
				continue
			}
			if err := ctx.Err(); err != nil {
				j.err = err
				continue
			}
			wr.prefetch(b, j)
		}
		b.ready <- struct{}{}
	}
}

// readlink reads a symlink's target (never following it). A link gone
// by now is left out: it counts toward no hash, so its absence is no
// change the snapshot must be retaken for.
func (wr *writer) readlink(j *job) {
	target, info, err := wr.root.Readlink(j.rel)
	switch {
	case err == nil:
		j.target, j.info = target, info
	case fsys.IsGone(err):
		j.skip = "-"
	case errors.Is(err, fsys.ErrSymlinkTarget):
		j.skip = "symlink whose target cannot be kept"
	default:
		j.err = fmt.Errorf("tarball: %w", err)
	}
}

func (wr *writer) prefetch(b *batch, j *job) {
	f, err := wr.root.Open(j.rel)
	if err != nil {
		if fsys.IsGone(err) {
			j.err = fmt.Errorf("%w: %s vanished", ErrChanged, j.rel)
		} else {
			j.err = fmt.Errorf("tarball: open %s: %w", j.rel, err)
		}
		return
	}
	if j.info, err = f.Stat(); err != nil {
		f.Close()
		j.err = fmt.Errorf("tarball: stat %s: %w", j.rel, err)
		return
	}
	if !j.info.Mode.IsRegular() {
		f.Close()
		j.err = fmt.Errorf("%w: %s is no longer a regular file", ErrChanged, j.rel)
		return
	}
	size := j.info.Size
	off := len(b.arena)
	if size > smallMax || int64(off)+size+1 > int64(cap(b.arena)) {
		j.f, j.stream = f, true // the writer streams it
		return
	}
	defer f.Close()
	// Read up to one byte more than the stat size to notice growth. A
	// short read that reaches the size is the end of a regular file.
	buf := b.arena[off : off+int(size)+1]
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			j.err = fmt.Errorf("tarball: read %s: %w", j.rel, err)
			return
		}
		if n >= int(size) {
			break
		}
	}
	if int64(n) != size {
		j.err = fmt.Errorf("%w: %s: %d bytes at stat, %d read", ErrChanged, j.rel, size, n)
		return
	}
	j.data = buf[:n:n]
	b.arena = b.arena[:off+n]
	j.sum = sha256.Sum256(j.data)
}

// emit writes one entry to the archive.
func (wr *writer) emit(ctx context.Context, tw *tar.Writer, j *job, m *Manifest) error {
	if j.err != nil {
		return j.err
	}
	if j.symlink {
		switch j.skip {
		case "":
		case "-":
			return nil
		default:
			m.Skipped = append(m.Skipped, Skipped{Path: j.rel, Reason: j.skip})
			return nil
		}
		// A link has no mode of its own: 0777, as Linux reports every one.
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: j.name, Linkname: j.target, Mode: 0o777, ModTime: epoch, Format: tar.FormatGNU}); err != nil {
			return fmt.Errorf("tarball: write %s: %w", j.name, err)
		}
		m.Symlinks = append(m.Symlinks, Symlink{Path: j.rel, Target: j.target})
		return nil
	}
	if j.dir {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: j.name, Mode: int64(fsys.UnixMode(j.mode)), ModTime: epoch, Format: tar.FormatGNU}); err != nil {
			return fmt.Errorf("tarball: write %s: %w", j.name, err)
		}
		if j.rel == "" {
			m.Root = &Dir{Mode: j.mode}
		} else {
			m.Dirs = append(m.Dirs, Dir{Path: j.rel, Mode: j.mode})
		}
		return nil
	}
	size := j.info.Size
	mode := j.info.Mode & fsys.Meta
	var key devIno
	if j.info.Nlink > 1 && j.info.Ino != 0 {
		key = devIno{j.info.Dev, j.info.Ino}
		if first, ok := wr.links[key]; ok {
			return wr.emitLink(tw, j, first, mode, m)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: j.name, Size: size, Mode: int64(fsys.UnixMode(mode)), ModTime: epoch, Format: tar.FormatGNU}); err != nil {
		return fmt.Errorf("tarball: write %s: %w", j.name, err)
	}
	if j.stream {
		if err := wr.stream(ctx, tw, j, size); err != nil {
			return err
		}
	} else if _, err := tw.Write(j.data); err != nil {
		return fmt.Errorf("tarball: write %s: %w", j.name, err)
	}
	if key != (devIno{}) {
		if wr.links == nil {
			wr.links = map[devIno]firstName{}
		}
		wr.links[key] = firstName{rel: j.rel, name: j.name, size: size, sum: j.sum}
	}
	m.Files = append(m.Files, File{Path: j.rel, Size: size, Mode: mode.Perm(), SHA256: j.sum})
	m.Bytes += size
	return nil
}

// emitLink writes another name of a file already archived as a hard link
// entry ('1') naming the first, as GNU tar does; its content is not
// archived again. Its manifest entry has the first name's size and
// SHA-256 (the bundle hash hashes every name).
func (wr *writer) emitLink(tw *tar.Writer, j *job, first firstName, mode fs.FileMode, m *Manifest) error {
	if j.stream {
		j.f.Close()
		j.f, j.stream = fsys.File{}, false
	} else if j.info.Size != first.size || j.sum != first.sum {
		return fmt.Errorf("%w: %s and %s are one file, read with different contents", ErrChanged, first.rel, j.rel)
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeLink, Name: j.name, Linkname: first.name, Mode: int64(fsys.UnixMode(mode)), ModTime: epoch, Format: tar.FormatGNU}); err != nil {
		return fmt.Errorf("tarball: write %s: %w", j.name, err)
	}
	m.Files = append(m.Files, File{Path: j.rel, Size: first.size, Mode: mode.Perm(), SHA256: first.sum, Link: first.rel})
	m.Bytes += first.size
	m.Links++
	return nil
}

// stream copies a big file into the archive while the hash pipe digests
// the same chunks on another core.
func (wr *writer) stream(ctx context.Context, tw *tar.Writer, j *job, size int64) error {
	defer func() { j.f.Close(); j.f, j.stream = fsys.File{}, false }()
	if wr.pipe == nil {
		wr.pipe = newHashPipe()
	}
	p := wr.pipe
	var n int64
	for n < size {
		if err := ctx.Err(); err != nil {
			p.sum()
			return err
		}
		buf := p.buffer()
		m, err := j.f.Read(buf[:min(int64(len(buf)), size-n)])
		if err == io.EOF {
			err = nil // m == 0: the file shrank, reported below
		}
		if m > 0 {
			p.hash(buf[:m])
			if _, werr := tw.Write(buf[:m]); werr != nil {
				p.sum()
				return fmt.Errorf("tarball: write %s: %w", j.name, werr)
			}
			n += int64(m)
		} else {
			p.free <- buf
		}
		if err != nil {
			p.sum()
			return fmt.Errorf("tarball: read %s: %w", j.rel, err)
		}
		if m == 0 {
			p.sum()
			return fmt.Errorf("%w: %s: %d bytes at stat, %d read", ErrChanged, j.rel, size, n)
		}
	}
	j.sum = p.sum()
	var one [1]byte
	if m, _ := j.f.Read(one[:]); m > 0 {
		return fmt.Errorf("%w: %s grew past %d bytes", ErrChanged, j.rel, size)
	}
	return nil
}

func displayPath(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

func typeReason(t fs.FileMode) string {
	switch {
	case t&fs.ModeSymlink != 0:
		return "symlink"
	case t&fs.ModeNamedPipe != 0:
		return "fifo"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeDevice != 0:
		return "device"
	}
	return "not a regular file or directory"
}

// compareEntry orders two names of one directory by the bytes of their
// entry names (a directory's with its trailing '/'). Sorting each listing
// this way and walking depth-first yields the whole tree in byte order of
// full entry names. Names never contain '/'.
func compareEntry(a string, aDir bool, b string, bDir bool) int {
	n := min(len(a), len(b))
	if c := strings.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	switch {
	case len(a) < len(b):
		if !aDir {
			return -1
		}
		return cmpByte('/', b[n])
	case len(a) > len(b):
		if !bDir {
			return +1
		}
		return cmpByte(a[n], '/')
	}
	return 0
}

func cmpByte(x, y byte) int {
	if x < y {
		return -1
	}
	return +1
}
