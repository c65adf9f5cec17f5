package snapshot

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/headref"
)

// errFound stops a download once the lock has been read.
var errFound = errors.New("lock found")

// ReadLock returns the bundle.lock.json inside a snapshot blob. It streams
// the blob and stops as soon as the lock entry has been read and its
// segments authenticated, so listing the lineage (which every lock carries)
// never downloads older blobs, and usually not all of this one. blobID
// names a v1 or v2 blob (a head reference's id is read).
func (p *Pipeline) ReadLock(ctx context.Context, blobID string) (*bundlelock.Lock, error) {
	blobID = headref.ID(blobID)
	pr, pw := io.Pipe()
	type result struct {
		lock *bundlelock.Lock
		err  error
	}
	done := make(chan result, 1)
	go func() {
		l, err := p.lockFromStream(ctx, pr)
		if err == nil {
			pr.CloseWithError(errFound)
		} else {
			pr.CloseWithError(err)
		}
		done <- result{l, err}
	}()
	_, rerr := p.Store.Stream(ctx, blobID, pw, 0)
	pw.CloseWithError(rerr)
	res := <-done
	if res.err == nil {
		return res.lock, nil
	}
	if rerr != nil && !errors.Is(rerr, errFound) {
		return nil, fmt.Errorf("download %s: %w", blobID, rerr)
	}
	return nil, res.err
}

func (p *Pipeline) lockFromStream(ctx context.Context, r io.Reader) (*bundlelock.Lock, error) {
	plain, err := p.decryptStream(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}
	tr := tar.NewReader(plain)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, ErrNoLock
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		if strings.TrimPrefix(h.Name, "./") != bundlelock.FileName || h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Size > bundlelock.MaxSize {
			return nil, fmt.Errorf("bundle.lock.json is %d bytes, over the %d byte limit", h.Size, bundlelock.MaxSize)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("read lock: %w", err)
		}
		return bundlelock.Parse(b)
	}
}
