package repo

import (
	"context"
	"crypto/sha256"
)

type sealedObj struct {
	h    Handle
	data []byte
	plen int
	buf  *[]byte  // data's pooled buffer, nil for a one-off
	pool *bufPool // buf's pool
}

// seal is a sealer stage: chunk id, dedup, AES-256-GCM.
func (bd *build) seal(ctx context.Context) error {
	for m := range bd.chunks {
		if !m.known {
			m.id = sha256.Sum256(m.data)
		}
		if m.slot != nil {
			*m.slot = m.id
		}
		h := Handle{TypeChunk, m.id}
		if !bd.claim(h) {
			bd.stats.chunksReused.Add(1)
			m.ref.release()
			continue
		}
		err := bd.sealObject(ctx, h, m.data)
		m.ref.release()
		if err != nil {
			return err
		}
		bd.stats.chunksNew.Add(1)
	}
	return nil
}

func (bd *build) sealObject(ctx context.Context, h Handle, plain []byte) error {
	o, err := bd.sealBuf(ctx, h, plain)
	if err != nil {
		return err
	}
	select {
	case bd.objects <- o:
		return nil
	case <-ctx.Done():
		o.pool.put(o.buf)
		return ctx.Err()
	}
}

// sealBuf seals plain as h into a pooled buffer (a large tree: a buffer
// of its own).
func (bd *build) sealBuf(ctx context.Context, h Handle, plain []byte) (sealedObj, error) {
	var pool *bufPool
	switch n := len(plain) + Overhead; {
	case n <= bd.sealedSm.size:
		pool = bd.sealedSm
	case n <= bd.sealed.size:
		pool = bd.sealed
	}
	var buf *[]byte
	var out []byte
	if pool != nil {
		var err error
		if buf, err = pool.get(ctx); err != nil {
			return sealedObj{}, err
		}
		out = (*buf)[:0]
	} else {
		out = make([]byte, 0, len(plain)+Overhead)
	}
	out, err := bd.keys.sealTo(out, h.Type, plain)
	if err != nil {
		pool.put(buf)
		return sealedObj{}, err
	}
	return sealedObj{h: h, data: out, plen: len(plain), buf: buf, pool: pool}, nil
}

func (bd *build) available(h Handle) bool {
	bd.mu.Lock()
	_, ok := bd.pending[h]
	bd.mu.Unlock()
	if ok {
		return true
	}
	_, ok = bd.locate(h)
	return ok
}

// locate returns where an indexed pack outside the repack set holds h.
func (bd *build) locate(h Handle) (objLoc, bool) {
	l, ok := bd.in.Index.lookup(h)
	if ok && bd.repack[l.pack.ref.BlobID] {
		l, ok = bd.alt[h]
	}
	return l, ok
}

// claim reports whether h must be sealed now: no live pack outside the
// repack set holds it and no other stage claimed it.
func (bd *build) claim(h Handle) bool {
	if _, ok := bd.locate(h); ok {
		return false
	}
	bd.mu.Lock()
	defer bd.mu.Unlock()
	if _, ok := bd.pending[h]; ok {
		return false
	}
	bd.pending[h] = struct{}{}
	return true
}
