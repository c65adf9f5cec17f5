package cipher

import (
	"bytes"
	"io"
	"testing"
)

func BenchmarkEncryptV2(b *testing.B) {
	const size = 64 << 20
	chunk := plaintext(256 << 10)
	b.SetBytes(size)
	for b.Loop() {
		w, err := Encrypt(io.Discard, testKey, testIdentity)
		if err != nil {
			b.Fatal(err)
		}
		for range size / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecryptV2(b *testing.B) {
	const size = 64 << 20
	blob := encryptV2(b, testKey, testIdentity, plaintext(size), 1<<20)
	buf := make([]byte, 256<<10)
	b.SetBytes(size)
	for b.Loop() {
		r, err := Decrypt(bytes.NewReader(blob), testKey, testIdentity)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.CopyBuffer(io.Discard, onlyReader{r}, buf); err != nil || n != size {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkSealV1(b *testing.B) {
	pt := plaintext(16 << 20)
	b.SetBytes(int64(len(pt)))
	for b.Loop() {
		if _, err := SealV1(testKey, pt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenV1(b *testing.B) {
	pt := plaintext(16 << 20)
	env, err := SealV1(testKey, pt)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(pt)))
	for b.Loop() {
		if _, err := OpenV1(testKey, env); err != nil {
			b.Fatal(err)
		}
	}
}
