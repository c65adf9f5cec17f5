//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermesd/hermesd/scripts/benchtool/brains"
)

// genParams fully determine a dataset's bytes; they are stored beside it
// (DIR.stamp) so a second `gen` with the same parameters does nothing.
type genParams struct {
	Version  int    `json:"version"`
	Dataset  string `json:"dataset"`
	BigSize  int64  `json:"bigSize,omitempty"`
	Files    int    `json:"files"`
	Dirs     int    `json:"dirs,omitempty"`
	MinSize  int    `json:"minSize"`
	MaxSize  int    `json:"maxSize"`
	Seed     uint64 `json:"seed"`
	Bytes    int64  `json:"bytes"`    // filled after generation
	AllFiles int    `json:"allFiles"` // filled after generation
}

// genMtime is every generated file's and directory's mtime: fixed, so the
// trees are identical run to run, and old, so no file is "racy" for the
// incremental hasher.
var genMtime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const genVersion = 1

func runGen(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	dataset := fs.String("dataset", "", "big or many")
	out := fs.String("out", "", "directory to create")
	bigSize := fs.Int64("big-size", 1<<30, "size of memory.db (big)")
	files := fs.Int("files", 0, "number of markdown files (default: big 200, many 50000)")
	dirs := fs.Int("dirs", 500, "leaf directories (many)")
	seed := fs.Uint64("seed", 20261121, "PRNG seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p := genParams{Version: genVersion, Dataset: *dataset, Files: *files, Seed: *seed}
	switch *dataset {
	case "big":
		p.BigSize, p.MinSize, p.MaxSize = *bigSize, 1<<10, 16<<10
		if p.Files == 0 {
			p.Files = 200
		}
	case "many":
		p.Dirs, p.MinSize, p.MaxSize = *dirs, 1<<10, 8<<10
		if p.Files == 0 {
			p.Files = 50000
		}
		if p.Dirs%20 != 0 {
			return fmt.Errorf("-dirs must be a multiple of 20 (2 top dirs x 10 groups)")
		}
	default:
		return fmt.Errorf("-dataset must be big or many")
	}
	if *out == "" {
		return errors.New("-out is required")
	}
	stamp := filepath.Clean(*out) + ".stamp"
	if old, err := readStamp(stamp); err == nil {
		cmp := old
		cmp.Bytes, cmp.AllFiles = 0, 0
		if cmp == p {
			if _, err := os.Stat(*out); err == nil {
				fmt.Fprintf(os.Stderr, "dataset %s up to date (%d files, %d bytes)\n", *out, old.AllFiles, old.Bytes)
				return nil
			}
		}
	}
	os.Remove(stamp)
	start := time.Now()
	// Never rm -rf and re-create under the same name right away (ext4's
	// recently_deleted trap, see scripts/bench.sh): move the old tree
	// aside first.
	if _, err := os.Stat(*out); err == nil {
		aside := fmt.Sprintf("%s.old-%d", filepath.Clean(*out), time.Now().UnixNano())
		if err := os.Rename(*out, aside); err != nil {
			return err
		}
		defer os.RemoveAll(aside)
	}
	tmp := filepath.Clean(*out) + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	var err error
	if p.Dataset == "big" {
		err = genBig(ctx, tmp, &p)
	} else {
		err = genMany(ctx, tmp, &p)
	}
	if err != nil {
		return err
	}
	if err := fixTimes(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(p, "", "  ")
	if err := os.WriteFile(stamp, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "generated %s: %d files, %d bytes in %.1fs\n", *out, p.AllFiles, p.Bytes, time.Since(start).Seconds())
	return nil
}

func readStamp(path string) (genParams, error) {
	var p genParams
	b, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal(b, &p)
}

func genBig(ctx context.Context, dir string, p *genParams) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var seed [32]byte
	copy(seed[:], fmt.Sprintf("hermesd-bench-big-%d", p.Seed))
	n, err := brains.WriteRandomFile(ctx, filepath.Join(dir, "memory.db"), p.BigSize, rand.NewChaCha8(seed))
	if err != nil {
		return err
	}
	p.Bytes += n
	p.AllFiles++
	rng := rand.New(rand.NewPCG(p.Seed, 1))
	top := []string{"skills", "patterns"}
	for i := 0; i < p.Files; i++ {
		rel := filepath.Join(top[i%2], fmt.Sprintf("%s-%03d.md", strings.TrimSuffix(top[i%2], "s"), i))
		n, err := brains.WriteMarkdown(filepath.Join(dir, rel), p.MinSize+rng.IntN(p.MaxSize-p.MinSize+1), rng)
		if err != nil {
			return err
		}
		p.Bytes += n
		p.AllFiles++
	}
	return nil
}

// genMany lays out 2 top directories x 10 groups x (dirs/20) leaves = dirs
// leaf directories, three levels deep, and deals the files round-robin.
func genMany(ctx context.Context, dir string, p *genParams) error {
	rng := rand.New(rand.NewPCG(p.Seed, 2))
	perGroup := p.Dirs / 20
	leaves := make([]string, 0, p.Dirs)
	for _, top := range []string{"skills", "patterns"} {
		for g := 0; g < 10; g++ {
			for d := 0; d < perGroup; d++ {
				leaf := filepath.Join(dir, top, fmt.Sprintf("g%02d", g), fmt.Sprintf("d%03d", d))
				if err := os.MkdirAll(leaf, 0o755); err != nil {
					return err
				}
				leaves = append(leaves, leaf)
			}
		}
	}
	for i := 0; i < p.Files; i++ {
		if i%1000 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		path := filepath.Join(leaves[i%len(leaves)], fmt.Sprintf("f%05d.md", i))
		n, err := brains.WriteMarkdown(path, p.MinSize+rng.IntN(p.MaxSize-p.MinSize+1), rng)
		if err != nil {
			return err
		}
		p.Bytes += n
		p.AllFiles++
	}
	return nil
}

// fixTimes sets every entry's mtime to genMtime (directories last, since
// creating files inside them moves their mtime).
func fixTimes(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		return os.Chtimes(p, genMtime, genMtime)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chtimes(dirs[i], genMtime, genMtime); err != nil {
			return err
		}
	}
	return nil
}

func runWarm(ctx context.Context, args []string) error {
	buf := make([]byte, 1<<20)
	var total int64
	for _, root := range args {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			for {
				n, err := f.Read(buf)
				total += int64(n)
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
			}
		})
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "warmed %.1f MB\n", float64(total)/1e6)
	return nil
}
