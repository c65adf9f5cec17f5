package repo

import (
	"errors"
	"io"

	"github.com/restic/chunker"
)

// Content-defined chunking, fast. The boundaries are exactly those of
// restic/chunker v0.4.0 with the same polynomial, bounds and split mask
// (docs/format-v3.md §4; TestCutterMatchesChunker and FuzzCutter compare
// them), computed differently:
//
// restic's chunker keeps a Rabin fingerprint of the last 64 bytes and,
// once a chunk holds MinSize bytes, cuts where the fingerprint has no bit
// of the split mask set (or at MaxSize). That fingerprint is a function of
// the 64-byte window alone (the window starts zeroed and the chunker slides
// 64 chunk bytes through it before its first check), so where the
// "candidates" lie is a property of the data, independent of earlier cuts:
// a cut is the first candidate at least MinSize past the previous cut, or
// the MaxSize'th byte. The cutter finds candidates in independent lanes
// (sixteen in AVX-512 registers where the CPU has them, rabin16.go; else
// four in one loop), which the CPU runs side by side instead of waiting
// on one fingerprint's table lookups byte after byte, and keeps those
// found past a cut for the next chunk.

// window is the Rabin fingerprint's window.
const window = 64

// rabin holds the tables of one polynomial's rolling fingerprint.
type rabin struct {
	// out[b] is the fingerprint of b followed by window-1 zero bytes:
	// XORing it removes b from a window it is leaving.
	out [256]uint64
	// mod[b] reduces a fingerprint shifted left by 8 whose top byte (the
	// 8 bits above the degree) was b: it clears them and adds their
	// residue.
	mod   [256]uint64
	shift uint // degree - 8
	// vec holds out and mod split by nibble, for the vector scan:
	// out[b] = out[b&15] ^ out[b&0xf0] (both are linear in b over GF(2)),
	// as out[0:16], out[0x00,0x10,…,0xf0], then mod likewise.
	vec [64]uint64
}

// checkDegree refuses a polynomial the fingerprint tables cannot take.
func checkDegree(pol chunker.Pol) error {
	if deg := pol.Deg(); deg < 9 || deg > 53 {
		return errors.New("repo: chunker polynomial must have a degree between 9 and 53")
	}
	return nil
}

func newRabin(pol chunker.Pol) (*rabin, error) {
	if err := checkDegree(pol); err != nil {
		return nil, err
	}
	deg := pol.Deg()
	r := &rabin{shift: uint(deg - 8)}
	for b := range 256 {
		h := chunker.Pol(b)
		for range window - 1 {
			h = (h << 8).Mod(pol)
		}
		r.out[b] = uint64(h)
		top := chunker.Pol(b) << uint(deg)
		r.mod[b] = uint64(top.Mod(pol) | top)
	}
	for n := range 16 {
		r.vec[n], r.vec[16+n] = r.out[n], r.out[n<<4]
		r.vec[32+n], r.vec[48+n] = r.mod[n], r.mod[n<<4]
	}
	return r, nil
}

// fingerprint returns the fingerprint of the window w (window bytes).
func (r *rabin) fingerprint(w []byte) uint64 {
	var d uint64
	for _, b := range w[:window] {
		d = (d<<8 | uint64(b)) ^ r.mod[byte(d>>r.shift)]
	}
	return d
}

// Lane sizes: a scan of fewer positions than 16×minLane16 runs in the
// portable four lanes, of fewer than 4×minLane in one lane; a scan round
// covers at most 4×laneLen positions, which bounds the candidates kept
// (all of them, for degenerate data such as zeros). A cut makes the rest
// of its round useless (the next chunk starts MinChunk
// later), about half a round per chunk: 16 KiB rounds waste ~3% of the
// scan where 64 KiB ones wasted ~11%, and cost ~1.6% in lane set-up.
const (
	minLane = 256
	laneLen = 4 << 10
)

// scan appends to found (as base+p) every position p in [from, to) whose
// window buf[p-window:p] has a fingerprint with no bit of mask set, in
// increasing order. It needs window <= from and to <= len(buf)+1. hits is
// the lanes' scratch.
func (r *rabin) scan(buf []byte, from, to int, mask uint64, base int64, found []int64, hits *[16][]int64) []int64 {
	if haveRabin16 && r.shift == 53-8 && (to-from)/16 >= minLane16 {
		return r.scan16(buf, from, to, mask, base, found, hits)
	}
	L := (to - from) / 4
	if L < minLane || r.shift != 53-8 {
		return r.scanLane(buf, from, to, mask, base, found)
	}
	// Lane j checks positions [aj, aj+L), aj = from+j*L: at step k its
	// window moves from aj+k to aj+k+1, w[j][k] leaving and
	// w[j][k+window] entering.
	var w [4][]byte
	var d [4]uint64
	for j := range w {
		a := from + j*L
		w[j] = buf[a-window : a+L-1]
		d[j] = r.fingerprint(buf[a-window:])
		hits[j] = hits[j][:0]
		if d[j]&mask == 0 {
			hits[j] = append(hits[j], base+int64(a))
		}
	}
	for k := 0; ; k++ {
		// run4 returns at the first step after which a lane hits.
		if k = r.run4(w[0], w[1], w[2], w[3], &d, k, mask); k == L-1 {
			break
		}
		for j := range d {
			if d[j]&mask == 0 {
				hits[j] = append(hits[j], base+int64(from+j*L+k+1))
			}
		}
	}
	for _, h := range hits[:4] {
		found = append(found, h...)
	}
	return r.scanLane(buf, from+4*L, to, mask, base, found)
}

// run4 moves the four lanes' fingerprints d from step k on until one of
// them has no bit of mask set (it returns that step) or the windows end
// (it returns len(w0)-window). The shift is the constant of a degree-53
// polynomial, the only degree format v3 derives: a variable shift would
// cost a register the loop has not got.
func (r *rabin) run4(w0, w1, w2, w3 []byte, d *[4]uint64, k int, mask uint64) int {
	const shift = 53 - 8
	m := len(w0) - window
	if len(w1) < len(w0) || len(w2) < len(w0) || len(w3) < len(w0) || k < 0 {
		panic("repo: uneven lanes")
	}
	out, mod := &r.out, &r.mod
	d0, d1, d2, d3 := d[0], d[1], d[2], d[3]
	for ; k < m; k++ {
		x := d0 ^ out[w0[k]]
		d0 = (x<<8 | uint64(w0[k+window])) ^ mod[byte(x>>shift)]
		x = d1 ^ out[w1[k]]
		d1 = (x<<8 | uint64(w1[k+window])) ^ mod[byte(x>>shift)]
		x = d2 ^ out[w2[k]]
		d2 = (x<<8 | uint64(w2[k+window])) ^ mod[byte(x>>shift)]
		x = d3 ^ out[w3[k]]
		d3 = (x<<8 | uint64(w3[k+window])) ^ mod[byte(x>>shift)]
		if d0&mask == 0 || d1&mask == 0 || d2&mask == 0 || d3&mask == 0 {
			break
		}
	}
	d[0], d[1], d[2], d[3] = d0, d1, d2, d3
	return k
}

// scanLane is scan in one lane.
func (r *rabin) scanLane(buf []byte, from, to int, mask uint64, base int64, found []int64) []int64 {
	if from >= to {
		return found
	}
	d := r.fingerprint(buf[from-window:])
	if d&mask == 0 {
		found = append(found, base+int64(from))
	}
	for p := from + 1; p < to; p++ {
		x := d ^ r.out[buf[p-1-window]]
		d = (x<<8 | uint64(buf[p-1])) ^ r.mod[byte(x>>r.shift)]
		if d&mask == 0 {
			found = append(found, base+int64(p))
		}
	}
	return found
}

// readMax bounds one read of the cutter.
const readMax = 512 << 10

// cutterBuf is a cutter's read buffer: a chunk of up to MaxChunk bytes
// and a scan round past it always fit.
const cutterBuf = 2 << 20

// cutter cuts a stream into chunks (restic/chunker's boundaries, see
// above). Reset it for each file; its buffers are reused.
type cutter struct {
	r        *rabin
	mask     uint64
	min, max int64 // chunk bounds (min >= window)
	rd       io.Reader

	buf   []byte // stream bytes [base, base+n)
	base  int64
	n     int
	eof   bool
	empty int // reads in a row that returned nothing

	start   int64       // stream offset where the next chunk begins
	scanned int64       // candidates p < scanned (p >= start+min) are all in cands
	cands   []int64     // ascending
	head    int         // cands[:head] are behind start+min
	hits    [16][]int64 // scan's scratch
}

func newCutter(r *rabin, minSize, maxSize int64, avgBits int) *cutter {
	return &cutter{r: r, min: minSize, max: maxSize, mask: 1<<avgBits - 1, buf: make([]byte, max(cutterBuf, int(maxSize)+4*laneLen+window))}
}

func (c *cutter) reset(rd io.Reader) {
	c.rd, c.base, c.n, c.eof, c.empty = rd, 0, 0, false, 0
	c.start, c.scanned, c.cands, c.head = 0, 0, c.cands[:0], 0
}

// next appends the next chunk to dst and returns it; io.EOF after the
// last one. A read error is returned as is.
func (c *cutter) next(dst []byte) ([]byte, error) {
	t, limit := c.start+c.min, c.start+c.max
	var cut int64
	for {
		for c.head < len(c.cands) && c.cands[c.head] < t {
			c.head++
		}
		if c.head < len(c.cands) {
			cut = min(c.cands[c.head], limit)
			break
		}
		c.scanned = max(c.scanned, t)
		if c.scanned > limit {
			cut = limit
			break
		}
		end := c.base + int64(c.n)
		want := min(c.scanned+4*laneLen, limit+1) // scan positions [scanned, want)
		if want-1 > end && !c.eof {
			if err := c.fill(); err != nil {
				return nil, err
			}
			continue
		}
		want = min(want, end+1)
		if c.scanned >= want {
			// The stream ended before any cut: the rest is the last chunk.
			if end == c.start {
				return nil, io.EOF
			}
			cut = end
			break
		}
		c.cands, c.head = c.cands[:0], 0
		c.cands = c.r.scan(c.buf, int(c.scanned-c.base), int(want-c.base), c.mask, c.base, c.cands, &c.hits)
		c.scanned = want
	}
	dst = append(dst, c.buf[c.start-c.base:cut-c.base]...)
	c.start = cut
	return dst, nil
}

// fill reads more of the stream, first moving the bytes from start on to
// the front of the buffer when room runs short.
func (c *cutter) fill() error {
	if len(c.buf)-c.n < 4*laneLen {
		keep := int(c.start - c.base)
		c.n = copy(c.buf, c.buf[keep:c.n])
		c.base = c.start
	}
	// Reads of at most readMax keep what the scan, the copy and the hash
	// touch next in the core's cache (1 MiB of L2 here), where reading
	// as much as the buffer holds (8 MiB) left the scan on L3.
	m, err := c.rd.Read(c.buf[c.n:min(len(c.buf), c.n+readMax)])
	c.n += m
	switch {
	case err == io.EOF:
		c.eof = true
	case err != nil:
		return err
	case m == 0:
		if c.empty++; c.empty > 100 {
			return io.ErrNoProgress
		}
		return nil
	}
	c.empty = 0
	return nil
}
