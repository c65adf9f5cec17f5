package compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/walrus"
)

// Store adapts a Walrus client to the pipeline's BlobStore. Blob ids
// and quilt patch ids are both taken: a range of a patch is cut from the
// whole patch, which is kept for further ranges (see MaxPatchRead).
func Store(c *walrus.Client) snapshot.BlobStore { return newStore(c) }

func newStore(c *walrus.Client) *walrusStore { return &walrusStore{c: c, patches: newPatchCache()} }

type walrusStore struct {
	c       *walrus.Client
	patches *patchCache
	// acct, when set, is charged every store answer.
	acct *account
}

// charging is a copy of s, sharing its patch cache, whose store answers
// are charged to acct (one agent's account).
func (s *walrusStore) charging(acct *account) *walrusStore {
	c := *s
	c.acct = acct
	return &c
}

// verifyNotFoundRetries lets a read-back wait for an aggregator that has
// not seen a just-certified blob yet.
const verifyNotFoundRetries = 5

func (s *walrusStore) Put(ctx context.Context, path string, epochs int) (snapshot.Stored, error) {
	body, err := walrus.FileBody(path)
	if err != nil {
		return snapshot.Stored{}, err
	}
	return s.store(ctx, body, epochs)
}

// PutReader uploads the size bytes open returns. The id the publisher
// answers is held to them by the read-back that follows (Compare), not
// by computing their blob id here: see Compare.
func (s *walrusStore) PutReader(ctx context.Context, open func() (io.ReadCloser, error), size int64, epochs int) (snapshot.Stored, error) {
	return s.store(ctx, readerBody{open, size}, epochs)
}

func (s *walrusStore) store(ctx context.Context, body walrus.Body, epochs int) (snapshot.Stored, error) {
	r, err := s.c.Store(ctx, body, walrus.WithEpochs(epochs))
	if err != nil {
		return snapshot.Stored{}, err
	}
	if s.acct != nil {
		s.acct.charge(r.Charge())
	}
	return snapshot.Stored{BlobID: r.BlobID, EndEpoch: uint64(r.EndEpoch), Epoch: uint64(r.RegisteredEpoch),
		AlreadyCertified: r.AlreadyCertified, Attempts: r.Attempts}, nil
}

// readerBody is an upload body opened anew for every attempt.
type readerBody struct {
	open func() (io.ReadCloser, error)
	size int64
}

func (b readerBody) Open() (io.ReadCloser, error) { return b.open() }
func (b readerBody) Size() int64                  { return b.size }

func readOpts(max int64) []walrus.ReadOption {
	if max > 0 {
		return []walrus.ReadOption{walrus.WithMaxSize(max)}
	}
	return nil
}

// storeErr makes a read error that means "no such blob" match
// snapshot.ErrBlobNotFound too, and one that means "other bytes than the
// blob id names" headref.ErrMismatch, keeping its text: the pipeline's
// words for them (snapshot.BlobStore).
func storeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, walrus.ErrNotFound):
		return alsoError{snapshot.ErrBlobNotFound, err}
	case errors.Is(err, walrus.ErrBlobID):
		return alsoError{headref.ErrMismatch, err}
	}
	return err
}

// alsoError is err, matching also too.
type alsoError struct{ also, err error }

func (e alsoError) Error() string   { return e.err.Error() }
func (e alsoError) Unwrap() []error { return []error{e.also, e.err} }

func (s *walrusStore) Get(ctx context.Context, blobID, path string, max int64) (snapshot.Fetched, error) {
	r, err := s.c.ReadToFile(ctx, blobID, path, readOpts(max)...)
	if err != nil {
		return snapshot.Fetched{}, storeErr(err)
	}
	return snapshot.Fetched{Size: r.Size, Source: r.Aggregator, Attempts: r.Attempts}, nil
}

func (s *walrusStore) Check(ctx context.Context, blobID string, size int64, sum [32]byte) error {
	_, err := s.c.Verify(ctx, blobID, sum, size, walrus.WithNotFoundRetries(verifyNotFoundRetries))
	return storeErr(err)
}

// Compare reads blobID back and compares it with what open returns byte
// for byte, as the bytes arrive (walrus.Client.ReadBack): an aggregator
// serves these bytes under the id the publisher answered. A publisher
// that names another blob is caught here by any honest aggregator, so the
// bytes' own blob id is not computed too (0.85 CPU-s per 10 MiB pack at
// 1000 shards): the only publisher it would catch besides is one whose
// aggregator lies with it, and that pair can as well answer the true id
// and never certify the blob (docs/design.md §6). Served bytes are never
// used, only compared, so Read's id check over them has no work here.
// When what open returns maps its bytes in windows (a spooled pack on
// Linux), they are compared in place instead of read through a buffer.
func (s *walrusStore) Compare(ctx context.Context, blobID string, open func() (io.ReadCloser, error), size int64) error {
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	w := &compareWriter{r: rc, size: size}
	if m, ok := rc.(windower); ok {
		w.win = m
	} else {
		w.buf = make([]byte, 64<<10)
	}
	res, err := s.c.ReadBack(ctx, blobID, w, walrus.WithExpectedSize(size), walrus.WithNotFoundRetries(verifyNotFoundRetries))
	if err != nil {
		return storeErr(err)
	}
	if res.Size != size || w.off != size {
		return fmt.Errorf("%w: blob %s reads back as %d bytes, %d were stored", walrus.ErrMismatch, blobID, res.Size, size)
	}
	return nil
}

// windower maps bytes [off, off+n) of what it reads, valid until the
// next call (repo.PackFile on Linux).
type windower interface {
	Window(off, n int64) ([]byte, error)
}

// compareWindow is how much of a pack a compare maps at a time.
const compareWindow = 2 << 20

// compareWriter fails at the first byte that differs from r's (or from
// win's windows) or goes past size.
type compareWriter struct {
	r    io.Reader
	size int64
	off  int64
	buf  []byte

	win    windower
	cur    []byte // win's bytes [curOff, curOff+len(cur))
	curOff int64
}

func (w *compareWriter) Write(p []byte) (int, error) {
	for done := 0; done < len(p); {
		if w.off >= w.size {
			return done, fmt.Errorf("%w: the blob is longer than the %d bytes stored", walrus.ErrMismatch, w.size)
		}
		var want []byte
		if w.win != nil && (w.off < w.curOff || w.off >= w.curOff+int64(len(w.cur))) {
			b, err := w.win.Window(w.off, min(compareWindow, w.size-w.off))
			if err != nil {
				// A spool that cannot be mapped is read instead, from
				// where the windows got to.
				w.win, w.cur = nil, nil
				w.buf = make([]byte, 64<<10)
				if _, err := io.CopyN(io.Discard, w.r, w.off); err != nil {
					return done, fmt.Errorf("read the stored pack: %w", err)
				}
			} else {
				w.cur, w.curOff = b, w.off
			}
		}
		if w.win != nil {
			want = w.cur[w.off-w.curOff:]
			want = want[:min(len(want), len(p)-done)]
		} else {
			n := min(len(p)-done, len(w.buf), int(min(w.size-w.off, int64(len(w.buf)))))
			if _, err := io.ReadFull(w.r, w.buf[:n]); err != nil {
				return done, fmt.Errorf("read the stored pack at byte %d: %w", w.off, err)
			}
			want = w.buf[:n]
		}
		if !bytes.Equal(want, p[done:done+len(want)]) {
			return done, fmt.Errorf("%w: the blob differs from what was stored near byte %d", walrus.ErrMismatch, w.off)
		}
		done += len(want)
		w.off += int64(len(want))
	}
	return len(p), nil
}

func (s *walrusStore) Stream(ctx context.Context, blobID string, w io.Writer, max int64) (int64, error) {
	r, err := s.c.Read(ctx, blobID, w, readOpts(max)...)
	return r.Size, storeErr(err)
}

func (s *walrusStore) ReadRange(ctx context.Context, blobID string, off, length int64, w io.Writer) (int64, error) {
	if walrus.IsPatchID(blobID) {
		return s.readPatchRange(ctx, blobID, off, length, w)
	}
	r, err := s.c.ReadRange(ctx, blobID, off, length, w)
	return r.Total, storeErr(err)
}
