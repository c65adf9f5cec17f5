package receipts

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

const benchN = 100_000

// benchReceipts calls fn with runtime-shaped receipts (unsigned, ts
// ascending with ties) in chunks of size chunk, outside the timer.
func benchReceipts(b *testing.B, n, chunk int, fn func([]Receipt)) {
	recs := make([]Receipt, 0, chunk)
	for i := range n {
		if len(recs) == 0 {
			b.StopTimer()
		}
		recs = append(recs, mustParse(b, runtimeReceipt(runtimeParams{TokenID: 3, CallID: fmt.Sprintf("call-%08d", i), Seq: i, TS: 1700000000 + int64(i/3)})))
		if len(recs) == chunk || i == n-1 {
			b.StartTimer()
			fn(recs)
			recs = recs[:0]
		}
	}
}

// benchLog builds a log of n receipts. Call it before b.Loop, which
// resets the timer.
func benchLog(b *testing.B, n int) *Log {
	l, err := OpenLog(filepath.Join(b.TempDir(), "receipts.log"), Options{noSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	benchReceipts(b, n, 1000, func(rs []Receipt) { l.Append(rs...) })
	return l
}

func BenchmarkAppend(b *testing.B) {
	for _, tc := range []struct{ batch, n int }{{1, 1000}, {100, benchN}, {1000, benchN}} {
		b.Run(fmt.Sprintf("batch=%d", tc.batch), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				l, err := OpenLog(filepath.Join(b.TempDir(), "receipts.log"), Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				benchReceipts(b, tc.n, tc.batch, func(rs []Receipt) {
					if _, err := l.Append(rs...); err != nil {
						b.Fatal(err)
					}
				})
				b.StopTimer()
				l.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(tc.n*b.N)/b.Elapsed().Seconds(), "receipts/s")
		})
	}
}

func BenchmarkExport(b *testing.B) {
	l := benchLog(b, benchN)
	var size int64
	for b.Loop() {
		cw := &countWriter{w: io.Discard}
		if err := l.Export(context.Background(), cw); err != nil {
			b.Fatal(err)
		}
		size = cw.n
	}
	b.SetBytes(size)
	b.ReportMetric(float64(benchN*b.N)/b.Elapsed().Seconds(), "receipts/s")
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.w.Write(p)
}

// BenchmarkImport imports a 100k receipts.ndjson of receipts signed by the
// trusted operator: parsing, signature recovery (on every CPU), framing,
// spooling and one fsync.
func BenchmarkImport(b *testing.B) {
	key := testKey("operator")
	raws := make([][]byte, benchN)
	parallelReceipts(raws, func(i int) []byte {
		return runtimeReceipt(runtimeParams{TokenID: 3, CallID: fmt.Sprintf("call-%08d", i), Seq: i, TS: 1700000000 + int64(benchN-i)/3, Key: key})
	})
	nd := bytes.Join(raws, []byte("\n"))
	raws = nil
	trusted := []common.Address{addrOf(key)}
	b.SetBytes(int64(len(nd)))
	for b.Loop() {
		b.StopTimer()
		dst, err := OpenLog(filepath.Join(b.TempDir(), "receipts.log"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rep, err := dst.Import(context.Background(), bytes.NewReader(nd), PolicyReject, trusted)
		if err != nil || rep.Imported != benchN {
			b.Fatalf("%d imported, %v", rep.Imported, err)
		}
		b.StopTimer()
		dst.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(benchN*b.N)/b.Elapsed().Seconds(), "receipts/s")
}

// BenchmarkImportJunk imports 64 MiB of lines that are not trusted
// receipts: the quarantine fills, the rest is counted. heap-MiB is the
// largest growth of the heap in use during one import.
func BenchmarkImportJunk(b *testing.B) {
	var growth uint64
	for b.Loop() {
		g, _, _ := importJunk(b, 64<<20)
		growth = max(growth, g)
	}
	b.SetBytes(64 << 20)
	b.ReportMetric(float64(growth)/(1<<20), "heap-MiB")
}

// BenchmarkImportVerified imports receipts that each carry a real
// signature by a trusted key: the rate is bounded by ecrecover.
func BenchmarkImportVerified(b *testing.B) {
	const n = 2000
	key := testKey("operator")
	var buf []byte
	for i := range n {
		if i > 0 {
			buf = append(buf, '\n')
		}
		buf = append(buf, runtimeReceipt(runtimeParams{TokenID: 3, CallID: fmt.Sprintf("call-%08d", i), Seq: i, TS: 1700000000 + int64(n-i), Key: key})...)
	}
	trusted := []common.Address{addrOf(key)}
	for b.Loop() {
		b.StopTimer()
		dst, err := OpenLog(filepath.Join(b.TempDir(), "receipts.log"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rep, err := dst.Import(context.Background(), bytes.NewReader(buf), PolicyReject, trusted)
		if err != nil || rep.Imported != n {
			b.Fatalf("%d imported, %v", rep.Imported, err)
		}
		b.StopTimer()
		dst.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "receipts/s")
}

// BenchmarkOpen reopens a 100k-receipt log: read, checksum, parse, index.
func BenchmarkOpen(b *testing.B) {
	l := benchLog(b, benchN)
	path := l.Path()
	for b.Loop() {
		l2, err := OpenLog(path, Options{})
		if err != nil || l2.Len() != benchN {
			b.Fatal(err)
		}
		l2.Close()
	}
	b.ReportMetric(float64(benchN*b.N)/b.Elapsed().Seconds(), "receipts/s")
}

func BenchmarkParse(b *testing.B) {
	raw := runtimeReceipt(runtimeParams{TokenID: 3, CallID: "call-1", Seq: 1, TS: 1700000000, Key: testKey("operator")})
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	key := testKey("operator")
	r := mustParse(b, runtimeReceipt(runtimeParams{TokenID: 3, CallID: "call-1", Seq: 1, TS: 1700000000, Key: key}))
	trusted := []common.Address{addrOf(key)}
	for b.Loop() {
		if _, err := Verify(&r, trusted); err != nil {
			b.Fatal(err)
		}
	}
}
