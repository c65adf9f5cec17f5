//go:build linux

package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/walrus"
	"golang.org/x/sys/unix"
)

// walrusSink is a repo.PackSink over the walrus client, as the daemon
// wires it (compose.Store, as snapshot's pack sink uses it): upload the
// pack, read the blob back, compare it byte for byte with the pack, and
// only then hand the blob id to the builder.
type walrusSink struct {
	c *walrus.Client

	upload, verify atomic.Int64 // nanoseconds, summed over packs
	uploaded       atomic.Int64 // bytes
}

func (s *walrusSink) StorePack(ctx context.Context, p *repo.Pack) (repo.Stored, error) {
	st := compose.Store(s.c)
	t := time.Now()
	res, err := st.PutReader(ctx, p.Open, p.Size, 1)
	if err != nil {
		return repo.Stored{}, err
	}
	s.upload.Add(int64(time.Since(t)))
	s.uploaded.Add(p.Size)
	t = time.Now()
	if err := st.Compare(ctx, res.BlobID, p.Open, p.Size); err != nil {
		return repo.Stored{}, err
	}
	s.verify.Add(int64(time.Since(t)))
	return repo.Stored{BlobID: res.BlobID, EndEpoch: res.EndEpoch}, nil
}

// walrusRanges is a repo.RangeReader over the walrus client.
type walrusRanges struct{ c *walrus.Client }

func (r walrusRanges) ReadRange(ctx context.Context, blobID string, off, n int64, w io.Writer) (int64, error) {
	res, err := r.c.ReadRange(ctx, blobID, off, n, w)
	return res.Total, err
}

func v3Keys(path string) (*repo.Keys, error) {
	key, err := cipher.ReadKeyFile(path)
	if err != nil {
		return nil, err
	}
	return repo.NewKeys(repo.DeriveAgentKey([repo.KeySize]byte(key), benchIdentity), benchIdentity)
}

// writeLock writes a small bundle.lock.json into the brain, as the daemon
// does before a snapshot (the builder stores it beside the root tree).
func writeLock(dir string, d hash.Digest, version int) error {
	b := fmt.Appendf(nil, "{\"version\":%d,\"agent\":\"bench\",\"bundleHash\":%q}\n", version, d.String())
	return os.WriteFile(filepath.Join(dir, repo.LockFile), b, 0o644)
}

// runV3Snap is a v3 snapshot as the daemon takes it: repo.Builder.Stage
// without a hash first (the snapshot is the hash), the lock written, then
// Commit, the hash cache taking over what it read; every pack is uploaded
// to the Walrus server (a separate process) through the walrus client and
// read back before the builder references it.
// With -second it then edits one file -second-n times, each followed by an
// incremental hash (Cache.Update of that path) and a snapshot on top of
// the previous one (its trees kept in memory, as the daemon keeps them).
func runV3Snap(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("v3snap", flag.ContinueOnError)
	dir := fs.String("dir", "", "brain directory")
	url := fs.String("url", "", "local Walrus server")
	spool := fs.String("spool", "", "spool directory")
	keyFile := fs.String("keyfile", "", "master key file")
	idFile := fs.String("idfile", "", "write the head pack's blob id here")
	maxPack := fs.Int64("maxpack", 10<<20, "pack cap (walrus.max_blob_size)")
	workers := fs.Int("workers", 0, "Builder.Workers (0: GOMAXPROCS)")
	uploads := fs.Int("uploads", 0, "Builder.Uploads (0: the builder's default)")
	memProf := fs.String("memprofile", "", "write a heap profile (all allocations) after the first snapshot to `FILE`")
	second := fs.String("second", "", "file (relative to -dir) to edit for the second snapshots")
	secondN := fs.Int("second-n", 3, "second snapshots")
	prof := profileFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *url == "" || *spool == "" || *keyFile == "" {
		return errors.New("-dir, -url, -spool and -keyfile are required")
	}
	keys, err := v3Keys(*keyFile)
	if err != nil {
		return err
	}
	if _, err := keys.Polynomial(); err != nil { // once per agent, cached by the daemon
		return err
	}
	client, err := snapClient(*url, *spool)
	if err != nil {
		return err
	}
	lock := filepath.Join(*dir, repo.LockFile)
	defer func() {
		if rerr := os.Remove(lock); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}()
	stopProf, err := prof()
	if err != nil {
		return err
	}
	defer stopProf()

	sink := &walrusSink{c: client}
	b := &repo.Builder{Keys: keys, Sink: sink, SpoolDir: *spool, MaxPackSize: *maxPack, Workers: *workers, Uploads: *uploads}
	// The first snapshot as the daemon takes it: no hash first, the
	// snapshot hashes as it reads (with its checks that every file held
	// still), writes the lock once its trees are final, and the hash cache
	// takes over what it read.
	cache := hash.NewCache(*dir, hash.Options{})
	learner := cache.Learner(nil)
	ix := repo.NewIndex()
	t := time.Now()
	staged, err := b.Stage(ctx, repo.SnapshotInput{Brain: *dir, Index: ix})
	if err != nil {
		return err
	}
	defer staged.Abort()
	if err := writeLock(*dir, staged.Bundle(), 1); err != nil {
		return err
	}
	res, err := staged.Commit(ctx, 1)
	if err != nil {
		return err
	}
	snapS := time.Since(t).Seconds()
	t = time.Now()
	for r := range res.Reads.Drain() {
		learner.Add(r.Path, r.Stat, r.Start, r.Size, r.SHA256)
	}
	if _, err := learner.Adopt(res.Commit.BundleHash); err != nil {
		return err
	}
	hashS := time.Since(t).Seconds() // the cache's share: taking over the reads
	if *memProf != "" {
		if err := writeHeapProfile(*memProf); err != nil {
			return err
		}
	}
	if *idFile != "" {
		if err := os.WriteFile(*idFile, []byte(res.Head.BlobID), 0o644); err != nil {
			return err
		}
	}
	st := res.Stats
	m := map[string]float64{
		"hash_s":       hashS,
		"snap_s":       snapS,
		"total_s":      hashS + snapS,
		"upload_s":     time.Duration(sink.upload.Load()).Seconds(),
		"verify_s":     time.Duration(sink.verify.Load()).Seconds(),
		"MBps":         float64(st.Bytes) / 1e6 / (hashS + snapS),
		"files":        float64(st.Files),
		"bytes":        float64(st.Bytes),
		"packs":        float64(st.Packs),
		"uploaded_MiB": float64(st.BytesUploaded) / (1 << 20),
		"hwm_MiB":      vmHWM(),
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m["heapinuse_MiB"], m["heapsys_MiB"], m["sys_MiB"], m["stack_MiB"] = float64(ms.HeapInuse)/(1<<20), float64(ms.HeapSys)/(1<<20), float64(ms.Sys)/(1<<20), float64(ms.StackSys)/(1<<20)

	if *second != "" {
		sm, err := secondSnapshots(ctx, b, cache, *dir, *second, *secondN, res, ix)
		if err != nil {
			return err
		}
		for k, v := range sm {
			m[k] = v
		}
		m["hwm_MiB"] = vmHWM()
	}
	emit(m)
	return nil
}

// secondSnapshots edits path n times (appending a line), each time
// followed by Cache.Update([path]) and a snapshot on top of the previous
// one; the file is restored afterwards.
func secondSnapshots(ctx context.Context, b *repo.Builder, cache *hash.Cache, dir, rel string, n int, prev *repo.Result, ix *repo.Index) (m map[string]float64, err error) {
	path := filepath.Join(dir, filepath.FromSlash(rel))
	orig, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	defer func() {
		werr := os.WriteFile(path, orig, info.Mode().Perm())
		if werr == nil {
			werr = os.Chtimes(path, info.ModTime(), info.ModTime())
		}
		err = errors.Join(err, werr)
	}()
	var upd, snap, tot, up, ratio []float64
	for i := range n {
		edited := append(append([]byte(nil), orig...), fmt.Sprintf("\n<!-- bench second %d -->\n", i)...)
		if err := os.WriteFile(path, edited, info.Mode().Perm()); err != nil {
			return nil, err
		}
		t := time.Now()
		h, err := cache.Update(ctx, []string{rel})
		if err != nil {
			return nil, err
		}
		u := time.Since(t).Seconds()
		if err := writeLock(dir, h.Digest, 2+i); err != nil {
			return nil, err
		}
		t = time.Now()
		res, err := b.Snapshot(ctx, repo.SnapshotInput{
			Brain: dir, Index: ix, Known: cache, Want: h.Digest, LockVersion: int64(2 + i),
			Prev: prev.Commit, Trees: prev.Trees, Parent: prev.Head.BlobID, ParentFormat: repo.ParentV3,
		})
		if err != nil {
			return nil, err
		}
		s := time.Since(t).Seconds()
		if res.Stats.FilesRead > 2 { // the edited file and the lock
			return nil, fmt.Errorf("second snapshot read %d files, want the edited one and the lock", res.Stats.FilesRead)
		}
		upd, snap, tot = append(upd, u*1000), append(snap, s), append(tot, u+s)
		up = append(up, float64(res.Stats.BytesUploaded))
		ratio = append(ratio, float64(res.Stats.BytesUploaded)/float64(res.Stats.Bytes))
		prev = res
	}
	return map[string]float64{
		"second_update_ms":      median(upd),
		"second_snap_s":         median(snap),
		"second_total_s":        median(tot),
		"second_uploaded_B":     median(up),
		"second_uploaded_ratio": median(ratio),
	}, nil
}

// runV3SQLite measures what one 4 KiB change inside a SQLite database,
// made through SQL by the sqlite3 CLI, costs the next snapshot: a brain
// holding a ~200 MiB memory.db (one 3,000-byte row per 4 KiB page) is
// snapshotted, one row is rewritten with UPDATE, and after Cache.Update the
// second snapshot's uploaded bytes are compared with the brain's size.
func runV3SQLite(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("v3sqlite", flag.ContinueOnError)
	dir := fs.String("dir", "", "brain directory to create (must not exist)")
	url := fs.String("url", "", "local Walrus server")
	spool := fs.String("spool", "", "spool directory")
	keyFile := fs.String("keyfile", "", "master key file")
	rows := fs.Int("rows", 51200, "rows of 3,000 random bytes, one per 4 KiB page (51,200 ≈ 200 MiB)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *url == "" || *spool == "" || *keyFile == "" {
		return errors.New("-dir, -url, -spool and -keyfile are required")
	}
	if _, err := os.Lstat(*dir); err == nil {
		return fmt.Errorf("%s exists", *dir)
	}
	if err := os.MkdirAll(filepath.Join(*dir, "skills"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*dir, "skills", "sql.md"), []byte("# sql\nkeep memories in memory.db\n"), 0o644); err != nil {
		return err
	}
	db := filepath.Join(*dir, "memory.db")
	sql := func(stmt string) error {
		out, err := exec.CommandContext(ctx, "sqlite3", db, stmt).CombinedOutput()
		if err != nil {
			return fmt.Errorf("sqlite3: %w: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := sql(fmt.Sprintf(`PRAGMA page_size=4096; CREATE TABLE memories(id INTEGER PRIMARY KEY, body BLOB);
		WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x < %d)
		INSERT INTO memories SELECT x, randomblob(3000) FROM n;`, *rows)); err != nil {
		return err
	}
	keys, err := v3Keys(*keyFile)
	if err != nil {
		return err
	}
	client, err := snapClient(*url, *spool)
	if err != nil {
		return err
	}
	b := &repo.Builder{Keys: keys, Sink: &walrusSink{c: client}, SpoolDir: *spool, MaxPackSize: 10 << 20}
	cache := hash.NewCache(*dir, hash.Options{})
	h, err := cache.Rescan(ctx)
	if err != nil {
		return err
	}
	ix := repo.NewIndex()
	first, err := b.Snapshot(ctx, repo.SnapshotInput{Brain: *dir, Index: ix, Known: cache, Want: h.Digest})
	if err != nil {
		return err
	}
	before, err := pageSums(db)
	if err != nil {
		return err
	}
	if err := sql(fmt.Sprintf("UPDATE memories SET body = randomblob(3000) WHERE id = %d;", *rows/2)); err != nil {
		return err
	}
	after, err := pageSums(db)
	if err != nil {
		return err
	}
	changedPages := 0
	for i := range max(len(before), len(after)) {
		if i >= len(before) || i >= len(after) || before[i] != after[i] {
			changedPages++
		}
	}
	h, err = cache.Update(ctx, []string{"memory.db"})
	if err != nil {
		return err
	}
	t := time.Now()
	res, err := b.Snapshot(ctx, repo.SnapshotInput{
		Brain: *dir, Index: ix, Known: cache, Want: h.Digest,
		Prev: first.Commit, Trees: first.Trees, Parent: first.Head.BlobID, ParentFormat: repo.ParentV3,
	})
	if err != nil {
		return err
	}
	st := res.Stats
	emit(map[string]float64{
		"brain_B":        float64(st.Bytes),
		"changed_pages":  float64(changedPages),
		"uploaded_B":     float64(st.BytesUploaded),
		"uploaded_ratio": float64(st.BytesUploaded) / float64(st.Bytes),
		"chunks_new":     float64(st.ChunksNew),
		"snap_s":         time.Since(t).Seconds(),
	})
	return nil
}

// pageSums returns the SHA-256 of every 4 KiB page of the file.
func pageSums(path string) ([][32]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var sums [][32]byte
	page := make([]byte, 4096)
	for {
		n, err := io.ReadFull(f, page)
		if n > 0 {
			sums = append(sums, sha256.Sum256(page[:n]))
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return sums, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// runV3Restore restores a v3 snapshot as the daemon will on an empty
// disk: Open (head, listed packs' indexes) and Restore through range reads
// of the walrus client, into a fresh directory.
func runV3Restore(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("v3restore", flag.ContinueOnError)
	url := fs.String("url", "", "local Walrus server")
	idFile := fs.String("idfile", "", "file holding the head pack's blob id")
	target := fs.String("target", "", "fresh directory to restore into")
	keyFile := fs.String("keyfile", "", "master key file")
	conc := fs.Int("concurrency", 0, "ReadOptions.Concurrency (0: the reader's default)")
	memProf := fs.String("memprofile", "", "write a heap profile after the restore to `FILE`")
	prof := profileFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target == "" || *idFile == "" || *url == "" || *keyFile == "" {
		return errors.New("-url, -idfile, -target and -keyfile are required")
	}
	if _, err := os.Lstat(*target); err == nil {
		return fmt.Errorf("%s exists: restores go into a fresh directory (ext4's recently_deleted slows a reused one)", *target)
	}
	keys, err := v3Keys(*keyFile)
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
	stopProf, err := prof()
	if err != nil {
		return err
	}
	defer stopProf()
	t := time.Now()
	r, err := repo.Open(ctx, walrusRanges{client}, keys, strings.TrimSpace(string(id)), repo.ReadOptions{Concurrency: *conc})
	if err != nil {
		return err
	}
	openS := time.Since(t).Seconds()
	// As hermesd restore does: into a temporary directory beside the
	// target, made durable (syncfs) and renamed into place.
	tmp := *target + ".restoring"
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	res, err := r.Restore(ctx, tmp, repo.RestoreOptions{})
	if err != nil {
		return err
	}
	ts := time.Now()
	if err := syncfs(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, *target); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(filepath.Dir(*target)); err != nil {
		return err
	}
	syncS := time.Since(ts).Seconds()
	total := time.Since(t).Seconds()
	if *memProf != "" {
		if err := writeHeapProfile(*memProf); err != nil {
			return err
		}
	}
	emit(map[string]float64{
		"open_s":         openS,
		"sync_s":         syncS,
		"total_s":        total,
		"MBps":           float64(res.Bytes) / 1e6 / total,
		"files":          float64(res.Files),
		"downloaded_MiB": float64(res.Downloaded) / (1 << 20),
		"ranges":         float64(res.Ranges),
		"hwm_MiB":        vmHWM(),
	})
	return nil
}

func writeHeapProfile(path string) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncfs makes everything written under dir durable, as hermesd restore
// does (one syncfs(2)).
func syncfs(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
