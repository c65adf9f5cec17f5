package snapshot

import (
	"context"
	"errors"
	"io"
)

// BlobStore is Walrus as the pipeline uses it, in standard types so that
// any store (the Walrus client, a fake in tests) fits. Blob ids are opaque.
type BlobStore interface {
	// Put uploads the file at path, stored for epochs epochs.
	Put(ctx context.Context, path string, epochs int) (Stored, error)
	// PutReader uploads the size bytes open returns (it may be called
	// more than once, concurrently), stored for epochs epochs: a v3 pack
	// held in memory. A store whose ids commit to the bytes (a Walrus
	// blob id) fails the upload when the id the publisher answers is
	// not theirs.
	PutReader(ctx context.Context, open func() (io.ReadCloser, error), size int64, epochs int) (Stored, error)
	// Compare reads blobID back and requires exactly the size bytes open
	// returns: the read-back of a pack the pipeline still holds.
	Compare(ctx context.Context, blobID string, open func() (io.ReadCloser, error), size int64) error
	// ReadRange writes bytes [off, off+length) of blobID to w, never more,
	// and returns the blob's size (Walrus aggregators serve closed ranges
	// only). It may fail after a partial write.
	ReadRange(ctx context.Context, blobID string, off, length int64, w io.Writer) (total int64, err error)
	// Get downloads blobID into the file at path, refusing a blob larger
	// than max bytes before writing it. Of a blob id it writes only the
	// bytes the id names (a Walrus blob id commits to them), else fails
	// with an error matching headref.ErrMismatch; a quilt patch it takes
	// on the aggregator's word.
	Get(ctx context.Context, blobID, path string, max int64) (Fetched, error)
	// Check reads blobID back and requires its size and SHA-256.
	Check(ctx context.Context, blobID string, size int64, sum [32]byte) error
	// Stream writes blobID to w, refusing more than max bytes. It may stop
	// early when w returns an error. A whole blob is checked as Get checks
	// it, before w sees a byte.
	Stream(ctx context.Context, blobID string, w io.Writer, max int64) (int64, error)
}

// Stored describes an uploaded blob.
type Stored struct {
	BlobID   string
	EndEpoch uint64 // the blob expires when this epoch begins
	// Epoch is the store's epoch when it registered the blob (0: it did
	// not say, e.g. for bytes it already held): what the v3 pipeline's
	// expiry schedule learns the network's clock from.
	Epoch uint64
	// AlreadyCertified: the store already held these bytes.
	AlreadyCertified bool
	Attempts         int
}

// Fetched describes a download.
type Fetched struct {
	Size     int64
	Source   string // where it came from (scheme://host:port)
	Attempts int
}

// ErrBlobNotFound matches a blob the store does not have (never stored,
// or expired). Stores wrap their own not-found error with it.
var ErrBlobNotFound = errors.New("blob not found or expired")

// ErrTooLarge matches a snapshot that is over the store's size limit; it
// will not fit until the brain changes.
var ErrTooLarge = errors.New("snapshot over the blob size limit")
