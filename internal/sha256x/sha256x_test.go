package sha256x

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

func randBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// FIPS 180-4 examples (NIST's "SHA256.pdf" and the one-million-'a'
// message).
func TestVectors(t *testing.T) {
	for in, want := range map[string]string{
		"":    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq": "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
		string(bytes.Repeat([]byte("a"), 1e6)):                     "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
	} {
		d := New()
		d.Write([]byte(in))
		if got := d.Sum256(); hex.EncodeToString(got[:]) != want {
			t.Errorf("SHA-256 of %d bytes = %x, want %s", len(in), got, want)
		}
	}
}

// check feeds the same writes to crypto/sha256 and to a and b through
// WriteBoth (after each's own prefix) and compares all digests.
func check(t testing.TB, preA, preB []byte, writes [][]byte) {
	t.Helper()
	a, b := New(), New()
	ra, rb := sha256.New(), sha256.New()
	a.Write(preA)
	ra.Write(preA)
	b.Write(preB)
	rb.Write(preB)
	for _, p := range writes {
		WriteBoth(a, b, p)
		ra.Write(p)
		rb.Write(p)
	}
	if ga, gb := a.Sum256(), b.Sum256(); !bytes.Equal(ga[:], ra.Sum(nil)) || !bytes.Equal(gb[:], rb.Sum(nil)) {
		t.Fatalf("prefixes %d/%d bytes, writes of %v: digests differ from crypto/sha256", len(preA), len(preB), lens(writes))
	}
}

func lens(ws [][]byte) []int {
	var n []int
	for _, w := range ws {
		n = append(n, len(w))
	}
	return n
}

// TestWriteBoth: any split of the partial blocks and the writes gives
// both digests right, through the paired blocks and the single ones.
func TestWriteBoth(t *testing.T) {
	if !havePair {
		t.Log("no SHA-NI (or purego): WriteBoth is two plain passes, compared here all the same")
	}
	data := randBytes(1, 1<<20)
	for _, pa := range []int{0, 1, 55, 63, 64, 65, 127} {
		for _, pb := range []int{0, 3, 56, 64, 100} {
			for _, ws := range [][]int{{0}, {1}, {63}, {64}, {65}, {1000}, {4096, 1, 63, 64, 7777}, {1 << 19, 1 << 19}} {
				var writes [][]byte
				off := 0
				for _, n := range ws {
					writes = append(writes, data[off:off+n])
					off += n
				}
				check(t, data[len(data)-pa:], data[len(data)/2:len(data)/2+pb], writes)
			}
		}
	}
	// One digest twice.
	d, r := New(), sha256.New()
	WriteBoth(d, d, data[:1000])
	r.Write(data[:1000])
	r.Write(data[:1000])
	if got := d.Sum256(); !bytes.Equal(got[:], r.Sum(nil)) {
		t.Fatal("WriteBoth(d, d) is not d.Write twice")
	}
}

// TestAssemblyMatchesGeneric compares the block functions directly.
func TestAssemblyMatchesGeneric(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 17} {
		pa, pb := randBytes(uint64(n), n*blockSize), randBytes(uint64(n+100), n*blockSize)
		ha, hb, ga, gb := iv, iv, iv, iv
		ha[3] ^= uint32(n) // an arbitrary state, not only the IV
		ga[3] ^= uint32(n)
		blocksPair(&ha, &hb, pa, pb)
		blocksGeneric(&ga, pa)
		blocksGeneric(&gb, pb)
		if ha != ga || hb != gb {
			t.Fatalf("%d blocks: paired %x %x, generic %x %x", n, ha, hb, ga, gb)
		}
		h := ga
		g := ga
		blocks(&h, pb)
		blocksGeneric(&g, pb)
		if h != g {
			t.Fatalf("%d blocks: single %x, generic %x", n, h, g)
		}
	}
}

func FuzzWriteBoth(f *testing.F) {
	f.Add([]byte("abc"), uint8(3), uint8(70), uint16(200))
	f.Add(make([]byte, 300), uint8(0), uint8(64), uint16(64))
	f.Fuzz(func(t *testing.T, data []byte, pa, pb uint8, split uint16) {
		a, b := int(pa)%(len(data)+1), int(pb)%(len(data)+1)
		s := int(split) % (len(data) + 1)
		check(t, data[:a], data[:b], [][]byte{data[:s], data[s:]})
	})
}

func BenchmarkWriteBoth(b *testing.B) {
	data := randBytes(1, 1<<20)
	b.SetBytes(int64(len(data)))
	x, y := New(), New()
	for b.Loop() {
		WriteBoth(x, y, data)
	}
}

func BenchmarkTwoPasses(b *testing.B) {
	data := randBytes(1, 1<<20)
	b.SetBytes(int64(len(data)))
	x, y := sha256.New(), sha256.New()
	for b.Loop() {
		x.Write(data)
		y.Write(data)
	}
}

func BenchmarkWrite(b *testing.B) {
	data := randBytes(1, 1<<20)
	b.SetBytes(int64(len(data)))
	x := New()
	for b.Loop() {
		x.Write(data)
	}
}
