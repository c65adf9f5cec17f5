package redstuff

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// The decoders of untrusted ids and quilt bytes: a blob id, a patch id
// (from a pointer record, an aggregator's answer), and a quilt blob's
// index and patch headers (from a stored quilt). Seeds: testdata/fuzz.

func FuzzParseID(f *testing.F) {
	f.Add("CmzciFdWJP1IIM-rD3cqXlVBXYM0fpAfHahZBvkaZUI")
	f.Add("CmzciFdWJP1IIM-rD3cqXlVBXYM0fpAfHahZBvkaZUJ")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			if !errors.Is(err, ErrID) {
				t.Fatalf("ParseID(%q): %v is not ErrID", s, err)
			}
			return
		}
		if id.String() != s {
			t.Fatalf("ParseID(%q) = %s: not canonical", s, id)
		}
	})
}

func FuzzParsePatchID(f *testing.F) {
	f.Add(PatchID{Quilt: ID{9}, Version: 1, Start: 1, End: 5}.String())
	f.Add("3GPQL3HZNnFhN_F7l5Aa-X1VOtAKwIsg9zuWk8R81v4BAQACAA")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePatchID(s)
		if err != nil {
			if !errors.Is(err, ErrQuilt) {
				t.Fatalf("ParsePatchID(%q): %v is not ErrQuilt", s, err)
			}
			return
		}
		if p.String() != s || p.Version != QuiltVersion || p.Start >= p.End {
			t.Fatalf("ParsePatchID(%q) = %+v", s, p)
		}
	})
}

// FuzzReadQuilt reads fuzzed bytes as a quilt blob over 10 shards (a
// 4×7 matrix; the bytes are padded to whole 2-byte-or-more symbols) and
// every patch its index names.
func FuzzReadQuilt(f *testing.F) {
	for _, c := range fuzzQuiltSeeds() {
		_, b := writeQuiltSeed(c)
		f.Add(b)
	}
	f.Add([]byte{1, 3, 0, 0, 0, 1, 7, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		const unit = 4 * 7 * 2
		if len(b) > 1<<16 {
			return
		}
		blob := make([]byte, max(unit, (len(b)+unit-1)/unit*unit))
		copy(blob, b)
		q, err := ReadQuilt(bytes.NewReader(blob), int64(len(blob)), 10)
		if err != nil {
			if !errors.Is(err, ErrQuilt) {
				t.Fatalf("ReadQuilt: %v is not ErrQuilt", err)
			}
			return
		}
		for i, pt := range q.Patches {
			if pt.Start < q.IndexColumns || pt.End <= pt.Start || pt.End > q.Params.Secondary || (i > 0 && q.Patches[i-1].End != pt.Start) {
				t.Fatalf("patch %d at %d..%d", i, pt.Start, pt.End)
			}
			rd, err := q.OpenPatch(bytes.NewReader(blob), i)
			if err != nil {
				if !errors.Is(err, ErrQuilt) {
					t.Fatalf("OpenPatch: %v is not ErrQuilt", err)
				}
				continue
			}
			n, err := io.Copy(io.Discard, rd)
			if err != nil || n != q.Patches[i].Size || n > int64(pt.End-pt.Start)*q.ColumnSize() {
				t.Fatalf("patch %d: %d bytes of %d, %v", i, n, q.Patches[i].Size, err)
			}
		}
	})
}

func fuzzQuiltSeeds() []quiltCase {
	return []quiltCase{
		{shards: 10, blobs: []QuiltBlob{{Identifier: "p000", Size: 5}}, data: [][]byte{[]byte("hello")}},
		{shards: 10, blobs: []QuiltBlob{{Identifier: "a", Size: 0}, {Identifier: "b", Tags: map[string]string{"k": "v", "kk": "w"}, Size: 3}},
			data: [][]byte{nil, []byte("abc")}},
		{shards: 10, blobs: []QuiltBlob{{Identifier: "x", Size: 200}, {Identifier: "y", Size: 1}}, data: [][]byte{make([]byte, 200), {7}}},
	}
}

func writeQuiltSeed(c quiltCase) (*Quilt, []byte) {
	q, err := LayoutQuilt(c.shards, c.blobs)
	if err != nil {
		panic(err)
	}
	out := make(memWriterAt, q.Params.Size)
	if err := q.Write(out, c.open); err != nil {
		panic(err)
	}
	return q, out
}
