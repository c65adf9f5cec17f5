package redstuff

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/blake2b"
)

// ID is a Walrus blob id: 32 bytes, written as URL-safe base64 without
// padding (43 characters).
type ID [32]byte

// IDLen is the length of an id's text form.
const IDLen = 43

var idEncoding = base64.RawURLEncoding.Strict()

func (id ID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ErrID means text that is not a blob id.
var ErrID = errors.New("redstuff: not a blob id")

// ParseID parses the text form of a blob id.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != IDLen {
		return id, fmt.Errorf("%w: %d characters, want %d", ErrID, len(s), IDLen)
	}
	n, err := idEncoding.Decode(id[:], []byte(s))
	if err != nil || n != len(id) {
		return ID{}, fmt.Errorf("%w: not URL-safe base64 of 32 bytes", ErrID)
	}
	return id, nil
}

// Pair is one sliver pair's metadata: the Merkle roots over the symbols
// of its primary and its secondary sliver.
type Pair struct{ Primary, Secondary Node }

// Metadata is what a blob id commits to.
type Metadata struct {
	ID    ID
	Size  int64
	Root  Node   // the Merkle root over the pairs
	Pairs []Pair // one per shard, by sliver pair index
}

// IDOf is the blob id of size bytes whose sliver pairs' Merkle root is
// root: Blake2b-256(encoding type ‖ u64le size ‖ root).
func IDOf(root Node, size int64) ID {
	var b [1 + 8 + 32]byte
	b[0] = EncodingRS2
	binary.LittleEndian.PutUint64(b[1:9], uint64(size))
	copy(b[9:], root[:])
	return blake2b.Sum256(b[:])
}

// Sum is the blob id of b over shards shards.
func Sum(b []byte, shards int) (ID, error) {
	m, err := Compute(context.Background(), bytes.NewReader(b), int64(len(b)), shards)
	if err != nil {
		return ID{}, err
	}
	return m.ID, nil
}

// Compute encodes the size bytes r holds over shards shards and returns
// the blob's metadata and id, as Walrus computes them. It reads r twice
// (rows in order, then column by column) and holds about half the blob
// (the secondary code's recovery columns) plus a few MiB; it uses every
// core (GOMAXPROCS). Computations run one at a time in a process (others
// wait, or give up when ctx ends): each already takes every core, so
// running several at once would only add up their memory.
func Compute(ctx context.Context, r io.ReaderAt, size int64, shards int) (*Metadata, error) {
	return ComputeWith(ctx, r, size, shards, Options{})
}

// Options adjust a computation.
type Options struct {
	// ScratchDir, when set, holds the recovery columns of a blob whose
	// columns take more than SpillAbove bytes, in a file removed as soon
	// as it is created, instead of memory: the id of a pack of any size
	// then takes a few MiB. Where no file can be created there, they are
	// held in memory.
	ScratchDir string
}

// SpillAbove is the size of recovery columns (about half the blob) from
// which Options.ScratchDir is used: below it, a file's system calls cost
// more than its memory saves.
const SpillAbove = 4 << 20

// ComputeWith is Compute with options.
func ComputeWith(ctx context.Context, r io.ReaderAt, size int64, shards int, o Options) (*Metadata, error) {
	pr, err := NewParams(shards, size)
	if err != nil {
		return nil, err
	}
	select {
	case computing <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-computing }()
	e, err := newEncoder(pr, r, o.ScratchDir)
	if err != nil {
		return nil, err
	}
	defer e.rec.close()
	if err := e.rows(ctx); err != nil {
		return nil, err
	}
	if err := e.columns(ctx); err != nil {
		return nil, err
	}
	n := pr.Shards
	m := &Metadata{Size: size, Pairs: make([]Pair, n)}
	leaves := make([]Node, n)
	buf := make([]byte, 0, 65)
	for i := range n {
		m.Pairs[i] = Pair{Primary: e.rowTree[i].root(), Secondary: e.colRoot[n-1-i]}
		leaves[i] = leafHash(buf, append(m.Pairs[i].Primary[:], m.Pairs[i].Secondary[:]...))
	}
	m.Root = merkleRoot(leaves)
	m.ID = IDOf(m.Root, size)
	return m, nil
}

// computing admits one Compute at a time.
var computing = make(chan struct{}, 1)

// encoder is one blob id computation.
//
// The blob is a p×s matrix of z-byte symbols, row-major. Walrus expands
// it to n×n: each row by the secondary code (s source, n−s recovery
// symbols: columns s..n−1), then each of the n columns by the primary
// code (p source, n−p recovery symbols: rows p..n−1). Symbol (i, c) of
// the expanded matrix is a Merkle leaf of row i's tree (primary sliver
// i, in sliver pair i) and of column c's tree (secondary sliver c, in
// sliver pair n−1−c).
//
// Rows go first (workers take batches of rows, reading them in order)
// and keep the recovery columns; then workers take blocks of 2^k
// columns, encode them, hash every symbol, finish each column's tree and
// hand each row the root of its block's subtree, which are folded into
// the rows' trees in column order.
type encoder struct {
	pr   Params
	r    io.ReaderAt
	prim *code
	sec  *code
	rec  recCols // the secondary code's recovery columns

	rowTree []frontier
	colRoot []Node
	zero    *zeroRoots
}

func newEncoder(pr Params, r io.ReaderAt, scratch string) (*encoder, error) {
	n, p, s := pr.Shards, pr.Primary, pr.Secondary
	prim, err := codeFor(p, n-p)
	if err != nil {
		return nil, err
	}
	sec, err := codeFor(s, n-s)
	if err != nil {
		return nil, err
	}
	e := &encoder{pr: pr, r: r, prim: prim, sec: sec, rowTree: make([]frontier, n), colRoot: make([]Node, n),
		zero: newZeroRoots(pr.Symbol)}
	for i := range e.rowTree {
		e.rowTree[i].zero = e.zero
	}
	e.rec = newRecCols(n-s, p*pr.Symbol, scratch)
	return e, nil
}

// shardTarget is the shard size the batches aim at: big enough to keep
// per-call costs small (a butterfly group's multiplication table costs
// about as much as 512 elements), small enough that a worker's shards
// (about 3.5 per symbol of the code, with the transform's two chunks)
// stay in the cache and in the memory budget: a worker holds about
// 3.5·n·shardTarget bytes (3.5 MiB at 1000 shards), where 4 KiB took
// 64 MiB of peak RSS for a 10 MiB blob's id and 1 KiB 49 MiB, at the
// same CPU time.
const shardTarget = 1 << 10

func workers(jobs int) int { return max(1, min(runtime.GOMAXPROCS(0), jobs)) }

// parallel runs job(worker, i) for i in [0, jobs) on workers goroutines.
func parallel(ctx context.Context, jobs, nw int, job func(w, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, nw)
	for w := range nw {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= jobs {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[w] = err
					return
				}
				if err := job(w, i); err != nil {
					errs[w] = err
					next.Store(int64(jobs)) // the others stop at their next job
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// readAt fills b from r at off, zeros past size.
func readAt(r io.ReaderAt, b []byte, off, size int64) error {
	n := 0
	if off < size {
		want := int(min(int64(len(b)), size-off))
		k, err := r.ReadAt(b[:want], off)
		if k < want {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("redstuff: read blob at %d: %w", off, err)
		}
		n = want
	}
	clear(b[n:])
	return nil
}

// rows encodes the matrix's rows with the secondary code.
func (e *encoder) rows(ctx context.Context) error {
	n, p, s, z := e.pr.Shards, e.pr.Primary, e.pr.Secondary, e.pr.Symbol
	per := max(1, min(p, shardTarget/z))
	jobs := (p + per - 1) / per
	nw := workers(jobs)
	ls := newLanes(per, z)
	type state struct {
		src, rec [][]byte
		sc       *scratch
		row      []byte
	}
	st := make([]*state, nw)
	for w := range st {
		st[w] = &state{src: shards(s, ls.size), rec: shards(n-s, ls.size), sc: e.sec.newScratch(ls.size),
			row: make([]byte, per*s*z)}
	}
	rowLen := int64(s * z)
	return parallel(ctx, jobs, nw, func(w, job int) error {
		t := st[w]
		r0 := job * per
		cnt := min(per, p-r0)
		buf := t.row[:cnt*s*z]
		if err := readAt(e.r, buf, int64(r0)*rowLen, e.pr.Size); err != nil {
			return err
		}
		for i := range cnt {
			row := buf[i*s*z:]
			for j := range s {
				ls.put(t.src[j], i, row[j*z:(j+1)*z])
			}
		}
		if err := e.sec.encode(t.src, t.rec, t.sc); err != nil {
			return err
		}
		out := t.row[:cnt*z] // the rows are in the shards now
		for j := range n - s {
			for i := range cnt {
				ls.get(out[i*z:(i+1)*z], t.rec[j], i)
			}
			if err := e.rec.put(j, r0*z, out); err != nil {
				return err
			}
		}
		return nil
	})
}

func shards(k, size int) [][]byte {
	buf := make([]byte, k*size)
	out := make([][]byte, k)
	for i := range out {
		out[i] = buf[i*size : (i+1)*size : (i+1)*size]
	}
	return out
}

// blockResult is one column block's contribution to every row's tree:
// nodes[i] (per row, in order) at the given levels.
type blockResult struct {
	levels []uint8
	nodes  [][]Node
}

// columns encodes the expanded matrix's columns with the primary code,
// hashes every symbol and builds the trees.
func (e *encoder) columns(ctx context.Context) error {
	n, p, s, z := e.pr.Shards, e.pr.Primary, e.pr.Secondary, e.pr.Symbol
	// Blocks of 2^k columns, so a block's leaves of a row form complete
	// subtrees of the row's tree; at least two blocks, for the cores.
	width := 1 << (bits.Len(uint(max(1, shardTarget/z))) - 1)
	width = min(width, 1<<(bits.Len(uint(max(1, n/2)))-1))
	jobs := (n + width - 1) / width
	nw := workers(jobs)
	lc := newLanes(width, z)
	type state struct {
		src, rec [][]byte
		sc       *scratch
		seg, sym []byte
		col      []byte // a recovery column read back
		hbuf     []byte
		leaves   []Node
		cols     []frontier
		row      frontier
	}
	st := make([]*state, nw)
	for w := range st {
		st[w] = &state{src: shards(p, lc.size), rec: shards(n-p, lc.size), sc: e.prim.newScratch(lc.size),
			seg: make([]byte, width*z), sym: make([]byte, z), hbuf: make([]byte, 0, 1+z),
			leaves: make([]Node, width), cols: make([]frontier, width), row: frontier{zero: e.zero}}
		if _, ok := e.rec.(*fileCols); ok {
			st[w].col = make([]byte, p*z) // memCols hands out its own
		}
		for c := range st[w].cols {
			st[w].cols[c].zero = e.zero
		}
	}
	var small *leafTable
	if z == 2 {
		small = smallLeaves()
	}
	results := make([]*blockResult, jobs)
	var mu sync.Mutex
	next := 0
	rowLen := int64(s * z)
	return parallel(ctx, jobs, nw, func(w, job int) error {
		t := st[w]
		c0 := job * width
		cnt := min(width, n-c0)
		// Source rows: the blob's columns, then the recovery columns.
		if c0 < s {
			k := min(cnt, s-c0)
			for r := range p {
				if err := readAt(e.r, t.seg[:k*z], int64(r)*rowLen+int64(c0*z), e.pr.Size); err != nil {
					return err
				}
				for c := range k {
					lc.put(t.src[r], c, t.seg[c*z:(c+1)*z])
				}
			}
		}
		for c := max(0, s-c0); c < cnt; c++ {
			col, err := e.rec.get(c0+c-s, t.col)
			if err != nil {
				return err
			}
			for r := range p {
				lc.put(t.src[r], c, col[r*z:(r+1)*z])
			}
		}
		if err := e.prim.encode(t.src, t.rec, t.sc); err != nil {
			return err
		}
		res := &blockResult{nodes: make([][]Node, n)}
		for c := range cnt {
			t.cols[c].reset()
		}
		for i := range n {
			shard := t.src[min(i, p-1)]
			if i >= p {
				shard = t.rec[i-p]
			}
			for c := range cnt {
				lc.get(t.sym, shard, c)
				switch {
				case allZero(t.sym):
					t.leaves[c] = e.zero[0]
				case small != nil:
					t.leaves[c] = small.leaf(t.sym)
				default:
					t.leaves[c] = leafHash(t.hbuf, t.sym)
				}
				t.cols[c].push(0, t.leaves[c])
			}
			if cnt == width {
				res.levels = []uint8{uint8(bits.Len(uint(width)) - 1)}
				res.nodes[i] = []Node{zeroMerkleRoot(e.zero, t.leaves[:cnt])}
				continue
			}
			t.row.reset()
			for c := range cnt {
				t.row.push(0, t.leaves[c])
			}
			res.levels = append(res.levels[:0], t.row.level...)
			res.nodes[i] = append([]Node(nil), t.row.node...)
		}
		for c := range cnt {
			e.colRoot[c0+c] = t.cols[c].root()
		}
		// Fold finished blocks into the rows' trees, in column order.
		mu.Lock()
		defer mu.Unlock()
		results[job] = res
		for next < jobs && results[next] != nil {
			b := results[next]
			for i := range n {
				for k, nd := range b.nodes[i] {
					e.rowTree[i].push(b.levels[k], nd)
				}
			}
			results[next] = nil
			next++
		}
		return nil
	})
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
