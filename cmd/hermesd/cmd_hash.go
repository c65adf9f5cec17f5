package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hermesd/hermesd/internal/hash"
)

// hashReport is the --json output of `hermesd hash`.
type hashReport struct {
	Dir        string      `json:"dir"`
	BundleHash hash.Digest `json:"bundleHash"`
	Files      int         `json:"files"`
	Bytes      int64       `json:"bytes"`
	DurationMs float64     `json:"durationMs"`
}

// runHash prints the bundle hash of a directory.
func runHash(ctx context.Context, env *cmdEnv, args []string) error {
	fset := newFlagSet(env, "hash", "hash [--json] [--workers N] DIR",
		"Print the bundle hash of DIR exactly as the reference runtime computes it:\n"+
			"keccak256 over the regular files (symlinks, special files and empty\n"+
			"directories do not count; the top-level bundle.lock.json and\n"+
			"receipts.ndjson are excluded). An empty directory prints the null hash.")
	jsonOut := fset.Bool("json", false, "print one JSON object: dir, bundleHash, files, bytes, durationMs")
	workers := fset.Int("workers", 0, "files hashed in parallel (0: one per CPU)")
	pos, err := parseInterspersed(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("hash: want one directory, got %d arguments (see 'hermesd hash -h')", len(pos))
	}
	if *workers < 0 {
		return usageErrorf("hash: --workers must not be negative")
	}
	dir := pos[0]
	// The reference hashes a missing directory as the null hash; on the
	// command line a missing directory is far more likely a typo.
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return withCode(exitNotFound, fmt.Errorf("hash: %s: no such directory", dir))
	case err != nil:
		return fmt.Errorf("hash: %w", err)
	case !fi.IsDir():
		return usageErrorf("hash: %s is not a directory", dir)
	}
	start := time.Now()
	res, err := hash.Dir(ctx, dir, hash.Options{Workers: *workers})
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if !*jsonOut {
		_, err := fmt.Fprintln(env.stdout, res.Digest)
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return json.NewEncoder(env.stdout).Encode(hashReport{
		Dir:        abs,
		BundleHash: res.Digest,
		Files:      res.Count,
		Bytes:      res.Bytes,
		DurationMs: float64(elapsed.Microseconds()) / 1000,
	})
}
