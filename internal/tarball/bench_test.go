package tarball

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// makeMany writes n files of 1–8 KiB in a three-level tree, like
// perf.md's "many" dataset (scaled down).
func makeMany(b *testing.B, root string, n int) int64 {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 8<<10)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	var total int64
	for i := range n {
		top := []string{"skills", "patterns"}[i%2]
		p := filepath.Join(root, top, fmt.Sprintf("d%02d", (i/100)%10), fmt.Sprintf("e%03d", i/1000), fmt.Sprintf("f%06d.md", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		size := 1024 + r.IntN(7*1024)
		buf[0] = byte(i)
		if err := os.WriteFile(p, buf[:size], 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(size)
	}
	return total
}

func makeBig(b *testing.B, root string) int64 {
	big := make([]byte, 64<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(root, "memory.db"), big, 0o644); err != nil {
		b.Fatal(err)
	}
	return int64(len(big)) + makeMany(b, root, 200)
}

func benchWrite(b *testing.B, root string, total int64) {
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Write(b.Context(), io.Discard, root, WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteBig(b *testing.B) {
	root := b.TempDir()
	benchWrite(b, root, makeBig(b, root))
}

func BenchmarkWriteMany(b *testing.B) {
	root := b.TempDir()
	benchWrite(b, root, makeMany(b, root, 20_000))
}

func benchExtract(b *testing.B, root string, total int64) {
	var buf bytes.Buffer
	if _, err := Write(b.Context(), &buf, root, WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	// Fresh directories, never deleted during the run: extracting right
	// after removing a tree is ~8× slower on ext4 without a journal (see
	// the note on recently_deleted in scripts/bench.sh).
	out := b.TempDir()
	b.SetBytes(total)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		if _, err := Extract(b.Context(), bytes.NewReader(buf.Bytes()), filepath.Join(out, fmt.Sprint(i)), ExtractOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExtractBig(b *testing.B) {
	root := b.TempDir()
	benchExtract(b, root, makeBig(b, root))
}

func BenchmarkExtractMany(b *testing.B) {
	root := b.TempDir()
	benchExtract(b, root, makeMany(b, root, 5_000))
}
