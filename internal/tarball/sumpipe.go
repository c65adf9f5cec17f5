package tarball

import "crypto/sha256"

// sumPipe hashes the files Extract writes on another goroutine, in order,
// without the extractor ever waiting for a digest: file contents are read
// from the archive straight into a chunk buffer, written to disk from
// there, and the chunk (which may hold many small files, or part of a big
// one) goes to the hasher once full. Packing small files into one hand-off
// keeps goroutine wake-ups rare; the digests are collected with finish.
type sumPipe struct {
	in   chan *sumChunk
	free chan *sumChunk
	out  chan [][32]byte
	cur  *sumChunk
}

type sumChunk struct {
	data []byte // len = bytes used
	ends []int  // offsets in data where a file ends
}

func newSumPipe() *sumPipe {
	p := &sumPipe{
		in:   make(chan *sumChunk, pipeBufs),
		free: make(chan *sumChunk, pipeBufs),
		out:  make(chan [][32]byte, 1),
	}
	for range pipeBufs {
		p.free <- &sumChunk{data: make([]byte, 0, pipeChunk)}
	}
	p.cur = <-p.free
	go p.loop()
	return p
}

func (p *sumPipe) loop() {
	h := sha256.New()
	var sums [][32]byte
	for c := range p.in {
		if c == nil { // finish
			p.out <- sums
			sums = nil
			continue
		}
		pos := 0
		for _, e := range c.ends {
			h.Write(c.data[pos:e])
			var s [32]byte
			h.Sum(s[:0])
			h.Reset()
			sums = append(sums, s)
			pos = e
		}
		h.Write(c.data[pos:]) // the start of a file continued in the next chunk
		c.data, c.ends = c.data[:0], c.ends[:0]
		p.free <- c
	}
	close(p.out)
}

// space returns room to read the next bytes of the current file into; the
// caller reports what it used with fill. It hands full chunks over.
func (p *sumPipe) space() []byte {
	if len(p.cur.data) == cap(p.cur.data) {
		p.in <- p.cur
		p.cur = <-p.free
	}
	return p.cur.data[len(p.cur.data):cap(p.cur.data)]
}

func (p *sumPipe) fill(n int) { p.cur.data = p.cur.data[:len(p.cur.data)+n] }

// endFile marks the end of the current file.
func (p *sumPipe) endFile() { p.cur.ends = append(p.cur.ends, len(p.cur.data)) }

// finish returns the digests of all files ended since the last finish, in
// order.
func (p *sumPipe) finish() [][32]byte {
	p.in <- p.cur
	p.cur = <-p.free
	p.in <- nil
	return <-p.out
}

// close stops the hasher.
func (p *sumPipe) close() {
	close(p.in)
	for range p.out {
	}
}
