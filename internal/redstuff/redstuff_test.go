package redstuff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
)

// pattern is the golden vectors' content: byte i is i·7 + i/251.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// Golden blob ids, computed by walrus-core (@mysten/walrus-wasm 0.3.0,
// BlobEncoder(shards).compute_metadata) over pattern(size): the edges of
// the symbol sizes (2-byte symbols up to 2·p·s bytes, one over; 66-byte
// symbols, a Leopard block and a tail), the largest blob 4 shards
// encode, and over 1 MiB.
var golden = []struct {
	shards, size int
	id           string
}{
	{4, 0, "CmzciFdWJP1IIM-rD3cqXlVBXYM0fpAfHahZBvkaZUI"},
	{4, 1, "rUbODN7fr7gy5snG6ZksDykbIy1aQ9C7DmaAl59hofk"},
	{4, 393204, "NAc49L0A159qhmxjiDhs4IblJnz7ti7MldtBfvpadpU"},
	{7, 1000, "50xKc-urnuLymWAsjGlSyxoLlh_mSfsaFuOXCoYuMmA"},
	{10, 0, "gLzpD29smKZiYJIWwKatudKr76kEprQeMPyAhuMbWd4"},
	{10, 1, "B8JP-LX6iddHMffJGU7HUxEBtx8WuYjCG1wLOtLWo8A"},
	{10, 29, "4PuFNX451SQoUUT1IwO4SVnH3ms270sWhEvdSXNFrGI"},
	{10, 3651, "_SgtOssGAMxkl6qwjmRR9_LjGiw5EYkt5XK6ctNUDmw"},
	{100, 4557, "Wg0elrUXPAihVkU0Ksn5Z3GXi3JW4xfU7lFqQZRKeG8"},
	{1000, 0, "3GPQL3HZNnFhN_F7l5Aa-X1VOtAKwIsg9zuWk8R81v4"},
	{1000, 17, "xOqLY2RlxJo9cPou1AEnmLEbS0QNIMFfopQ5-nOQjqo"},
	{1000, 445556, "nfXVMH3XiBL42z9KCZBOOuTiSnnRn7yqgnjOuHqKqaY"},
	{1000, 445557, "HdeXtOOLaNQ4jKGuokXa9wi0Ujc5ld5DbeE42NoNpgo"},
	{1000, 1048577, "9btN99ceu2LfxYsWb6CqykDTtPgYZ27DJN1Id7G2nvo"},
	{1000, 14257793, "MUXPNanvwv1vDpRY7bc3fptb20tyeSFYYg9JtP6m7M0"},
}

func TestGoldenIDs(t *testing.T) {
	for _, g := range golden {
		t.Run(fmt.Sprintf("%d shards %d bytes", g.shards, g.size), func(t *testing.T) {
			id, err := Sum(pattern(g.size), g.shards)
			if err != nil {
				t.Fatal(err)
			}
			if id.String() != g.id {
				t.Fatalf("id %s, want %s", id, g.id)
			}
			back, err := ParseID(g.id)
			if err != nil || back != id {
				t.Fatalf("ParseID(%s) = %x, %v", g.id, back, err)
			}
		})
	}
}

// TestMetadata checks the metadata against the plain expansion: each
// pair's primary hash is the tree over row i, its secondary hash the tree
// over column n−1−i, the id the hash over the tree of the pairs.
func TestMetadata(t *testing.T) {
	for _, c := range []struct{ shards, size int }{{10, 3651}, {13, 100}, {100, 20000}} {
		blob := pattern(c.size)
		pr, m := expand(t, blob, c.shards)
		got, err := Compute(context.Background(), bytes.NewReader(blob), int64(len(blob)), c.shards)
		if err != nil {
			t.Fatal(err)
		}
		n := pr.Shards
		buf := make([]byte, 0, 1+pr.Symbol)
		leaves := make([]Node, n)
		pairs := make([]Node, n)
		for i := range n {
			for c := range n {
				leaves[c] = leafHash(buf, m[i][c])
			}
			prim := merkleRoot(leaves)
			for r := range n {
				leaves[r] = leafHash(buf, m[r][n-1-i])
			}
			sec := merkleRoot(leaves)
			if got.Pairs[i] != (Pair{prim, sec}) {
				t.Fatalf("%d shards: pair %d differs", n, i)
			}
			pairs[i] = leafHash(buf, append(prim[:], sec[:]...))
		}
		root := merkleRoot(pairs)
		if got.Root != root || got.ID != IDOf(root, int64(len(blob))) || got.Size != int64(len(blob)) {
			t.Fatalf("%d shards: root or id differs", n)
		}
	}
}

// TestFrontier builds trees of every size up to 70 leaves leaf by leaf,
// and from aligned subtrees, and compares them with the level-by-level
// construction (Walrus's).
func TestFrontier(t *testing.T) {
	buf := make([]byte, 0, 9)
	for n := 0; n <= 70; n++ {
		leaves := make([]Node, n)
		for i := range leaves {
			leaves[i] = leafHash(buf, []byte(fmt.Sprint(i)))
		}
		var f, g frontier
		for _, l := range leaves {
			f.push(0, l)
		}
		// subtrees of 8, then the rest leaf by leaf
		i := 0
		for ; i+8 <= n; i += 8 {
			g.push(3, merkleRoot(append([]Node(nil), leaves[i:i+8]...)))
		}
		for ; i < n; i++ {
			g.push(0, leaves[i])
		}
		want := merkleRoot(append([]Node(nil), leaves...))
		if got := f.root(); got != want {
			t.Fatalf("%d leaves: frontier root differs", n)
		}
		if got := g.root(); got != want {
			t.Fatalf("%d leaves: root from subtrees differs", n)
		}
	}
	// Walrus's documented shapes: one leaf is its own root, none is empty.
	one := leafHash(buf, []byte("x"))
	if merkleRoot([]Node{one}) != one || merkleRoot(nil) != (Node{}) {
		t.Fatal("one leaf or no leaf")
	}
	a, b, c := leafHash(buf, []byte("a")), leafHash(buf, []byte("b")), leafHash(buf, []byte("c"))
	var empty Node
	ab, ce := innerHash(&a, &b), innerHash(&c, &empty)
	if merkleRoot([]Node{a, b, c}) != innerHash(&ab, &ce) {
		t.Fatal("three leaves: the odd one pairs with the empty node")
	}
}

// TestLanes round-trips symbols of every shape through the lane layout
// and pins its element mapping on one symbol of a block and a tail.
func TestLanes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, z := range []int{2, 4, 30, 62, 64, 66, 126, 128, 130, 302} {
		for _, w := range []int{1, 3, 16, 33} {
			l := newLanes(w, z)
			if l.size%64 != 0 || l.size < w*z {
				t.Fatalf("z=%d w=%d: shard size %d", z, w, l.size)
			}
			shard := make([]byte, l.size)
			syms := make([][]byte, w)
			for i := range syms {
				syms[i] = make([]byte, z)
				fillRandom(r, syms[i])
				l.put(shard, i, syms[i])
			}
			got := make([]byte, z)
			for i := range syms {
				l.get(got, shard, i)
				if !bytes.Equal(got, syms[i]) {
					t.Fatalf("z=%d w=%d: codeword %d differs", z, w, i)
				}
			}
		}
	}
	// One 68-byte symbol: its block as is, then 2 tail elements: low
	// bytes 64, 65 and high bytes 66, 67 (reed-solomon-simd's split).
	l := newLanes(1, 68)
	sym := make([]byte, 68)
	for i := range sym {
		sym[i] = byte(i + 1)
	}
	shard := make([]byte, l.size)
	l.put(shard, 0, sym)
	want := append(append([]byte(nil), sym[:64]...), 65, 66)
	want = append(want, make([]byte, 30)...)
	want = append(want, 67, 68)
	want = append(want, make([]byte, 30)...)
	if !bytes.Equal(shard, want) {
		t.Fatalf("layout of a 68-byte symbol:\n%v\nwant\n%v", shard, want)
	}
}

func TestParams(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, -1, 65536} {
		if _, err := NewParams(n, 1); !errors.Is(err, ErrShards) {
			t.Errorf("%d shards: %v, want ErrShards", n, err)
		}
	}
	max4, err := MaxBlobSize(4)
	if err != nil || max4 != 6*65534 {
		t.Fatalf("MaxBlobSize(4) = %d, %v", max4, err)
	}
	if _, err := Sum(make([]byte, max4+1), 4); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("one byte over the largest blob: %v", err)
	}
	if _, err := NewParams(10, -1); err == nil {
		t.Fatal("negative size accepted")
	}
	// The largest shard count both codes support, and one the rate rules
	// exclude.
	if err := CheckShards(1000); err != nil {
		t.Fatal(err)
	}
}

func TestParseID(t *testing.T) {
	for _, s := range []string{"", "abc", "CmzciFdWJP1IIM-rD3cqXlVBXYM0fpAfHahZBvkaZU", "CmzciFdWJP1IIM-rD3cqXlVBXYM0fpAfHahZBvkaZUI=",
		"CmzciFdWJP1IIM+rD3cqXlVBXYM0fpAfHahZBvkaZUI", "CmzciFdWJP1IIM-rD3cqXlVBXYM0fpAfHahZBvkaZUJ"} {
		if _, err := ParseID(s); !errors.Is(err, ErrID) {
			t.Errorf("ParseID(%q) = %v, want ErrID", s, err)
		}
	}
}

type failingReader struct{ after int64 }

func (f failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.after {
		return 0, errors.New("disk on fire")
	}
	return len(p), nil
}

func TestComputeErrors(t *testing.T) {
	if _, err := Compute(context.Background(), failingReader{after: 100}, 5000, 10); err == nil || !bytes.Contains([]byte(err.Error()), []byte("disk on fire")) {
		t.Fatalf("a failing reader: %v", err)
	}
	// A reader shorter than the size it is said to have.
	if _, err := Compute(context.Background(), bytes.NewReader(make([]byte, 10)), 5000, 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a short reader: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Compute(ctx, bytes.NewReader(make([]byte, 5000)), 5000, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context: %v", err)
	}
}

// TestScratchDir computes ids with the recovery columns in a file and
// compares them with the in-memory computation's (which the golden ids
// pin): a blob whose columns exceed SpillAbove, one just under, and a
// scratch directory that does not exist (memory, as without one). The
// file is gone when Compute returns.
func TestScratchDir(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 7))
	for _, c := range []struct {
		shards, size int
		dir          string
		file         bool
	}{
		{100, 12 << 20, dir, true},
		{100, 7 << 20, dir, false},
		{100, 12 << 20, dir + "/missing", false},
		{1000, 9 << 20, dir, true},
	} {
		blob := make([]byte, c.size)
		for i := range blob {
			blob[i] = byte(rng.Uint32())
		}
		pr, err := NewParams(c.shards, int64(c.size))
		if err != nil {
			t.Fatal(err)
		}
		rc := newRecCols(pr.Shards-pr.Secondary, pr.Primary*pr.Symbol, c.dir)
		if _, ok := rc.(*fileCols); ok != c.file {
			t.Fatalf("%d shards, %d bytes, scratch %s: %T, want a file: %v", c.shards, c.size, c.dir, rc, c.file)
		}
		rc.close()
		want, err := Compute(context.Background(), bytes.NewReader(blob), int64(len(blob)), c.shards)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ComputeWith(context.Background(), bytes.NewReader(blob), int64(len(blob)), c.shards, Options{ScratchDir: c.dir})
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != want.ID || got.Root != want.Root {
			t.Fatalf("%d shards, %d bytes: id %s with the scratch directory, %s without", c.shards, c.size, got.ID, want.ID)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the scratch directory holds %d files after the computations", len(left))
	}
}

// TestScratchWriteFails: a scratch file that refuses writes (a full
// disk) fails the id with the reason, not with another id.
func TestScratchWriteFails(t *testing.T) {
	f, err := os.Open(os.DevNull) // read-only: every WriteAt fails
	if err != nil {
		t.Fatal(err)
	}
	c := &fileCols{f: f, size: 10}
	if err := c.put(0, 0, make([]byte, 10)); err == nil || !strings.Contains(err.Error(), "keep recovery columns") {
		t.Fatalf("a refused write: %v", err)
	}
	c.close()
}

// The two-byte leaf table is one, shared by the ids computed while it is
// held, holds exactly the leaf of each symbol, and is the collector's
// once no id holds it (an idle daemon keeps no 2 MiB for it).
func TestSmallLeavesShared(t *testing.T) {
	a := smallLeaves()
	if b := smallLeaves(); a != b {
		t.Fatal("two tables while one is held")
	}
	for _, v := range []int{0, 1, 0x00ff, 0xff00, 0x1234, 0xffff} {
		sym := []byte{byte(v), byte(v >> 8)}
		if a.leaf(sym) != leafHash(nil, sym) {
			t.Fatalf("leaf of %x", sym)
		}
	}
	a = nil
	runtime.GC()
	leafTables.mu.Lock()
	kept := leafTables.last.Value() != nil
	leafTables.mu.Unlock()
	if kept {
		t.Error("the table outlived its last user and a collection")
	}
}
