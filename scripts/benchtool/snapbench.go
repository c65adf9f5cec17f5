//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/snapshot"
)

const benchIdentity = "bench.hermes.eth"

// runSnap is hermesd's first snapshot of a brain, as the daemon takes it:
// a full hash (hash.Cache, the daemon's hasher, starting empty), then
// snapshot.Snapshotter.Take (lock, tar + v2 encryption into a spool file,
// upload, read-back verification). With -second it then edits one file and
// takes -second-n further snapshots, each after an incremental re-hash of
// the named path (hermesd's "second backup").
//
// Take writes bundle.lock.json into the brain; it is removed again at the
// end so the dataset stays what the other tools see.
func runSnap(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("snap", flag.ContinueOnError)
	dir := fs.String("dir", "", "brain directory")
	url := fs.String("url", "", "local Walrus server")
	spool := fs.String("spool", "", "spool directory")
	keyFile := fs.String("keyfile", "", "snapshot key file")
	idFile := fs.String("idfile", "", "write the first snapshot's blob id here")
	second := fs.String("second", "", "file (relative to -dir) to edit for the second snapshots")
	secondN := fs.Int("second-n", 3, "second snapshots")
	prof := profileFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProf, err := prof()
	if err != nil {
		return err
	}
	defer stopProf()
	if *dir == "" || *url == "" || *spool == "" || *keyFile == "" {
		return errors.New("-dir, -url, -spool and -keyfile are required")
	}
	key, err := cipher.ReadKeyFile(*keyFile)
	if err != nil {
		return err
	}
	client, err := benchClient(*url)
	if err != nil {
		return err
	}
	lockPath := filepath.Join(*dir, bundlelock.FileName)
	cleanup := func() error {
		for _, name := range []string{bundlelock.FileName, snapshot.ReceiptsFile} {
			if err := os.Remove(filepath.Join(*dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return nil
	}
	if err := cleanup(); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()

	s := &snapshot.Pipeline{
		AgentID:  "bench",
		Identity: benchIdentity,
		BrainDir: *dir,
		SpoolDir: *spool,
		Key:      key,
		Format:   snapshot.FormatV2,
		Store:    compose.Store(client),
		Epochs:   1,
	}
	cache := hash.NewCache(*dir, hash.Options{})
	t := time.Now()
	h, err := cache.Rescan(ctx)
	if err != nil {
		return err
	}
	hashS := time.Since(t).Seconds()
	t = time.Now()
	r, err := s.Take(ctx, snapshot.Input{Want: h.Digest})
	if err != nil {
		return err
	}
	takeS := time.Since(t).Seconds()
	if *idFile != "" {
		if err := os.WriteFile(*idFile, []byte(r.BlobID), 0o644); err != nil {
			return err
		}
	}
	m := map[string]float64{
		"hash_s":   hashS,
		"pack_s":   r.Pack.Seconds(),
		"upload_s": r.Upload.Seconds(),
		"verify_s": r.Verify.Seconds(),
		"take_s":   takeS,
		"total_s":  hashS + takeS,
		"local_s":  hashS + r.Pack.Seconds(), // what a local-repository backup does
		"MBps":     float64(r.Bytes) / 1e6 / (hashS + takeS),
		"files":    float64(r.Files),
		"bytes":    float64(r.Bytes),
		"blob_MiB": float64(r.Size) / (1 << 20),
		"hwm_MiB":  vmHWM(),
	}

	if *second != "" {
		path := filepath.Join(*dir, filepath.FromSlash(*second))
		orig, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		defer func() {
			werr := os.WriteFile(path, orig, info.Mode().Perm())
			if werr == nil {
				werr = os.Chtimes(path, info.ModTime(), info.ModTime())
			}
			err = errors.Join(err, werr)
		}()
		var upd, take, tot, pack []float64
		for i := range *secondN {
			edited := append(append([]byte(nil), orig...), fmt.Sprintf("\n<!-- bench second %d -->\n", i)...)
			if err := os.WriteFile(path, edited, info.Mode().Perm()); err != nil {
				return err
			}
			t := time.Now()
			h, err := cache.Update(ctx, []string{*second})
			if err != nil {
				return err
			}
			u := time.Since(t).Seconds()
			t = time.Now()
			r, err := s.Take(ctx, snapshot.Input{Want: h.Digest})
			if err != nil {
				return err
			}
			k := time.Since(t).Seconds()
			upd, take, tot, pack = append(upd, u*1000), append(take, k), append(tot, u+k), append(pack, u+r.Pack.Seconds())
		}
		m["second_update_ms"] = median(upd)
		m["second_take_s"] = median(take)
		m["second_total_s"] = median(tot)
		m["second_local_s"] = median(pack)
	}
	if _, err := os.Stat(lockPath); err != nil {
		return fmt.Errorf("no lock after the snapshot: %w", err)
	}
	emit(m)
	return nil
}

func runRestore(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	url := fs.String("url", "", "local Walrus server")
	idFile := fs.String("idfile", "", "file holding the blob id")
	target := fs.String("target", "", "fresh directory to restore into")
	spool := fs.String("spool", "", "spool directory")
	keyFile := fs.String("keyfile", "", "snapshot key file")
	prof := profileFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProf, err := prof()
	if err != nil {
		return err
	}
	defer stopProf()
	if *target == "" || *spool == "" {
		return errors.New("-target and -spool are required")
	}
	if _, err := os.Lstat(*target); err == nil {
		return fmt.Errorf("%s exists: restores go into a fresh directory (ext4's recently_deleted slows a reused one)", *target)
	}
	key, err := cipher.ReadKeyFile(*keyFile)
	if err != nil {
		return err
	}
	id, err := os.ReadFile(*idFile)
	if err != nil {
		return err
	}
	client, err := benchClient(*url)
	if err != nil {
		return err
	}
	r := &snapshot.Pipeline{AgentID: "bench", Identity: benchIdentity, BrainDir: *target, SpoolDir: *spool,
		Key: key, Format: snapshot.FormatV2, Store: compose.Store(client)}
	t := time.Now()
	res, err := r.Restore(ctx, strings.TrimSpace(string(id)), *target)
	if err != nil {
		return err
	}
	total := time.Since(t).Seconds()
	emit(map[string]float64{
		"download_s": res.Download.Seconds(),
		"unpack_s":   res.Unpack.Seconds(),
		"total_s":    total,
		"MBps":       float64(res.Bytes) / 1e6 / total,
		"files":      float64(res.Files),
		"hwm_MiB":    vmHWM(),
	})
	return nil
}
