//go:build unix

package repo

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/hash"
)

// Benchmarks report throughput (b.SetBytes: MB/s of brain) and the
// process's peak RSS; run one at a time for a clean RSS figure, e.g.
//
//	go test -run '^$' -bench '^BenchmarkSnapshotBigFile$' -benchtime 3x ./internal/repo

// nullSink accepts packs without storing them: it measures the engine,
// not the disk or the network.
type nullSink struct{ n int }

func (s *nullSink) StorePack(_ context.Context, p *Pack) (Stored, error) {
	s.n++
	return Stored{BlobID: fmt.Sprintf("pack%d", s.n), EndEpoch: 1}, nil
}

func peakRSS(b *testing.B) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peakRSS-MiB")
	}
}

// cpuTime returns the process's user+system CPU time: on a shared,
// loaded machine it is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuTimer reports CPU time per op over the timed loop.
type cpuTimer struct {
	start time.Duration
	spent time.Duration
}

func (c *cpuTimer) begin() { c.start = cpuTime() }
func (c *cpuTimer) end()   { c.spent += cpuTime() - c.start }

func (c *cpuTimer) report(b *testing.B) {
	b.ReportMetric(float64(c.spent.Milliseconds())/float64(b.N), "cpu-ms/op")
}

// bigBrain is a 1 GiB random memory.db plus a few small files, written
// with a small buffer so that setting it up does not raise the RSS.
func bigBrain(b *testing.B, size int64) string {
	dir := b.TempDir()
	f, err := os.Create(filepath.Join(dir, "memory.db"))
	if err != nil {
		b.Fatal(err)
	}
	for off, seed := int64(0), uint64(0); off < size; seed++ {
		n := min(int64(1<<20), size-off)
		if _, err := f.Write(randomBytes(seed, int(n))); err != nil {
			b.Fatal(err)
		}
		off += n
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	writeFiles(b, dir, map[string]string{"system.md": "agent", "skills/a.md": "a", "bundle.lock.json": "{}"})
	return dir
}

func manyBrain(b *testing.B, n int) string {
	dir := b.TempDir()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("skills/d%02d/s%02d/f%05d.md", i%10, i%100, i))
		if i < 100 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(p, randomBytes(uint64(i), 1000+i%7000), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

func known(b *testing.B, dir string) ([]hash.File, hash.Digest, int64) {
	hr, err := hash.Dir(context.Background(), dir, hash.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return hr.Files, hr.Digest, hr.Bytes
}

func benchFirst(b *testing.B, brain string) {
	files, want, size := known(b, brain)
	keys := testKeys(b, testIdentity)
	if _, err := keys.Polynomial(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	var ct cpuTimer
	b.ResetTimer()
	for range b.N {
		bl := &Builder{Keys: keys, Sink: &nullSink{}, SpoolDir: b.TempDir(), MaxPackSize: 10 << 20}
		ct.begin()
		if _, err := bl.Snapshot(context.Background(), SnapshotInput{Brain: brain, Index: NewIndex(), Known: hash.Files(files), Want: want}); err != nil {
			b.Fatal(err)
		}
		ct.end()
	}
	b.StopTimer()
	ct.report(b)
	peakRSS(b)
}

func BenchmarkSnapshotBigFile(b *testing.B) { benchFirst(b, bigBrain(b, 1<<30)) }

func BenchmarkSnapshotManyFiles(b *testing.B) { benchFirst(b, manyBrain(b, 50_000)) }

// BenchmarkSnapshotSmallEdit: the second snapshot after one 4 KiB page of a
// 1 GiB database and one small file changed.
func BenchmarkSnapshotSmallEdit(b *testing.B) {
	brain := bigBrain(b, 1<<30)
	keys := testKeys(b, testIdentity)
	bl := &Builder{Keys: keys, Sink: &nullSink{}, SpoolDir: b.TempDir(), MaxPackSize: 10 << 20}
	files, want, size := known(b, brain)
	ix := NewIndex()
	first, err := bl.Snapshot(context.Background(), SnapshotInput{Brain: brain, Index: ix, Known: hash.Files(files), Want: want})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	var ct cpuTimer
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		f, err := os.OpenFile(filepath.Join(brain, "memory.db"), os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		f.WriteAt(randomBytes(uint64(1000+i), 4096), int64(i%1000)<<20)
		f.Close()
		writeFiles(b, brain, map[string]string{"skills/a.md": fmt.Sprint(i)})
		files, want, _ := known(b, brain)
		before := ix
		ix = NewIndex()
		ix.replace(before.Head(), packsOf(before))
		b.StartTimer()
		ct.begin()
		if _, err := bl.Snapshot(context.Background(), SnapshotInput{Brain: brain, Index: ix, Known: hash.Files(files), Want: want, Prev: first.Commit, Trees: first.Trees}); err != nil {
			b.Fatal(err)
		}
		ct.end()
	}
	b.StopTimer()
	ct.report(b)
	peakRSS(b)
}

func packsOf(ix *Index) []*indexPack {
	var ps []*indexPack
	for _, p := range ix.snapshotPacks() {
		ps = append(ps, p)
	}
	return ps
}

func benchRestore(b *testing.B, brain string) {
	f := newFx(b, 10<<20)
	res := f.snap(brain, nil)
	runtime.GC()
	debug.FreeOSMemory()
	b.SetBytes(res.Commit.Bytes)
	var ct cpuTimer
	b.ResetTimer()
	for range b.N {
		dir := filepath.Join(b.TempDir(), "r")
		ct.begin()
		r, err := Open(context.Background(), f.store, f.keys, f.head, ReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Restore(context.Background(), dir, RestoreOptions{}); err != nil {
			b.Fatal(err)
		}
		ct.end()
	}
	b.StopTimer()
	ct.report(b)
	peakRSS(b)
}

func BenchmarkRestoreBigFile(b *testing.B) { benchRestore(b, bigBrain(b, 1<<30)) }

func BenchmarkRestoreManyFiles(b *testing.B) { benchRestore(b, manyBrain(b, 50_000)) }

// BenchmarkSealChunk is a sealer's work on one average chunk: its id
// (SHA-256) and AES-256-GCM.
func BenchmarkSealChunk(b *testing.B) {
	keys := testKeys(b, testIdentity)
	plain := randomBytes(1, MinChunk+1<<AvgBits)
	out := make([]byte, 0, len(plain)+Overhead)
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		id := ID(sha256.Sum256(plain))
		var err error
		if out, err = keys.sealTo(out[:0], TypeChunk, plain); err != nil || id.IsZero() {
			b.Fatal(err)
		}
	}
}

// BenchmarkPackFinish fills a 10 MiB pack with sealed chunks and
// finishes it (index, SHA-256 of the whole pack) through its spool file.
func BenchmarkPackFinish(b *testing.B) {
	keys := testKeys(b, testIdentity)
	_, obj, err := keys.Seal(TypeChunk, randomBytes(2, MinChunk+1<<AvgBits))
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	b.SetBytes(10 << 20)
	for i := 0; b.Loop(); i++ {
		pw, err := NewPackWriter(keys, dir, 10<<20)
		if err != nil {
			b.Fatal(err)
		}
		for n := uint32(0); ; n++ {
			var id ID
			binary.BigEndian.PutUint32(id[:], n)
			if err := pw.Add(TypeChunk, id, obj); err == ErrPackFull {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		p, err := pw.Finish(nil)
		if err != nil {
			b.Fatal(err)
		}
		p.Discard()
	}
}

// BenchmarkSnapshotSmallEditMany: the second snapshot of 50,000 small
// files after one of them changed (trees of the first kept in memory).
func BenchmarkSnapshotSmallEditMany(b *testing.B) {
	brain := manyBrain(b, 50_000)
	keys := testKeys(b, testIdentity)
	bl := &Builder{Keys: keys, Sink: &nullSink{}, SpoolDir: b.TempDir(), MaxPackSize: 10 << 20}
	files, want, size := known(b, brain)
	ix := NewIndex()
	prev, err := bl.Snapshot(context.Background(), SnapshotInput{Brain: brain, Index: ix, Known: hash.Files(files), Want: want})
	if err != nil {
		b.Fatal(err)
	}
	edited := filepath.Join(brain, "skills/d00/s00/f00000.md")
	b.SetBytes(size)
	var ct cpuTimer
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		if err := os.WriteFile(edited, fmt.Appendf(nil, "edit %d", i), 0o644); err != nil {
			b.Fatal(err)
		}
		files, want, _ := known(b, brain)
		b.StartTimer()
		ct.begin()
		res, err := bl.Snapshot(context.Background(), SnapshotInput{Brain: brain, Index: ix, Known: hash.Files(files), Want: want, Prev: prev.Commit, Trees: prev.Trees})
		ct.end()
		if err != nil {
			b.Fatal(err)
		}
		if res.Stats.FilesRead != 1 {
			b.Fatalf("read %d files, want the edited one", res.Stats.FilesRead)
		}
		prev = res
	}
	ct.report(b)
	peakRSS(b)
}
