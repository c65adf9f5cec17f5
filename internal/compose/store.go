package compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/walrus"
)

// Store adapts a Walrus client to the pipeline's BlobStore.
func Store(c *walrus.Client) snapshot.BlobStore { return walrusStore{c} }

type walrusStore struct{ c *walrus.Client }

// verifyNotFoundRetries lets a read-back wait for an aggregator that has
// not seen a just-certified blob yet.
const verifyNotFoundRetries = 5

func (s walrusStore) Put(ctx context.Context, path string, epochs int) (snapshot.Stored, error) {
	body, err := walrus.FileBody(path)
	if err != nil {
		return snapshot.Stored{}, err
	}
	return s.store(ctx, body, epochs)
}

func (s walrusStore) PutReader(ctx context.Context, open func() (io.ReadCloser, error), size int64, epochs int) (snapshot.Stored, error) {
	return s.store(ctx, readerBody{open, size}, epochs)
}

func (s walrusStore) store(ctx context.Context, body walrus.Body, epochs int) (snapshot.Stored, error) {
	r, err := s.c.Store(ctx, body, walrus.WithEpochs(epochs))
	if err != nil {
		return snapshot.Stored{}, err
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

// notFound makes a read error that means "no such blob" match
// snapshot.ErrBlobNotFound too, keeping its text.
func notFound(err error) error {
	if err != nil && errors.Is(err, walrus.ErrNotFound) {
		return notFoundError{err}
	}
	return err
}

type notFoundError struct{ err error }

func (e notFoundError) Error() string   { return e.err.Error() }
func (e notFoundError) Unwrap() []error { return []error{snapshot.ErrBlobNotFound, e.err} }

func (s walrusStore) Get(ctx context.Context, blobID, path string, max int64) (snapshot.Fetched, error) {
	r, err := s.c.ReadToFile(ctx, blobID, path, readOpts(max)...)
	if err != nil {
		return snapshot.Fetched{}, notFound(err)
	}
	return snapshot.Fetched{Size: r.Size, Source: r.Aggregator, Attempts: r.Attempts}, nil
}

func (s walrusStore) Check(ctx context.Context, blobID string, size int64, sum [32]byte) error {
	_, err := s.c.Verify(ctx, blobID, sum, size, walrus.WithNotFoundRetries(verifyNotFoundRetries))
	return notFound(err)
}

// Compare reads the blob back and compares it with what open returns, byte
// for byte: for a pack still in memory, this proves what comparing
// SHA-256 sums proves, without a hash pass over every uploaded byte.
func (s walrusStore) Compare(ctx context.Context, blobID string, open func() (io.ReadCloser, error), size int64) error {
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	w := &compareWriter{r: rc, buf: make([]byte, 64<<10)}
	res, err := s.c.Read(ctx, blobID, w, walrus.WithExpectedSize(size), walrus.WithNotFoundRetries(verifyNotFoundRetries))
	if err != nil {
		return notFound(err)
	}
	if res.Size != size || w.off != size {
		return fmt.Errorf("%w: blob %s reads back as %d bytes, %d were stored", walrus.ErrMismatch, blobID, res.Size, size)
	}
	return nil
}

// compareWriter fails at the first byte that differs from r's.
type compareWriter struct {
	r   io.Reader
	off int64
	buf []byte
}

func (w *compareWriter) Write(p []byte) (int, error) {
	for done := 0; done < len(p); {
		n := min(len(p)-done, len(w.buf))
		if _, err := io.ReadFull(w.r, w.buf[:n]); err != nil {
			return done, fmt.Errorf("%w: the blob is longer than what was stored (%d bytes read): %w", walrus.ErrMismatch, w.off, err)
		}
		if !bytes.Equal(w.buf[:n], p[done:done+n]) {
			return done, fmt.Errorf("%w: the blob differs from what was stored near byte %d", walrus.ErrMismatch, w.off)
		}
		done += n
		w.off += int64(n)
	}
	return len(p), nil
}

func (s walrusStore) Stream(ctx context.Context, blobID string, w io.Writer, max int64) (int64, error) {
	r, err := s.c.Read(ctx, blobID, w, readOpts(max)...)
	return r.Size, notFound(err)
}

func (s walrusStore) ReadRange(ctx context.Context, blobID string, off, length int64, w io.Writer) (int64, error) {
	r, err := s.c.ReadRange(ctx, blobID, off, length, w)
	return r.Total, notFound(err)
}
