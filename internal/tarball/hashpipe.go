package tarball

import "crypto/sha256"

// hashPipe computes SHA-256 in its own goroutine while the caller moves the
// same bytes elsewhere (into the archive and the encryptor, or into an
// extracted file). For a big file the hash, the slowest stage, then
// overlaps with all the rest. The buffers circulate: buffer hands out a
// free one, hash queues it, the hasher returns it when done.
type hashPipe struct {
	in   chan []byte // chunks to hash; nil ends the current stream
	free chan []byte
	sums chan [32]byte
	done chan struct{}
}

const (
	pipeChunk = 256 << 10
	pipeBufs  = 4
)

func newHashPipe() *hashPipe {
	p := &hashPipe{
		in:   make(chan []byte, pipeBufs),
		free: make(chan []byte, pipeBufs),
		sums: make(chan [32]byte, 1),
		done: make(chan struct{}),
	}
	for range pipeBufs {
		p.free <- make([]byte, pipeChunk)
	}
	go p.loop()
	return p
}

func (p *hashPipe) loop() {
	defer close(p.done)
	h := sha256.New()
	for b := range p.in {
		if b == nil {
			var s [32]byte
			h.Sum(s[:0])
			h.Reset()
			p.sums <- s
			continue
		}
		h.Write(b)
		p.free <- b[:cap(b)]
	}
}

// buffer returns a free chunk, waiting for the hasher to release one.
func (p *hashPipe) buffer() []byte { return <-p.free }

// hash queues b, a non-empty prefix of a chunk from buffer. Nobody may
// modify b until buffer hands it out again (readers of b are fine).
func (p *hashPipe) hash(b []byte) { p.in <- b }

// sum ends the current stream and returns its digest.
func (p *hashPipe) sum() [32]byte {
	p.in <- nil
	return <-p.sums
}

// close stops the hasher goroutine. A stream in progress is discarded.
func (p *hashPipe) close() {
	close(p.in)
	<-p.done
}
