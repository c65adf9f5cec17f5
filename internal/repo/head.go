package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
)

// The head phase (Staged.Commit): the stages have ended; the lock and
// receipts, read now, and the commit go into the last pack, stored here.

// head reads and stores the lock and receipts, then writes the head.
func (bd *build) head(ctx context.Context, lockVersion int64) (*Result, error) {
	var err error
	if bd.lock, err = bd.readHeadFile(ctx, LockFile); err != nil {
		return nil, err
	}
	if bd.receipts, err = bd.readHeadFile(ctx, ReceiptsFile); err != nil {
		return nil, err
	}
	// Nothing claims objects any more: the set of a large brain's new
	// objects need not live on while the index is updated, nor the
	// chunker's tables while the head waits for its quilt.
	bd.pending, bd.tables = nil, nil
	return bd.commit(ctx, lockVersion)
}

// readHeadFile reads the top-level file name (the lock or the receipts,
// which are read last and go into the head pack) and seals its chunks;
// nil when there is none (a symlink, a fifo... count as none, as in the
// tree).
func (bd *build) readHeadFile(ctx context.Context, name string) (*Entry, error) {
	lst, err := bd.fsroot.Lstat(name)
	switch {
	case err != nil && fsys.IsGone(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("repo: stat %s: %w", name, err)
	case lst.Mode.IsDir():
		return nil, fmt.Errorf("%w: top-level %s is a directory", ErrName, name)
	case !lst.Mode.IsRegular():
		return nil, nil
	}
	f, err := bd.fsroot.Open(name)
	if err != nil {
		if fsys.IsGone(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("repo: open %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("repo: stat %s: %w", name, err)
	}
	if !st.Mode.IsRegular() {
		return nil, nil
	}
	e := &Entry{Name: name, Type: EntryFile, Mode: st.Mode.Perm()}
	sum := sha256.New()
	add := func(data []byte) error {
		id := ID(sha256.Sum256(data))
		sum.Write(data)
		e.Size += int64(len(data))
		e.Chunks = append(e.Chunks, id)
		h := Handle{TypeChunk, id}
		if bd.claim(h) {
			if err := bd.addNow(ctx, h, data); err != nil {
				return err
			}
			bd.stats.chunksNew.Add(1)
		} else {
			bd.stats.chunksReused.Add(1)
		}
		bd.ref(h)
		return nil
	}
	done := func() (*Entry, error) {
		sum.Sum(e.SHA256[:0])
		bd.stats.filesRead.Add(1)
		bd.stats.bytesRead.Add(e.Size)
		return e, nil
	}
	var r io.Reader = f
	if st.Size <= MinChunk { // the usual case: one chunk, no cutter
		sb, err := bd.small.get(ctx)
		if err != nil {
			return nil, err
		}
		defer bd.small.put(sb)
		m, err := readSmall(f, *sb, int(st.Size))
		switch {
		case err == io.EOF:
			if m > 0 {
				if err := add((*sb)[:m]); err != nil {
					return nil, err
				}
			}
			return done()
		case err != nil:
			return nil, fmt.Errorf("repo: read %s: %w", name, err)
		}
		r = io.MultiReader(bytes.NewReader((*sb)[:m]), f) // it grew: chunk it
	}
	cut := newCutter(bd.tables, MinChunk, MaxChunk, AvgBits)
	cut.reset(r)
	buf, err := bd.big.get(ctx)
	if err != nil {
		return nil, err
	}
	defer bd.big.put(buf)
	for {
		data, err := cut.next((*buf)[:0])
		if err == io.EOF {
			return done()
		}
		if err != nil {
			return nil, fmt.Errorf("repo: read %s: %w", name, err)
		}
		if err := add(data); err != nil {
			return nil, err
		}
	}
}

// addNow seals plain as h into the last pack, storing the pack first when
// it is full.
func (bd *build) addNow(ctx context.Context, h Handle, plain []byte) error {
	o, err := bd.sealBuf(ctx, h, plain)
	if err != nil {
		return err
	}
	defer o.pool.put(o.buf)
	err = bd.last.Add(h.Type, h.ID, o.data)
	if errors.Is(err, ErrPackFull) {
		if err = bd.storeLast(ctx); err == nil {
			err = bd.last.Add(h.Type, h.ID, o.data)
		}
	}
	if err != nil {
		return err
	}
	bd.stats.bytesNew.Add(int64(o.plen))
	bd.stats.bytesStored.Add(int64(len(o.data)))
	return nil
}

// storeLast stores the last pack, without a commit, and starts a new one.
func (bd *build) storeLast(ctx context.Context) error {
	p, err := bd.last.Finish(nil)
	if err != nil {
		return err
	}
	ref, err := bd.store(ctx, p)
	if err != nil {
		return err
	}
	bd.uploaded = append(bd.uploaded, uploadedPack{ref: ref, entries: p.Objects})
	bd.last, err = newPackWriter(bd.keys, bd.spools, bd.b.MaxPackSize)
	return err
}

// commit writes the head pack: the commit lists every live pack (the
// indexed ones still referenced, and every pack this snapshot uploaded),
// then the index is replaced by the new head's packs.
func (bd *build) commit(ctx context.Context, lockVersion int64) (*Result, error) {

	t := bd.in.Time
	if t.IsZero() {
		t = time.Now()
	}
	c := &Commit{
		Format: Format, Identity: bd.keys.identity, KeyID: bd.keys.KeyID(),
		Root: bd.root.id, Parent: bd.in.Parent, ParentFormat: bd.in.ParentFormat,
		Time: max(t.UnixMilli(), 0), BundleHash: bd.bundle, LockVersion: lockVersion,
		Added: bd.stats.bytesStored.Load(),
	}
	c.SetRoot(bd.rootInfo.Mode&fsys.Meta, bd.rootInfo.Mtime)
	st := Stats{Files: bd.files, Dirs: bd.dirs, Bytes: bd.bytes}
	c.Files, c.Bytes = int64(st.Files), st.Bytes
	c.Lock, c.Receipts = fileRef(bd.lock), fileRef(bd.receipts)

	live := map[string]*indexPack{}
	for p := range bd.usage {
		live[p.ref.BlobID] = p
	}
	packList := func() []PackRef {
		refs := make([]PackRef, 0, len(live)+len(bd.uploaded))
		for _, p := range live {
			refs = append(refs, p.ref)
		}
		for _, u := range bd.uploaded {
			refs = append(refs, u.ref)
		}
		slices.SortFunc(refs, func(a, b PackRef) int { return strings.Compare(a.BlobID, b.BlobID) })
		return refs
	}
	c.Packs = packList()
	enc, err := c.Encode()
	if err != nil {
		return nil, err
	}
	if !bd.last.Fits(0, int64(len(enc))) {
		// The commit does not fit beside the last objects: they go in a
		// pack of their own, and the head carries the commit alone.
		if err := bd.storeLast(ctx); err != nil {
			return nil, err
		}
		c.Packs = packList()
		if enc, err = c.Encode(); err != nil {
			return nil, err
		}
		if !bd.last.Fits(0, int64(len(enc))) {
			return nil, fmt.Errorf("%w: commit of %d bytes does not fit in a pack of %d bytes", ErrTooLarge, len(enc), bd.b.MaxPackSize)
		}
	}
	hp, err := bd.last.Finish(enc)
	if err != nil {
		return nil, err
	}
	// The head may wait for its quilt batch, with many agents' heads:
	// no stage runs any more and every buffer is back, so the pools go
	// idle (to the GC) now rather than after the wait. Measured: 1,000
	// agents starting held ~290 MB of pooled buffers through that wait.
	bd.parkBuffers()
	head, err := bd.store(ctx, hp)
	if err != nil {
		return nil, err
	}

	// The new index: the packs the commit lists, plus the head.
	packs := make([]*indexPack, 0, len(live)+len(bd.uploaded)+1)
	for _, u := range bd.uploaded {
		packs = append(packs, &indexPack{ref: u.ref, entries: u.entries})
	}
	packs = append(packs, &indexPack{ref: head, head: true, entries: hp.Objects})
	for _, p := range live {
		packs = append(packs, p)
	}
	bd.in.Index.replace(head.BlobID, packs)

	newUse := map[string]int64{}
	for _, u := range bd.uploaded {
		newUse[u.ref.BlobID] = u.ref.Size - HeaderSize - u.ref.IndexLength
	}
	newUse[head.BlobID] = head.Size - HeaderSize - head.IndexLength
	for p, n := range bd.usage {
		st.Live = append(st.Live, PackUse{BlobID: p.ref.BlobID, Size: p.ref.Size, Live: n, EndEpoch: p.ref.EndEpoch})
	}
	for _, u := range bd.uploaded {
		st.Live = append(st.Live, PackUse{BlobID: u.ref.BlobID, Size: u.ref.Size, Live: newUse[u.ref.BlobID], EndEpoch: u.ref.EndEpoch})
	}
	st.Live = append(st.Live, PackUse{BlobID: head.BlobID, Size: head.Size, Live: newUse[head.BlobID], EndEpoch: head.EndEpoch})
	slices.SortFunc(st.Live, func(a, b PackUse) int { return strings.Compare(a.BlobID, b.BlobID) })

	s := &bd.stats
	st.FilesRead, st.BytesRead, st.FilesReused = int(s.filesRead.Load()), s.bytesRead.Load(), int(s.filesReused.Load())
	st.ChunksNew, st.ChunksReused = int(s.chunksNew.Load()), int(s.chunksReused.Load())
	st.TreesNew, st.TreesReused = int(s.treesNew.Load()), int(s.treesReused.Load())
	st.BytesNew, st.BytesStored = s.bytesNew.Load(), s.bytesStored.Load()
	st.Packs, st.BytesUploaded = int(s.packs.Load()), s.bytesUploaded.Load()
	return &Result{Commit: c, CommitID: sha256.Sum256(enc), Head: head, HeadSHA256: hp.SHA256, Trees: bd.trees, Stats: st, Reads: bd.reads}, nil
}

func fileRef(e *Entry) *FileRef {
	if e == nil || e.Type == entryGone {
		return nil
	}
	return &FileRef{Mode: e.Mode, Size: e.Size, SHA256: e.SHA256, Chunks: e.Chunks}
}
