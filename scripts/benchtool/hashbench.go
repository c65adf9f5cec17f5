//go:build linux

package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/hermesd/hermesd/internal/hash"
)

// runGoSHA is the Go-stdlib twin of `openssl dgst -sha256 FILES`: every
// file hashed in sequence on one goroutine, nothing else. It separates
// "hermesd's overhead" from "Go's SHA-256 vs OpenSSL's" on CPUs where the
// two differ (no SHA-NI).
func runGoSHA(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: gosha DIR")
	}
	buf := make([]byte, 1<<20)
	h := sha256.New()
	var files int
	var bytes int64
	start := time.Now()
	err := filepath.WalkDir(args[0], func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h.Reset()
		n, err := io.CopyBuffer(h, f, buf)
		files++
		bytes += n
		h.Sum(nil)
		return err
	})
	if err != nil {
		return err
	}
	emit(map[string]float64{"files": float64(files), "bytes": float64(bytes), "MBps": float64(bytes) / 1e6 / time.Since(start).Seconds()})
	return nil
}

func runHashInc(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hashinc", flag.ContinueOnError)
	dir := fs.String("dir", "", "tree to hash")
	file := fs.String("file", "", "file (relative to -dir) to edit; default: the first file in key order")
	n := fs.Int("n", 20, "edits")
	rescans := fs.Int("rescans", 5, "timed no-change rescans")
	prof := profileFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProf, err := prof()
	if err != nil {
		return err
	}
	defer stopProf()
	if *dir == "" {
		return errors.New("-dir is required")
	}
	c := hash.NewCache(*dir, hash.Options{})
	t := time.Now()
	full, err := c.Rescan(ctx)
	if err != nil {
		return err
	}
	fullMS := ms(time.Since(t))
	var scan []float64
	var rescanRead int
	for range *rescans {
		t := time.Now()
		r, err := c.Rescan(ctx)
		if err != nil {
			return err
		}
		scan = append(scan, ms(time.Since(t)))
		rescanRead = r.Read
	}

	rel := *file
	if rel == "" {
		rel = c.Files()[0].Path
	}
	path := filepath.Join(*dir, filepath.FromSlash(rel))
	orig, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	restore := func() error {
		if err := os.WriteFile(path, orig, info.Mode().Perm()); err != nil {
			return err
		}
		return os.Chtimes(path, info.ModTime(), info.ModTime())
	}
	defer restore()

	var upd, reads []float64
	prev := full.Digest
	for i := range *n {
		edited := append(append([]byte(nil), orig...), fmt.Sprintf("\n<!-- bench edit %d -->\n", i)...)
		if err := os.WriteFile(path, edited, info.Mode().Perm()); err != nil {
			return err
		}
		t := time.Now()
		r, err := c.Update(ctx, []string{rel})
		d := time.Since(t)
		if err != nil {
			return err
		}
		if r.Digest == prev || r.Read < 1 {
			return fmt.Errorf("edit %d: update did not see the change (read %d)", i, r.Read)
		}
		prev = r.Digest
		upd = append(upd, ms(d))
		reads = append(reads, float64(r.Read))
	}
	if err := restore(); err != nil {
		return err
	}
	r, err := c.Update(ctx, []string{rel})
	if err != nil {
		return err
	}
	if r.Digest != full.Digest {
		return fmt.Errorf("after restoring %s the incremental hash is %s, the full hash was %s", rel, r.Digest, full.Digest)
	}
	lo, hi := minmax(upd)
	emit(map[string]float64{
		"files":         float64(full.Count),
		"full_ms":       fullMS,
		"rescan_ms":     median(scan),
		"rescan_read":   float64(rescanRead),
		"update_ms":     median(upd),
		"update_p90_ms": quantile(upd, 0.9),
		"update_min_ms": lo,
		"update_max_ms": hi,
		"update_read":   median(reads),
	})
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
