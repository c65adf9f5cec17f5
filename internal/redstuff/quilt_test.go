package redstuff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// memWriterAt is a quilt blob in memory.
type memWriterAt []byte

func (m memWriterAt) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m)) {
		return 0, errors.New("write past the end")
	}
	return copy(m[off:], p), nil
}

type quiltCase struct {
	shards int
	blobs  []QuiltBlob
	data   [][]byte
}

func (c quiltCase) open(i int) (io.Reader, error) { return bytes.NewReader(c.data[i]), nil }

func writeQuilt(t *testing.T, c quiltCase) (*Quilt, []byte) {
	t.Helper()
	q, err := LayoutQuilt(c.shards, c.blobs)
	if err != nil {
		t.Fatal(err)
	}
	out := make(memWriterAt, q.Params.Size)
	if err := q.Write(out, c.open); err != nil {
		t.Fatal(err)
	}
	return q, out
}

func randomIdentifier(r *rand.Rand) string {
	const alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.é"
	n := 1 + r.IntN(20)
	var b strings.Builder
	b.WriteByte(alpha[r.IntN(52)])
	for b.Len() < n {
		b.WriteString(string([]rune(alpha)[r.IntN(len([]rune(alpha)))]))
	}
	return b.String()
}

func randomQuilt(r *rand.Rand, shards, most, largest int) quiltCase {
	_, s := sourceCounts(shards)
	c := quiltCase{shards: shards}
	seen := map[string]bool{}
	for range 1 + r.IntN(min(most, s-1)) {
		id := randomIdentifier(r)
		if seen[id] {
			continue
		}
		seen[id] = true
		var tags map[string]string
		if r.IntN(3) == 0 {
			tags = map[string]string{}
			for range 1 + r.IntN(4) {
				tags[strings.Repeat("k", 1+r.IntN(6))+randomIdentifier(r)] = randomIdentifier(r)
			}
		}
		data := make([]byte, r.IntN(largest+1))
		fillRandom(r, data)
		c.blobs = append(c.blobs, QuiltBlob{Identifier: id, Tags: tags, Size: int64(len(data))})
		c.data = append(c.data, data)
	}
	return c
}

// TestWASMQuilts lays out random quilts with this package and with
// @mysten/walrus's encodeQuilt and requires the same bytes, the same
// quilt id (walrus-core's) and the same patch ids; then reads every patch
// back from the quilt bytes.
func TestWASMQuilts(t *testing.T) {
	r := rand.New(rand.NewPCG(seed(t), 3))
	dir := t.TempDir()
	cases := []quiltCase{
		// hermesd's own shape: identifiers p000, p001…, packs of a few KiB
		{shards: 1000},
		randomQuilt(r, 1000, 40, 20000),
		randomQuilt(r, 1000, 3, 300000),
		randomQuilt(r, 10, 6, 3000),
		randomQuilt(r, 10, 6, 50),
		randomQuilt(r, 100, 60, 2000),
	}
	for i := range 30 {
		d := make([]byte, 1+r.IntN(8000))
		fillRandom(r, d)
		cases[0].blobs = append(cases[0].blobs, QuiltBlob{Identifier: fmt.Sprintf("p%03d", i), Size: int64(len(d))})
		cases[0].data = append(cases[0].data, d)
	}
	var tasks []map[string]any
	for ci, c := range cases {
		var blobs []map[string]any
		for i, b := range c.blobs {
			blobs = append(blobs, map[string]any{"identifier": b.Identifier, "tags": b.Tags, "file": writeBlob(t, dir, c.data[i])})
		}
		tasks = append(tasks, map[string]any{"op": "quilt", "shards": c.shards, "blobs": blobs, "out": fmt.Sprintf("%s/quilt-%d", dir, ci)})
	}
	js := runWalrus(t, tasks)
	for ci, c := range cases {
		q, got := writeQuilt(t, c)
		want, err := os.ReadFile(fmt.Sprintf("%s/quilt-%d", dir, ci))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("quilt %d (%d blobs, %d shards): %d bytes, encodeQuilt %d; first difference at %d",
				ci, len(c.blobs), c.shards, len(got), len(want), firstDiff(got, want))
		}
		m, err := Compute(context.Background(), bytes.NewReader(got), int64(len(got)), c.shards)
		if err != nil {
			t.Fatal(err)
		}
		if m.ID.String() != js[ci].ID {
			t.Fatalf("quilt %d: id %s, walrus-core %s", ci, m.ID, js[ci].ID)
		}
		if len(js[ci].Patches) != len(q.Patches) {
			t.Fatalf("quilt %d: %d patches, encodeQuilt %d", ci, len(q.Patches), len(js[ci].Patches))
		}
		for i, pt := range q.Patches {
			jp := js[ci].Patches[i]
			pid := q.PatchID(m.ID, i)
			if pt.Identifier != jp.Identifier || pt.Start != jp.Start || pt.End != jp.End || pid.String() != jp.PatchID {
				t.Fatalf("quilt %d patch %d: %s %d..%d %s, encodeQuilt %s %d..%d %s", ci, i, pt.Identifier, pt.Start, pt.End, pid,
					jp.Identifier, jp.Start, jp.End, jp.PatchID)
			}
			if back, err := ParsePatchID(jp.PatchID); err != nil || back != pid {
				t.Fatalf("ParsePatchID(%s) = %+v, %v", jp.PatchID, back, err)
			}
		}
		checkReadBack(t, c, got)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// checkReadBack reads the quilt's index and every patch from its bytes.
func checkReadBack(t *testing.T, c quiltCase, blob []byte) {
	t.Helper()
	q, err := ReadQuilt(bytes.NewReader(blob), int64(len(blob)), c.shards)
	if err != nil {
		t.Fatal(err)
	}
	laid, _ := LayoutQuilt(c.shards, c.blobs)
	if !bytes.Equal(q.Index, laid.Index) || q.IndexColumns != laid.IndexColumns || len(q.Patches) != len(laid.Patches) {
		t.Fatalf("index read back differs")
	}
	for i := range q.Patches {
		rd, err := q.OpenPatch(bytes.NewReader(blob), i)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rd)
		if err != nil {
			t.Fatal(err)
		}
		want := c.data[laid.Patches[i].Blob]
		if !bytes.Equal(data, want) || q.Patches[i].Size != int64(len(want)) || q.Patches[i].Identifier != laid.Patches[i].Identifier ||
			q.Patches[i].Start != laid.Patches[i].Start || q.Patches[i].End != laid.Patches[i].End ||
			!maps.Equal(q.Patches[i].Tags, laid.Patches[i].Tags) && len(laid.Patches[i].Tags) > 0 {
			t.Fatalf("patch %d (%s) reads back wrong", i, q.Patches[i].Identifier)
		}
	}
}

func TestQuiltRules(t *testing.T) {
	bad := []struct {
		name  string
		blobs []QuiltBlob
	}{
		{"none", nil},
		{"empty identifier", []QuiltBlob{{Identifier: ""}}},
		{"trailing space", []QuiltBlob{{Identifier: "a "}}},
		{"control", []QuiltBlob{{Identifier: "a\x01b"}}},
		{"not UTF-8", []QuiltBlob{{Identifier: "a\xff"}}},
		{"twice", []QuiltBlob{{Identifier: "a"}, {Identifier: "a"}}},
		{"too long", []QuiltBlob{{Identifier: strings.Repeat("x", MaxIdentifier)}}},
		{"negative", []QuiltBlob{{Identifier: "a", Size: -1}}},
		{"too many for 10 shards", []QuiltBlob{{Identifier: "a"}, {Identifier: "b"}, {Identifier: "c"}, {Identifier: "d"},
			{Identifier: "e"}, {Identifier: "f"}, {Identifier: "g"}}},
		{"too large", []QuiltBlob{{Identifier: "a", Size: 28 * 65534}}},
	}
	for _, tc := range bad {
		if _, err := LayoutQuilt(10, tc.blobs); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	// The most blobs: s−1, each in one column of its own.
	var blobs []QuiltBlob
	for i := range 6 {
		blobs = append(blobs, QuiltBlob{Identifier: fmt.Sprint(i), Size: 10})
	}
	q, err := LayoutQuilt(10, blobs)
	if err != nil {
		t.Fatal(err)
	}
	if q.IndexColumns != 1 || q.Patches[5].End != 7 {
		t.Fatalf("six blobs over 10 shards: index in %d columns, last patch ends at %d", q.IndexColumns, q.Patches[5].End)
	}
	// A blob reader that ends early fails the write.
	c := quiltCase{shards: 10, blobs: []QuiltBlob{{Identifier: "a", Size: 100}}, data: [][]byte{make([]byte, 50)}}
	q, _ = LayoutQuilt(10, c.blobs)
	if err := q.Write(make(memWriterAt, q.Params.Size), c.open); err == nil || !strings.Contains(err.Error(), "short") {
		t.Fatalf("a short blob: %v", err)
	}
}

func TestPatchID(t *testing.T) {
	id := PatchID{Quilt: ID{1, 2, 3}, Version: 1, Start: 3, End: 700}
	s := id.String()
	if len(s) != PatchIDLen {
		t.Fatalf("%s: %d characters", s, len(s))
	}
	if back, err := ParsePatchID(s); err != nil || back != id {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, bad := range []PatchID{{Version: 2, Start: 1, End: 2}, {Version: 1, Start: 2, End: 2}, {Version: 1, Start: 3, End: 2}} {
		if _, err := ParsePatchID(bad.String()); !errors.Is(err, ErrQuilt) {
			t.Errorf("%+v accepted: %v", bad, err)
		}
	}
	for _, bad := range []string{"", s[:49], s + "A", strings.Replace(s, s[:1], "+", 1)} {
		if _, err := ParsePatchID(bad); !errors.Is(err, ErrQuilt) {
			t.Errorf("%q accepted: %v", bad, err)
		}
	}
}
