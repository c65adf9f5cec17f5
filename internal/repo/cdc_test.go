package repo

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/restic/chunker"
)

// resticCuts returns the chunk lengths restic/chunker v0.4.0 cuts data
// into: the reference the cutter must match exactly.
func resticCuts(t testing.TB, data []byte, pol chunker.Pol, minSize, maxSize int64, avgBits int) []int {
	t.Helper()
	ch := chunker.NewWithBoundaries(bytes.NewReader(data), pol, uint(minSize), uint(maxSize))
	ch.SetAverageBits(avgBits)
	var cuts []int
	buf := make([]byte, 0, maxSize)
	for {
		c, err := ch.Next(buf)
		if err == io.EOF {
			return cuts
		}
		if err != nil {
			t.Fatal(err)
		}
		cuts = append(cuts, int(c.Length))
	}
}

func cutterCuts(t testing.TB, data []byte, c *cutter, rd io.Reader) []int {
	t.Helper()
	c.reset(rd)
	var cuts []int
	var got []byte
	buf := make([]byte, 0, c.max)
	for {
		b, err := c.next(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		cuts = append(cuts, len(b))
		got = append(got, b...)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("the chunks do not concatenate to the input (%d bytes, want %d)", len(got), len(data))
	}
	return cuts
}

func testPolynomial(t testing.TB, seed uint64) chunker.Pol {
	t.Helper()
	pol, err := chunker.DerivePolynomial(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}))
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// lowEntropy is data where candidates are dense: zeros, a short
// repeating pattern, then random bytes over a tiny alphabet.
func lowEntropy(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		switch {
		case i < n/3:
		case i < 2*n/3:
			b[i] = byte(i % 7)
		default:
			b[i] = byte(rng.IntN(2))
		}
	}
	return b
}

func TestCutterMatchesChunker(t *testing.T) {
	type tc struct {
		name             string
		data             []byte
		minSize, maxSize int64
		avgBits          int
	}
	var cases []tc
	for i, n := range []int{0, 1, 63, 64, MinChunk, MinChunk + 1, MaxChunk, MaxChunk + 1, 3*MaxChunk + 12345, 9 << 20} {
		cases = append(cases, tc{fmt.Sprintf("random/%d", n), randomBytes(uint64(100+i), n), MinChunk, MaxChunk, AvgBits})
	}
	cases = append(cases,
		tc{"zeros", make([]byte, 5<<20), MinChunk, MaxChunk, AvgBits},
		tc{"low-entropy", lowEntropy(1, 4<<20), MinChunk, MaxChunk, AvgBits},
		// Dense candidates, small bounds: every lane and round edge is hit.
		tc{"dense/avg4", randomBytes(7, 3<<20), 64, 4096, 4},
		tc{"dense/avg1", randomBytes(8, 1<<20), 100, 1000, 1},
		tc{"dense/min=max", randomBytes(9, 1<<20), 5000, 5000, 10},
		tc{"sparse/avg24", randomBytes(10, 6<<20), MinChunk, MaxChunk, 24},
		tc{"mid/avg12", randomBytes(11, 5<<20), 2048, 1 << 16, 12},
		tc{"low-entropy/small", lowEntropy(2, 1<<20), 64, 8192, 6},
	)
	for _, c := range cases {
		for _, seed := range []uint64{1, 2} {
			pol := testPolynomial(t, seed)
			r, err := newRabin(pol)
			if err != nil {
				t.Fatal(err)
			}
			want := resticCuts(t, c.data, pol, c.minSize, c.maxSize, c.avgBits)
			cu := newCutter(r, c.minSize, c.maxSize, c.avgBits)
			for _, rd := range []struct {
				name string
				r    io.Reader
			}{
				{"whole", bytes.NewReader(c.data)},
				{"onebyte", iotest.OneByteReader(bytes.NewReader(c.data))},
				{"halves", iotest.HalfReader(bytes.NewReader(c.data))},
			} {
				if rd.name == "onebyte" && len(c.data) > 1<<20 {
					continue
				}
				got := cutterCuts(t, c.data, cu, rd.r)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s, polynomial %d, %s reads: cuts %v, restic/chunker's %v", c.name, seed, rd.name, clipInts(got), clipInts(want))
				}
			}
		}
	}
}

func clipInts(xs []int) []int {
	if len(xs) > 20 {
		return xs[:20]
	}
	return xs
}

func TestCutterReadError(t *testing.T) {
	r, err := newRabin(testPolynomial(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	c := newCutter(r, MinChunk, MaxChunk, AvgBits)
	boom := fmt.Errorf("disk on fire")
	c.reset(io.MultiReader(bytes.NewReader(randomBytes(1, 3<<20)), iotest.ErrReader(boom)))
	for {
		_, err := c.next(nil)
		if err == boom {
			return
		}
		if err != nil {
			t.Fatalf("got %v, want the reader's error", err)
		}
	}
}

func FuzzCutter(f *testing.F) {
	f.Add([]byte("seed"), uint16(64), uint16(300), uint8(3))
	f.Add(make([]byte, 4000), uint16(100), uint16(100), uint8(1))
	f.Add(randomBytes(3, 20000), uint16(70), uint16(2000), uint8(5))
	pol := testPolynomial(f, 5)
	r, err := newRabin(pol)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, minSize, maxSize uint16, avgBits uint8) {
		lo := int64(minSize%2048) + window
		hi := lo + int64(maxSize%8192)
		bits := int(avgBits%12) + 1
		// Repeat the input so lanes and rounds are exercised.
		for len(data) > 0 && len(data) < 20000 {
			data = append(data, data...)
		}
		want := resticCuts(t, data, pol, lo, hi, bits)
		got := cutterCuts(t, data, newCutter(r, lo, hi, bits), bytes.NewReader(data))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("cuts %v, restic/chunker's %v", clipInts(got), clipInts(want))
		}
	})
}

func BenchmarkCutter(b *testing.B) {
	data := randomBytes(1, 64<<20)
	pol := testPolynomial(b, 1)
	b.Run("repo", func(b *testing.B) {
		r, err := newRabin(pol)
		if err != nil {
			b.Fatal(err)
		}
		c := newCutter(r, MinChunk, MaxChunk, AvgBits)
		buf := make([]byte, 0, MaxChunk)
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			c.reset(bytes.NewReader(data))
			for {
				if _, err := c.next(buf); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("restic", func(b *testing.B) {
		ch := chunker.NewWithBoundaries(nil, pol, MinChunk, MaxChunk)
		buf := make([]byte, 0, MaxChunk)
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			ch.ResetWithBoundaries(bytes.NewReader(data), pol, MinChunk, MaxChunk)
			ch.SetAverageBits(AvgBits)
			for {
				if _, err := ch.Next(buf); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func BenchmarkRabinScan(b *testing.B) {
	data := randomBytes(1, 1<<20)
	r, err := newRabin(testPolynomial(b, 1))
	if err != nil {
		b.Fatal(err)
	}
	var hits [16][]int64
	var found []int64
	b.SetBytes(int64(len(data) - window))
	for b.Loop() {
		found = r.scan(data, window, len(data)+1, 1<<AvgBits-1, 0, found[:0], &hits)
	}
}

// TestReadSmall: a small file is taken as it is when its fstat size is
// read, read to EOF when it shrank, and handed to the chunker when it grew
// past MinChunk.
func TestReadSmall(t *testing.T) {
	for _, tc := range []struct {
		name      string
		content   int // bytes the file holds when read
		statSize  int // what fstat said
		want      int
		wantErr   error
		oneByteRd bool
	}{
		{"as stat said", 1000, 1000, 1000, io.EOF, false},
		{"as stat said, short reads", 1000, 1000, 1000, io.EOF, true},
		{"empty", 0, 0, 0, io.EOF, false},
		{"shrank", 500, 1000, 500, io.EOF, false},
		{"grew a little", 1500, 1000, 1500, io.EOF, false},
		{"grew past MinChunk", MinChunk + 10, 1000, MinChunk + 1, nil, false},
	} {
		var r io.Reader = bytes.NewReader(randomBytes(1, tc.content))
		if tc.oneByteRd {
			r = iotest.OneByteReader(r)
		}
		got, err := readSmall(r, make([]byte, MinChunk+1), tc.statSize)
		if got != tc.want || err != tc.wantErr {
			t.Errorf("%s: read %d bytes, %v; want %d, %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestChunkTablesKeptWhileHeld: the fingerprint tables are shared while a
// snapshot holds them, not kept by the keys after (a thousand idle agents
// held 5.5 MB of them), and rebuilt the same.
func TestChunkTablesKeptWhileHeld(t *testing.T) {
	k := testKeys(t, testIdentity)
	want := func() rabin { // a snapshot's hold, ended on return
		held, err := k.chunkTables()
		if err != nil {
			t.Fatal(err)
		}
		if again, err := k.chunkTables(); err != nil || again != held {
			t.Fatalf("tables held by a snapshot were built again (%p, %p): %v", held, again, err)
		}
		return *held
	}()
	runtime.GC()
	if k.tables.Value() != nil {
		t.Fatal("the keys keep the tables after every snapshot let them go")
	}
	got, err := k.chunkTables()
	if err != nil || *got != want {
		t.Fatalf("rebuilt tables differ: %v", err)
	}
}
