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

// Export writes the receipts as receipts.ndjson: newest first (ts
// descending; equal ts: later append first), one compact JSON per line, the
// exact stored bytes, lines joined by "\n" with no trailing newline, and
// nothing at all when there is nothing to write. There is no row cap.
// Receipts appended while Export runs are not included.
//
// Only receipts that carry a tokenId are written: the reference runtime's
// importer stores tokenId in a column and throws on a receipt without one,
// which would fail the whole restore of the brain there. Receipts without
// one stay in the log (Iterate lists them).
func (l *Log) Export(ctx context.Context, w io.Writer) error {
	return l.export(ctx, w, func(token string) bool { return token != "" })
}

// ExportToken is Export of the receipts whose tokenId is token (decimal,
// exactly as written): an agent's snapshot carries its own token's
// receipts only, as the reference runtime's export does. A log that holds
// other tokens' receipts (imported before hermesd routed them) keeps them;
// they are not written. An empty token writes nothing.
func (l *Log) ExportToken(ctx context.Context, w io.Writer, token string) error {
	return l.export(ctx, w, func(t string) bool { return t != "" && t == token })
}

func (l *Log) export(ctx context.Context, w io.Writer, want func(token string) bool) error {
	order, entries, f, err := l.view()
	if err != nil {
		return err
	}
	// Sized to what there is (up to 1 MiB): most agents' logs are empty
	// or small, and a daemon exports a thousand agents' at start.
	var total int64
	for i := range entries {
		total += int64(entries[i].n) + 1
	}
	bw := bufio.NewWriterSize(w, int(min(1<<20, max(total, 64))))
	rr := &recordReader{f: f}
	written := 0
	for k, i := range order {
		if k&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if !want(entries[i].token) {
			continue
		}
		b, err := l.readRecord(rr, entries[i])
		if err != nil {
			return err
		}
		if written > 0 {
			bw.WriteByte('\n')
		}
		written++
		if _, err := bw.Write(b); err != nil {
			return fmt.Errorf("receipts: export: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("receipts: export: %w", err)
	}
	return nil
}

// ExportFile replaces path with the ExportToken output atomically
// (temporary file in the same directory, fsync, rename, fsync of the
// directory), mode 0644.
func (l *Log) ExportFile(ctx context.Context, path, token string) error {
	// receipts.ndjson lives in the brain, which the agent runtime hashes:
	// its replacement must never be visible there.
	af, err := atomicfile.CreateOutside(path, ndjsonPerm)
	if err != nil {
		return fmt.Errorf("receipts: export: %w", err)
	}
	defer af.Abort()
	if err := l.ExportToken(ctx, af, token); err != nil {
		return err
	}
	if err := af.Commit(); err != nil {
		return fmt.Errorf("receipts: export: %w", err)
	}
	return nil
}
