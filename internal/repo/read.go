package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	gohash "hash"
	"io"

	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
)

// chunkedFile is a file of several chunks: its chunk ids are filled by the
// sealers while it is read.
type chunkedFile struct {
	e     *Entry
	slots []*ID
}

// racyFile is a file read within the timestamp granularity of its last
// change, to read again before the commit (single-read snapshots).
type racyFile struct {
	path string
	st   fsys.Info
	sum  [32]byte
}

type chunkMsg struct {
	data  []byte
	id    ID
	known bool // id already computed (a whole small file: its SHA-256)
	slot  *ID  // where the id goes (nil when known)
	ref   *bufRef
}

// readFiles is a reader stage: it reads, hashes and chunks files.
func (bd *build) readFiles(ctx context.Context) error {
	var cut *cutter
	sum := sha256.New()
	var firstErr error
	for j := range bd.jobs {
		if firstErr == nil {
			firstErr = ctx.Err()
		}
		if firstErr != nil {
			j.f.Close() // drain: the walker may still be sending
			continue
		}
		firstErr = bd.readFile(ctx, j, &cut, sum)
		j.f.Close()
	}
	return firstErr
}

// readFile reads one file; *cut is the reader's cutter, made on its first
// file larger than MinChunk.
func (bd *build) readFile(ctx context.Context, j fileJob, cut **cutter, sum gohash.Hash) error {
	e := j.e
	st, err := j.f.Stat()
	if err != nil {
		return fmt.Errorf("repo: stat %s: %w", j.path, err)
	}
	if st.Mode.Type() != 0 {
		e.Type = entryGone // replaced by something else since the listing
		return nil
	}
	e.Mode, e.Mtime = st.Mode&fsys.Meta, st.Mtime
	if st.Nlink > 1 && st.Ino != 0 {
		bd.linkMu.Lock()
		bd.linked = append(bd.linked, linkedFile{e: e, path: j.path, dev: st.Dev, ino: st.Ino})
		bd.linkMu.Unlock()
	}
	var r io.Reader = j.f
	var prefix *[]byte
	if st.Size <= MinChunk {
		buf, err := bd.small.get(ctx)
		if err != nil {
			return err
		}
		m, err := readSmall(r, *buf, int(st.Size))
		switch {
		case err == io.EOF:
			// The whole file: one chunk whose id is the file's SHA-256.
			e.Size = int64(m)
			e.SHA256 = sha256.Sum256((*buf)[:m])
			bd.stats.filesRead.Add(1)
			bd.stats.bytesRead.Add(int64(m))
			if err := bd.readDone(j, st); err != nil {
				bd.small.put(buf)
				return err
			}
			if m == 0 {
				bd.small.put(buf)
				return nil
			}
			e.Chunks = []ID{e.SHA256}
			return bd.sendChunk(ctx, chunkMsg{data: (*buf)[:m], id: e.SHA256, known: true, ref: newBufRef(buf, bd.small, 1)})
		case err != nil:
			bd.small.put(buf)
			return fmt.Errorf("repo: read %s: %w", j.path, err)
		}
		// The file grew past MinChunk since the stat: chunk it.
		prefix = buf
		r = io.MultiReader(bytes.NewReader(*buf), r)
	}
	defer bd.small.put(prefix)
	if *cut == nil {
		*cut = newCutter(bd.tables, MinChunk, MaxChunk, AvgBits)
	}
	// The file's SHA-256 runs on a goroutine of its own, fed the chunks in
	// order: chunking (Rabin) and hashing a large file then use two cores,
	// while the sealers hash the chunks (their ids) in parallel.
	type hashMsg struct {
		data []byte
		ref  *bufRef
	}
	toHash := make(chan hashMsg, 4)
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		sum.Reset()
		for m := range toHash {
			sum.Write(m.data)
			m.ref.release()
		}
		sum.Sum(e.SHA256[:0])
	}()
	slots, err := bd.chunkFile(ctx, j, r, *cut, func(data []byte, ref *bufRef, slot *ID) error {
		toHash <- hashMsg{data, ref}
		return bd.sendChunk(ctx, chunkMsg{data: data, slot: slot, ref: ref})
	})
	close(toHash)
	<-hashed
	if err != nil {
		return err
	}
	bd.chunkedMu.Lock()
	bd.chunked = append(bd.chunked, chunkedFile{e: e, slots: slots})
	bd.chunkedMu.Unlock()
	bd.stats.filesRead.Add(1)
	bd.stats.bytesRead.Add(e.Size)
	return bd.readDone(j, st)
}

// readDone is the end of a file's read (e holds its size and SHA-256; st
// is its stat from before). A single-read snapshot checks that the file
// held still: its stat must not have changed meanwhile, and a file
// changed within the timestamp granularity of its read is read again
// before the commit (checkRacy); the read goes in Result.Reads.
func (bd *build) readDone(j fileJob, st fsys.Info) error {
	e := j.e
	if bd.single {
		now, err := j.f.Stat()
		if err != nil {
			return fmt.Errorf("repo: stat %s: %w", j.path, err)
		}
		if now != st || e.Size != st.Size {
			return fmt.Errorf("%w: %s changed while it was read", ErrChanged, j.path)
		}
		bd.readMu.Lock()
		if hash.Racy(st, j.start) && !st.Overlay {
			bd.racy = append(bd.racy, racyFile{path: j.path, st: st, sum: e.SHA256})
		}
		bd.reads.add(j.dir, e.Name, st, j.start)
		bd.readMu.Unlock()
	}
	if bd.b.afterRead != nil {
		bd.b.afterRead(j.path)
	}
	return nil
}

// checkRacy reads the racy files of a single-read snapshot again: each
// must have kept its stat and contents (an overlay's substitutes are
// private copies and never racy here).
func (bd *build) checkRacy(ctx context.Context) error {
	if len(bd.racy) == 0 {
		return nil
	}
	buf, err := bd.big.get(ctx)
	if err != nil {
		return err
	}
	defer bd.big.put(buf)
	sum := sha256.New()
	for _, r := range bd.racy {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := bd.fsroot.Open(r.path)
		if err != nil {
			if fsys.IsGone(err) {
				return fmt.Errorf("%w: %s vanished after it was read", ErrChanged, r.path)
			}
			return fmt.Errorf("repo: open %s: %w", r.path, err)
		}
		st, err := f.Stat()
		if err == nil && st == r.st {
			sum.Reset()
			_, err = io.CopyBuffer(sum, io.LimitReader(f, r.st.Size+1), *buf)
		}
		f.Close()
		switch {
		case err != nil:
			return fmt.Errorf("repo: read %s again: %w", r.path, err)
		case st != r.st || !bytes.Equal(sum.Sum(nil), r.sum[:]):
			return fmt.Errorf("%w: %s changed after it was read", ErrChanged, r.path)
		}
	}
	bd.racy = nil
	return nil
}

// readSmall reads a file fstat found to have size bytes into buf (of
// MinChunk+1 bytes). It returns io.EOF with the whole file, which it takes
// to end once size bytes were read (not spending a read(2) to hear it), or
// nil when the file filled buf: it grew past MinChunk.
func readSmall(r io.Reader, buf []byte, size int) (int, error) {
	m := 0
	for m < len(buf) {
		k, err := r.Read(buf[m:])
		m += k
		switch {
		case err != nil:
			return m, err
		case m == size:
			return m, io.EOF
		case k == 0:
			return m, io.ErrNoProgress
		}
	}
	return m, nil
}

// chunkFile cuts r into chunks, hands each to emit in order (which passes
// it on to the file's hash and the sealers), and returns where the
// sealers put the chunks' ids.
func (bd *build) chunkFile(ctx context.Context, j fileJob, r io.Reader, cut *cutter, emit func([]byte, *bufRef, *ID) error) ([]*ID, error) {
	cut.reset(r)
	var slots []*ID
	for {
		buf, err := bd.big.get(ctx)
		if err != nil {
			return nil, err
		}
		data, err := cut.next((*buf)[:0])
		if err == io.EOF {
			bd.big.put(buf)
			return slots, nil
		}
		if err != nil {
			bd.big.put(buf)
			return nil, fmt.Errorf("repo: read %s: %w", j.path, err)
		}
		j.e.Size += int64(len(data))
		slot := new(ID)
		slots = append(slots, slot)
		// Two shares: the file's hash, and the sealer.
		if err := emit(data, newBufRef(buf, bd.big, 2), slot); err != nil {
			return nil, err
		}
	}
}

func (bd *build) sendChunk(ctx context.Context, m chunkMsg) error {
	select {
	case bd.chunks <- m:
		return nil
	case <-ctx.Done():
		m.ref.release()
		return ctx.Err()
	}
}
