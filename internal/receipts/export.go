package receipts

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/hermesd/hermesd/internal/atomicfile"
)

// NDJSONName is the receipts file at the top level of a brain directory.
const NDJSONName = "receipts.ndjson"

// ndjsonPerm is the mode of an exported receipts.ndjson. It is fixed so
// that identical brain states tar identically.
const ndjsonPerm = 0o644

// Export writes every receipt as receipts.ndjson: newest first (ts
// descending; equal ts: later append first), one compact JSON per line, the
// exact stored bytes, lines joined by "\n" with no trailing newline, and
// nothing at all for an empty log. There is no row cap. Receipts appended
// while Export runs are not included.
func (l *Log) Export(ctx context.Context, w io.Writer) error {
	order, entries, f, err := l.view()
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	rr := &recordReader{f: f}
	for k, i := range order {
		if k&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		b, err := l.readRecord(rr, entries[i])
		if err != nil {
			return err
		}
		if k > 0 {
			bw.WriteByte('\n')
		}
		if _, err := bw.Write(b); err != nil {
			return fmt.Errorf("receipts: export: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("receipts: export: %w", err)
	}
	return nil
}

// ExportFile replaces path with the Export output atomically (temporary
// file in the same directory, fsync, rename, fsync of the directory), mode
// 0644.
func (l *Log) ExportFile(ctx context.Context, path string) error {
	af, err := atomicfile.Create(path, ndjsonPerm)
	if err != nil {
		return fmt.Errorf("receipts: export: %w", err)
	}
	defer af.Abort()
	if err := l.Export(ctx, af); err != nil {
		return err
	}
	if err := af.Commit(); err != nil {
		return fmt.Errorf("receipts: export: %w", err)
	}
	return nil
}
