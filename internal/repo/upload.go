package repo

import (
	"context"
	"errors"
	"fmt"
)

type uploadedPack struct {
	ref     PackRef
	entries []IndexEntry
}

// spool is the pack stage: it appends sealed objects to the current pack
// and hands full packs to the uploaders. The last pack stays open: it
// becomes the head.
func (bd *build) spool(ctx context.Context) (err error) {
	defer close(bd.full)
	pw, err := newPackWriter(bd.keys, bd.spools, bd.b.MaxPackSize)
	if err != nil {
		for o := range bd.objects {
			o.pool.put(o.buf)
		}
		return err
	}
	defer func() {
		if err != nil {
			pw.Abort()
		} else {
			bd.last = pw
		}
	}()
	for o := range bd.objects {
		if err == nil {
			err = bd.add(ctx, &pw, o)
		}
		o.pool.put(o.buf)
	}
	return err
}

func (bd *build) add(ctx context.Context, pw **PackWriter, o sealedObj) error {
	err := (*pw).Add(o.h.Type, o.h.ID, o.data)
	if errors.Is(err, ErrPackFull) {
		select {
		case bd.full <- *pw:
		case <-ctx.Done():
			return ctx.Err()
		}
		if *pw, err = newPackWriter(bd.keys, bd.spools, bd.b.MaxPackSize); err != nil {
			return err
		}
		err = (*pw).Add(o.h.Type, o.h.ID, o.data)
	}
	if err != nil {
		return err
	}
	bd.stats.bytesNew.Add(int64(o.plen))
	bd.stats.bytesStored.Add(int64(len(o.data)))
	return nil
}

// finish completes full packs (index, SHA-256), one at a
// time, for the uploaders.
func (bd *build) finish(ctx context.Context) error {
	defer close(bd.ready)
	var firstErr error
	for pw := range bd.full {
		if firstErr == nil {
			firstErr = ctx.Err()
		}
		if firstErr != nil {
			pw.Abort()
			continue
		}
		p, err := pw.Finish(nil)
		if err != nil {
			firstErr = err
			continue
		}
		select {
		case bd.ready <- p:
		case <-ctx.Done():
			p.Discard()
			firstErr = ctx.Err()
		}
	}
	return firstErr
}

// upload is an uploader stage: it stores packs through the sink.
func (bd *build) upload(ctx context.Context) error {
	var firstErr error
	for p := range bd.ready {
		if firstErr == nil {
			firstErr = ctx.Err()
		}
		if firstErr != nil {
			p.Discard()
			continue
		}
		ref, err := bd.store(ctx, p)
		if err != nil {
			firstErr = err
			continue
		}
		bd.upMu.Lock()
		bd.uploaded = append(bd.uploaded, uploadedPack{ref: ref, entries: p.Objects})
		bd.upMu.Unlock()
	}
	return firstErr
}

func (bd *build) store(ctx context.Context, p *Pack) (PackRef, error) {
	defer p.Discard()
	st, err := bd.b.Sink.StorePack(ctx, p)
	if err != nil {
		return PackRef{}, fmt.Errorf("store pack: %w", err)
	}
	if !ValidBlobID(st.BlobID) {
		return PackRef{}, fmt.Errorf("store pack: sink returned blob id %q", clip(st.BlobID))
	}
	if st.EndEpoch > maxJSONInt {
		return PackRef{}, fmt.Errorf("store pack: sink returned end epoch %d", st.EndEpoch)
	}
	bd.stats.packs.Add(1)
	bd.stats.bytesUploaded.Add(p.Size)
	return PackRef{BlobID: st.BlobID, Size: p.Size, EndEpoch: st.EndEpoch, IndexLength: p.IndexLength}, nil
}
