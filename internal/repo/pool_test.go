package repo

import (
	"runtime/debug"
	"testing"
)

// The buffers one Builder parks are the next Builder's: a thousand agents
// starting together reuse a few sets of buffers instead of allocating one
// each (measured: 58 MB of parked buffers live at the peak of 1,000
// agents starting, each in a pool of its own).
func TestParkedBuffersAreShared(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // a collection would empty the pool
	const n = 16                                     // the race detector drops a quarter of a sync.Pool's puts
	a := newBufPool(MinChunk+1, n)
	mine := map[*[]byte]bool{}
	var got []*[]byte
	for range n {
		b, err := a.get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		mine[b] = true
		got = append(got, b)
	}
	for _, b := range got {
		a.put(b)
	}
	a.park()
	b := newBufPool(MinChunk+1, n)
	reused := 0
	for range n {
		buf, err := b.get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(*buf) != MinChunk+1 {
			t.Fatalf("buffer of %d bytes, want %d", len(*buf), MinChunk+1)
		}
		if mine[buf] {
			reused++
		}
	}
	if reused == 0 {
		t.Fatalf("none of the %d buffers another pool parked was reused", n)
	}
	t.Logf("%d of %d parked buffers reused", reused, n)
}
