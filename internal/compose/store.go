package compose

import (
	"context"
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
	r, err := s.c.Store(ctx, body, walrus.WithEpochs(epochs))
	if err != nil {
		return snapshot.Stored{}, err
	}
	return snapshot.Stored{BlobID: r.BlobID, EndEpoch: uint64(r.EndEpoch), AlreadyCertified: r.AlreadyCertified, Attempts: r.Attempts}, nil
}

func readOpts(max int64) []walrus.ReadOption {
	if max > 0 {
		return []walrus.ReadOption{walrus.WithMaxSize(max)}
	}
	return nil
}

func (s walrusStore) Get(ctx context.Context, blobID, path string, max int64) (snapshot.Fetched, error) {
	r, err := s.c.ReadToFile(ctx, blobID, path, readOpts(max)...)
	if err != nil {
		return snapshot.Fetched{}, err
	}
	return snapshot.Fetched{Size: r.Size, Source: r.Aggregator, Attempts: r.Attempts}, nil
}

func (s walrusStore) Check(ctx context.Context, blobID string, size int64, sum [32]byte) error {
	_, err := s.c.Verify(ctx, blobID, sum, size, walrus.WithNotFoundRetries(verifyNotFoundRetries))
	return err
}

func (s walrusStore) Stream(ctx context.Context, blobID string, w io.Writer, max int64) (int64, error) {
	r, err := s.c.Read(ctx, blobID, w, readOpts(max)...)
	return r.Size, err
}
