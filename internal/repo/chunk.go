package repo

import (
	"context"
	"sync"
	"sync/atomic"
)

// Chunking parameters (docs/format-v3.md §4). Boundaries are exactly
// restic/chunker's with these bounds, a split mask of AvgBits bits and the
// agent's polynomial; a file of at most MinChunk bytes is one chunk (the
// chunker could not cut it anyway), read without running the chunker.
//
// An edit inside a large file changes the chunk holding it and at most its
// neighbour: with a mean chunk of about MinChunk + 2^AvgBits = 320 KiB, one
// 4 KiB page rewritten inside a 200 MB SQLite database uploads about 0.3% of
// it plus the file's tree (32 bytes per chunk id); see TestPageEdit.
const (
	MinChunk = 64 << 10
	MaxChunk = 1 << 20
	AvgBits  = 18
)

// bufPool is a bounded set of equal buffers: get blocks while count are
// in use, which bounds the pipeline's memory whatever the brain's size.
// Between snapshots (park) the free buffers wait in the process's idle
// pool of their size (idlePool), shared by every Builder: another agent's
// snapshot reuses them, and what none takes goes back to the GC, so that a
// daemon of many agents keeps no set of buffers for each, and a thousand
// agents starting together do not each allocate a set of their own.
type bufPool struct {
	size int
	ch   chan *[]byte  // free buffers of the running snapshot
	made chan struct{} // tokens for buffers not taken out yet
	idle *sync.Pool    // free buffers between snapshots
}

func newBufPool(size, count int) *bufPool {
	p := &bufPool{size: size, ch: make(chan *[]byte, count), made: make(chan struct{}, count), idle: idlePool(size)}
	for range count {
		p.made <- struct{}{}
	}
	return p
}

var (
	idleMu    sync.Mutex
	idlePools = map[int]*sync.Pool{} // by buffer size: a few constants
)

// idlePool is the process's pool of free buffers of size bytes.
func idlePool(size int) *sync.Pool {
	idleMu.Lock()
	defer idleMu.Unlock()
	p := idlePools[size]
	if p == nil {
		p = &sync.Pool{New: func() any {
			b := make([]byte, size)
			return &b
		}}
		idlePools[size] = p
	}
	return p
}

func (p *bufPool) get(ctx context.Context) (*[]byte, error) {
	select {
	case b := <-p.ch:
		return b, nil
	default:
	}
	select {
	case b := <-p.ch:
		return b, nil
	case <-p.made:
		return p.idle.Get().(*[]byte), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *bufPool) put(b *[]byte) {
	if b == nil {
		return
	}
	select {
	case p.ch <- b:
	default: // not ours (cannot happen); let the GC have it
	}
}

// park moves the free buffers to the idle pool; every buffer must have
// been put back.
func (p *bufPool) park() {
	for {
		select {
		case b := <-p.ch:
			p.idle.Put(b)
			p.made <- struct{}{}
		default:
			return
		}
	}
}

// buffers are the bounded pools of a Builder's pipeline.
type buffers struct {
	workers, uploads int
	packSize         int64
	small, big       *bufPool // file and chunk contents
	sealed, sealedSm *bufPool // sealed chunks, large and small
}

// buffers returns the pools for this configuration, made on first use.
func (b *Builder) buffers(w, u int) *buffers {
	b.bufMu.Lock()
	defer b.bufMu.Unlock()
	if x := b.bufs; x != nil && x.workers == w && x.uploads == u && x.packSize == b.MaxPackSize {
		return x
	}
	b.bufs = &buffers{
		workers: w, uploads: u, packSize: b.MaxPackSize,
		small:    newBufPool(MinChunk+1, 8*w),
		big:      newBufPool(MaxChunk, w+2),
		sealed:   newBufPool(MaxChunk+Overhead, w+2),
		sealedSm: newBufPool(MinChunk+1+Overhead, 4*w),
	}
	return b.bufs
}

// dropBuffers forgets x: a failed snapshot may not have returned all of
// its buffers.
func (b *Builder) dropBuffers(x *buffers) {
	b.bufMu.Lock()
	defer b.bufMu.Unlock()
	if b.bufs == x {
		b.bufs = nil
	}
}

// bufRef shares a pooled buffer between stages: the last release returns
// it to its pool.
type bufRef struct {
	n    atomic.Int32
	buf  *[]byte
	pool *bufPool
}

func newBufRef(buf *[]byte, pool *bufPool, users int32) *bufRef {
	r := &bufRef{buf: buf, pool: pool}
	r.n.Store(users)
	return r
}

func (r *bufRef) release() {
	if r.n.Add(-1) == 0 {
		r.pool.put(r.buf)
	}
}
