package redstuff

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/reedsolomon"

	"github.com/hermesd/hermesd/internal/nodetest"
)

// The cross-checks run Walrus's own code beside this package:
// walrus-core's RS2 encoder compiled to WebAssembly (@mysten/walrus-wasm
// 0.3.0) and the quilt layout of @mysten/walrus 1.2.13, installed into
// .deps/walrus by scripts/fetch-walrus-sdk.sh (which the tests run
// themselves when it is missing), through testdata/walrus.mjs. They need
// Node.js and fail, never skip, without it.

var sdkOnce struct {
	sync.Once
	dir string
	err error
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func sdkDir(t testing.TB) string {
	t.Helper()
	sdkOnce.Do(func() {
		root, err := repoRoot()
		if err != nil {
			sdkOnce.err = err
			return
		}
		sdkOnce.dir = filepath.Join(root, ".deps", "walrus")
		cmd := exec.Command(filepath.Join(root, "scripts", "fetch-walrus-sdk.sh"))
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			sdkOnce.err = fmt.Errorf("scripts/fetch-walrus-sdk.sh: %v\n%s", err, out)
		}
	})
	if sdkOnce.err != nil {
		t.Fatalf("Walrus's own encoder is needed for this test: %v", sdkOnce.err)
	}
	return sdkOnce.dir
}

type jsResult struct {
	Error     string    `json:"error"`
	ID        string    `json:"id"`
	Root      string    `json:"root"`
	Primary   []string  `json:"primary"`
	Secondary []string  `json:"secondary"`
	Patches   []jsPatch `json:"patches"`
}

type jsPatch struct {
	Identifier string `json:"identifier"`
	Start      int    `json:"start"`
	End        int    `json:"end"`
	PatchID    string `json:"patchId"`
}

// runWalrus runs tasks through testdata/walrus.mjs.
func runWalrus(t testing.TB, tasks []map[string]any) []jsResult {
	t.Helper()
	tt, ok := t.(*testing.T)
	if !ok {
		t.Fatal("runWalrus needs a *testing.T")
	}
	var out []jsResult
	nodetest.RunModule(tt, sdkDir(t), filepath.Join("testdata", "walrus.mjs"), "the cross-checks with Walrus's own encoder", tasks, &out)
	if len(out) != len(tasks) {
		t.Fatalf("walrus.mjs: %d results for %d tasks", len(out), len(tasks))
	}
	for i, r := range out {
		if r.Error != "" {
			t.Fatalf("walrus.mjs task %d (%v): %s", i, tasks[i]["op"], r.Error)
		}
	}
	return out
}

// seed is the cross-checks' random seed: HERMESD_REDSTUFF_SEED, else the
// clock (logged, so a failure can be replayed).
func seed(t testing.TB) uint64 {
	t.Helper()
	if s := os.Getenv("HERMESD_REDSTUFF_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HERMESD_REDSTUFF_SEED: %v", err)
		}
		return v
	}
	v := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay with HERMESD_REDSTUFF_SEED=%d)", v, v)
	return v
}

func writeBlob(t testing.TB, dir string, b []byte) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "blob-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// wasmSizes are the sizes the CI cross-check encodes over n shards: the
// edges (empty, one byte, the last size of each of the first symbol
// sizes and one over, a symbol of exactly one and of one-and-a-bit
// 64-byte Leopard blocks, over 1 MiB) and random ones.
func wasmSizes(r *rand.Rand, n, random int) []int {
	p, s := sourceCounts(n)
	ps := p * s
	sizes := []int{0, 1, 2, 2 * ps, 2*ps + 1, 4 * ps, 6*ps - 1, 64 * ps, 64*ps + 1}
	if n <= 100 {
		sizes = append(sizes, 130*ps+7, 1<<20+5)
	} else {
		sizes = append(sizes, 1<<20+3, 3<<20+1)
	}
	for range random {
		// Log-uniform up to 2 MiB: most blobs small, some large.
		sizes = append(sizes, int(math.Exp2(r.Float64()*21))-1)
	}
	largest := ps * 65534
	for i := range sizes {
		sizes[i] = min(sizes[i], largest)
	}
	return sizes
}

// TestWASMBlobIDs computes blob ids of random blobs with this package and
// with walrus-core (WASM) and requires them equal: at 1000 shards
// (mainnet, testnet) and at small shard counts. About a second of WASM per
// blob at 1000 shards; the bench (BENCH_ONLY=blobid) runs a thousand up
// to 64 MiB.
func TestWASMBlobIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(seed(t), 1))
	dir := t.TempDir()
	type blob struct {
		shards int
		data   []byte
	}
	var blobs []blob
	for _, c := range []struct{ shards, random int }{{1000, 4}, {10, 30}, {4, 4}, {7, 4}, {100, 4}} {
		for _, size := range wasmSizes(r, c.shards, c.random) {
			b := make([]byte, size)
			fillRandom(r, b)
			blobs = append(blobs, blob{c.shards, b})
		}
	}
	tasks := make([]map[string]any, len(blobs))
	for i, b := range blobs {
		tasks[i] = map[string]any{"op": "id", "shards": b.shards, "file": writeBlob(t, dir, b.data)}
	}
	js := runWalrus(t, tasks)
	sizes := map[int]int{}
	for i, b := range blobs {
		m, err := Compute(context.Background(), bytes.NewReader(b.data), int64(len(b.data)), b.shards)
		if err != nil {
			t.Fatal(err)
		}
		if m.ID.String() != js[i].ID || base64.StdEncoding.EncodeToString(m.Root[:]) != js[i].Root {
			t.Errorf("%d shards, %d bytes: id %s root %x, walrus-core says id %s root %s", b.shards, len(b.data), m.ID, m.Root, js[i].ID, js[i].Root)
		}
		sizes[b.shards]++
	}
	t.Logf("%d blobs agree (by shard count: %v)", len(blobs), sizes)
}

func fillRandom(r *rand.Rand, b []byte) {
	for i := 0; i < len(b); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(b[i:], w[:])
	}
}

// expand computes the whole n×n expanded matrix of a small blob the
// plain way, one codeword at a time: the reference the streaming encoder
// and Walrus's slivers are compared with.
func expand(t *testing.T, blob []byte, n int) (Params, [][][]byte) {
	t.Helper()
	pr, err := NewParams(n, int64(len(blob)))
	if err != nil {
		t.Fatal(err)
	}
	p, s, z := pr.Primary, pr.Secondary, pr.Symbol
	m := make([][][]byte, n)
	for i := range m {
		m[i] = make([][]byte, n)
		for c := range m[i] {
			m[i][c] = make([]byte, z)
		}
	}
	padded := make([]byte, p*s*z)
	copy(padded, blob)
	for i := range p {
		for c := range s {
			copy(m[i][c], padded[(i*s+c)*z:])
		}
	}
	encodeOne := func(k int, in [][]byte) [][]byte {
		cd, err := codeFor(k, n-k)
		if err != nil {
			t.Fatal(err)
		}
		l := newLanes(1, z)
		src, rec := shards(k, l.size), shards(n-k, l.size)
		for j := range k {
			l.put(src[j], 0, in[j])
		}
		if err := cd.encode(src, rec, cd.newScratch(l.size)); err != nil {
			t.Fatal(err)
		}
		out := make([][]byte, n-k)
		for j := range out {
			out[j] = make([]byte, z)
			l.get(out[j], rec[j], 0)
		}
		return out
	}
	for i := range p {
		copyAll(m[i][s:], encodeOne(s, m[i][:s]))
	}
	for c := range n {
		col := make([][]byte, p)
		for i := range p {
			col[i] = m[i][c]
		}
		for j, sym := range encodeOne(p, col) {
			m[p+j][c] = sym
		}
	}
	return pr, m
}

func copyAll(dst, src [][]byte) {
	for i := range src {
		copy(dst[i], src[i])
	}
}

// sliverData parses BCS SliverData: symbols {data: vector<u8>,
// symbol_size: u16}, index: u16.
func sliverData(t *testing.T, b64 string) (data []byte, symbol, index int) {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) != n+4 {
		t.Fatalf("SliverData of %d bytes: bad length prefix", len(b))
	}
	data = b[k : k+int(n)]
	rest := b[k+int(n):]
	return data, int(binary.LittleEndian.Uint16(rest)), int(binary.LittleEndian.Uint16(rest[2:]))
}

// TestWASMSlivers compares the Reed–Solomon outputs themselves with
// walrus-core's slivers (reed-solomon-simd): primary sliver i is row i of
// the expanded matrix (its s source-row symbols), the secondary sliver of
// pair i is column n−1−i (its p symbols). Rows p..n−1 come from the
// primary code in low rate, columns s..n−1 from the secondary code in high
// rate. It also records why the low rate needs the construction in
// rs.go: klauspost's high-rate encoder with the same counts computes other
// symbols.
func TestWASMSlivers(t *testing.T) {
	r := rand.New(rand.NewPCG(seed(t), 2))
	dir := t.TempDir()
	cases := []struct{ shards, size int }{
		{10, 28*130 + 11}, // 132-byte symbols: two Leopard blocks and a tail
		{10, 28 * 64},     // exactly one block
		{100, 34*67*2 + 1},
		{1000, 3000},
	}
	var tasks []map[string]any
	blobs := make([][]byte, len(cases))
	for i, c := range cases {
		blobs[i] = make([]byte, c.size)
		fillRandom(r, blobs[i])
		tasks = append(tasks, map[string]any{"op": "slivers", "shards": c.shards, "file": writeBlob(t, dir, blobs[i])})
	}
	js := runWalrus(t, tasks)
	for ci, c := range cases {
		pr, m := expand(t, blobs[ci], c.shards)
		n, p, s, z := pr.Shards, pr.Primary, pr.Secondary, pr.Symbol
		got, err := Sum(blobs[ci], n)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != js[ci].ID {
			t.Errorf("%d shards: id %s, walrus-core %s", n, got, js[ci].ID)
		}
		if len(js[ci].Primary) != n || len(js[ci].Secondary) != n {
			t.Fatalf("%d shards: %d+%d slivers", n, len(js[ci].Primary), len(js[ci].Secondary))
		}
		lowDiffers := false
		for i := range n {
			data, sym, idx := sliverData(t, js[ci].Primary[i])
			if sym != z || idx != i || len(data) != s*z {
				t.Fatalf("%d shards: primary sliver %d: symbol %d index %d length %d", n, i, sym, idx, len(data))
			}
			for c := range s {
				if !bytes.Equal(data[c*z:(c+1)*z], m[i][c]) {
					t.Fatalf("%d shards: row %d column %d: Go %x, reed-solomon-simd %x", n, i, c, m[i][c], data[c*z:(c+1)*z])
				}
			}
			data, sym, idx = sliverData(t, js[ci].Secondary[i])
			col := n - 1 - i
			if sym != z || idx != col || len(data) != p*z {
				t.Fatalf("%d shards: secondary sliver of pair %d: symbol %d index %d length %d", n, i, sym, idx, len(data))
			}
			for row := range p {
				if !bytes.Equal(data[row*z:(row+1)*z], m[row][col]) {
					t.Fatalf("%d shards: row %d column %d: Go %x, reed-solomon-simd %x", n, row, col, m[row][col], data[row*z:(row+1)*z])
				}
			}
		}
		// klauspost's encoder used directly for the primary code.
		high, _ := useHighRate(p, n-p)
		if high {
			continue
		}
		enc, err := reedsolomon.New(p, n-p, reedsolomon.WithLeopardGF16(true))
		if err != nil {
			t.Fatal(err)
		}
		l := newLanes(1, z)
		for c := 0; c < s && !lowDiffers; c++ {
			sh := shards(n, l.size)
			for i := range p {
				l.put(sh[i], 0, m[i][c])
			}
			if err := enc.Encode(sh); err != nil {
				t.Fatal(err)
			}
			sym := make([]byte, z)
			for i := p; i < n; i++ {
				l.get(sym, sh[i], 0)
				if !bytes.Equal(sym, m[i][c]) {
					lowDiffers = true
				}
			}
		}
		if !lowDiffers {
			t.Errorf("%d shards: klauspost's high-rate %d+%d encoder matched reed-solomon-simd's low rate", n, p, n-p)
		}
	}
}
