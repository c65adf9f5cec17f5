package hash

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// makeMany writes n files of 1–8 KiB under skills/ and patterns/ in a
// three-level tree of about n/100 directories, like perf.md's "many".
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
		rel := filepath.Join(top, fmt.Sprintf("d%02d", (i/100)%10), fmt.Sprintf("e%03d", i/1000), fmt.Sprintf("f%06d.md", i))
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		size := 1024 + r.IntN(7*1024)
		buf[0] = byte(i) // distinct contents
		if err := os.WriteFile(p, buf[:size], 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(size)
	}
	return total
}

func BenchmarkDirBig(b *testing.B) {
	root := b.TempDir()
	big := make([]byte, 64<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(root, "memory.db"), big, 0o644); err != nil {
		b.Fatal(err)
	}
	total := int64(len(big)) + makeMany(b, root, 200)
	b.SetBytes(total)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Dir(b.Context(), root, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDirMany(b *testing.B) {
	root := b.TempDir()
	total := makeMany(b, root, 20_000)
	for _, w := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				if _, err := Dir(b.Context(), root, Options{Workers: w}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// cache50k returns a validated cache over 50,000 files. The files were
// just written, so every entry would be racy (and re-read on each pass) for
// racyWindow; the clock is moved ahead to measure the steady state of a
// tree whose files are older than that.
func cache50k(b *testing.B) (*Cache, string, int64) {
	old := now
	now = func() time.Time { return time.Now().Add(time.Hour) }
	b.Cleanup(func() { now = old })
	root := b.TempDir()
	total := makeMany(b, root, 50_000)
	c := NewCache(root, Options{})
	if _, err := c.Rescan(b.Context()); err != nil {
		b.Fatal(err)
	}
	return c, root, total
}

func BenchmarkUpdateOneFile(b *testing.B) {
	c, root, _ := cache50k(b)
	rel := "skills/d00/e000/f000000.md"
	p := filepath.Join(root, rel)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		if err := os.WriteFile(p, fmt.Appendf(nil, "edit %d", i), 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := c.Update(b.Context(), []string{rel})
		if err != nil || res.Count != 50_000 {
			b.Fatal(err, res.Count)
		}
	}
}

func BenchmarkRescan(b *testing.B) {
	c, _, total := cache50k(b)
	b.SetBytes(total)
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Rescan(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromFiles50k(b *testing.B) {
	files := make([]File, 50_000)
	for i := range files {
		files[i].Path = fmt.Sprintf("skills/d%02d/e%03d/f%06d.md", i%10, i%100, (i*7919)%50_000)
	}
	for b.Loop() {
		FromFiles(files)
	}
}

func BenchmarkCompare(b *testing.B) {
	x, y := "skills/d01/e023/f000123.md", "skills/d01/e023/f000124.md"
	for b.Loop() {
		Compare(x, y)
	}
}
