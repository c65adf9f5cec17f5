package snapshot

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/diskspace"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/tarball"
)

// ErrChanged means the brain changed while it was being packed, so the
// packed bytes do not match the bundle hash the lock records. Re-hash and
// try again.
var ErrChanged = errors.New("brain changed while it was being packed")

// ReceiptsFile is the receipts export at the top of a brain directory.
const ReceiptsFile = "receipts.ndjson"

// Input is what the caller knows when it asks for a snapshot.
type Input struct {
	// Want is the bundle hash the caller has just computed; the snapshot
	// must contain exactly that state (else ErrChanged). Zero (v3 only,
	// see HashesWhileTaking) means the snapshot is the hash: it reads each
	// file it needs once and its result says what it found, Result.Reads
	// listing every file read (ErrChanged if a file did not hold still).
	Want hash.Digest
	// Overlay, when set, is the view of the brain Want was computed
	// through (frozen copies of live SQLite databases); the snapshot reads
	// the same view.
	Overlay *fsys.Overlay
	// Known gives the brain's files with their digests as the hash that
	// gave Want saw them (the hash.Cache, or hash.Files): a v3 snapshot
	// does not read a file whose path, size and SHA-256 match the previous
	// commit (the bundle check against Want vouches for the result).
	Known repo.KnownFiles
	// Newer, when set, is closed when a newer state of the brain is ready
	// to be snapshotted: a v3 snapshot whose pack waits for its quilt
	// batch may then give way (ErrSuperseded). It is a signal the caller
	// raises while Take runs, as ctx.Done() is.
	Newer <-chan struct{}
	// Slot, when set, is the caller's hold on a process-wide sync slot: a
	// v3 snapshot lends it out while a pack waits for its quilt batch.
	Slot Slot
}

// Slot is a hold on one of the places a process has for snapshot work.
// A pack waiting for its quilt batch uses no core, so its snapshot gives
// the place to another agent's meanwhile (whose packs may fill the same
// batch) and takes it back before it goes on.
type Slot interface {
	// Lend gives the place up for a wait; waits may overlap.
	Lend()
	// Reclaim ends a wait: the last one takes the place back, or fails
	// when ctx ends first (the snapshot then goes on without it).
	Reclaim(ctx context.Context) error
}

// ErrEmpty: a snapshot taken as the hash (zero Input.Want) found no file
// to protect; nothing was stored.
var ErrEmpty = errors.New("snapshot: the brain holds no file")

// ErrNeedsHash: a v1 or v2 snapshot needs the bundle hash (Input.Want)
// before it starts.
var ErrNeedsHash = errors.New("snapshot: this format needs the bundle hash before the snapshot")

// HashesWhileTaking reports whether Take accepts a zero Input.Want: v3
// hashes while it reads, v1 and v2 must know the hash first.
func (s *Pipeline) HashesWhileTaking() bool { return s.Format == FormatV3 }

// Result describes an uploaded, verified snapshot.
type Result struct {
	Format Format
	// BlobID is what the ENS pointer names: the blob (v1, v2), or the v3
	// head pack's head reference, with its commit id (docs/format-v3.md
	// §14).
	BlobID           string
	BundleHash       hash.Digest
	Version          int64
	Size             int64    // encrypted bytes of BlobID
	SHA256           [32]byte // of BlobID's bytes
	EndEpoch         uint64   // the snapshot is restorable until then (v3: the earliest of its packs)
	AlreadyCertified bool
	Files            int
	Bytes            int64 // plaintext bytes of the files packed
	// Uploaded is every byte this snapshot uploaded (v3: all its packs).
	Uploaded int64
	// Packs, LivePacks, Repacked and FilesRead describe a v3 snapshot: the
	// packs it uploaded (the head included), the packs its commit needs,
	// the packs whose live objects it wrote again, and the files it read
	// (the others were unchanged).
	Packs, LivePacks, Repacked, FilesRead int
	CreatedAt                             time.Time
	// Pack is the time to build the snapshot (v3: everything, uploads
	// included, as they overlap); Upload and Verify the time spent in
	// uploads and read-backs (v3: summed over packs). Prepare (v3) is the
	// part of Pack before the builder starts: the brain lock, the parent
	// and the re-pack plan.
	Pack     time.Duration
	Prepare  time.Duration
	Upload   time.Duration
	Verify   time.Duration
	Attempts int // HTTP attempts for the upload
	// Quilted (v3) is how many of the packs were stored as quilt patches,
	// and BatchWait the time they waited for their batches (summed; part
	// of Pack, not of Upload).
	Quilted   int
	BatchWait time.Duration
	// Rekey: the parent was written under another key (an earlier
	// owner's), so this v3 snapshot stores the whole brain under the
	// agent's own key and shares no pack with it.
	Rekey bool
	// Reads (v3 with a zero Input.Want) are the files the snapshot read,
	// for the hash cache to take over (hash.Learner.Add).
	Reads repo.FileReads
}

// Take snapshots the brain, whose bundle hash the caller has just computed
// as in.Want, uploads it and reads it back. Nothing is published; the
// caller repoints ENS once Take returns.
func (s *Pipeline) Take(ctx context.Context, in Input) (Result, error) {
	if err := s.check(); err != nil {
		return Result{}, err
	}
	switch {
	case s.Format == FormatV3:
		return s.takeV3(ctx, in)
	case in.Want == (hash.Digest{}):
		return Result{}, ErrNeedsHash
	}
	return s.takeWhole(ctx, in)
}

// lockParent returns the blob the lock at lockPath names ("" when there
// is no lock yet): the next snapshot's parent.
func lockParent(lockPath string) (string, error) {
	lock, err := bundlelock.Read(lockPath)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read lock: %w", err)
	}
	return lock.BlobID(), nil
}

// recordLock moves bundle.lock.json to want (version+1 and a signed
// transition receipt when the hash changed) and exports receipts.ndjson,
// as every format does before packing. It returns the lock, its path and
// the blob it named: the new snapshot's parent.
func (s *Pipeline) recordLock(ctx context.Context, want hash.Digest, start time.Time) (*bundlelock.Lock, string, string, error) {
	lockPath := filepath.Join(s.BrainDir, bundlelock.FileName)
	lock, err := bundlelock.Read(lockPath)
	if errors.Is(err, os.ErrNotExist) {
		lock = &bundlelock.Lock{}
	} else if err != nil {
		return nil, "", "", fmt.Errorf("read lock: %w", err)
	}
	before := lock.BundleHash()
	parent := lock.BlobID()
	if lock.Record(want.String(), start.UnixMilli()) {
		if err := s.appendTransition(before, want, parent, start); err != nil {
			return nil, "", "", err
		}
	}
	if s.Receipts != nil {
		if err := s.Receipts.ExportFile(ctx, filepath.Join(s.BrainDir, ReceiptsFile), tokenID(s.TokenID)); err != nil {
			return nil, "", "", fmt.Errorf("export receipts: %w", err)
		}
	}
	if err := bundlelock.Write(lockPath, lock); err != nil {
		return nil, "", "", fmt.Errorf("write lock: %w", err)
	}
	return lock, lockPath, parent, nil
}

// takeWhole is Take for v1 and v2: the whole brain as one blob.
func (s *Pipeline) takeWhole(ctx context.Context, in Input) (Result, error) {
	want := in.Want
	start := s.now()
	lock, lockPath, _, err := s.recordLock(ctx, want, start)
	if err != nil {
		return Result{}, err
	}

	spool, err := s.pack(ctx, want, in.Overlay)
	if err != nil {
		return Result{}, err
	}
	defer os.Remove(spool.path)
	res := Result{
		Format:     s.Format,
		BundleHash: want,
		Version:    lock.Version(),
		Size:       spool.size,
		Uploaded:   spool.size,
		SHA256:     spool.sum,
		Files:      spool.files,
		Bytes:      spool.bytes,
		CreatedAt:  start,
		Pack:       s.now().Sub(start),
	}

	if s.MaxBlobSize > 0 && spool.size > s.MaxBlobSize {
		return Result{}, fmt.Errorf("%w: the encrypted snapshot of %s is %d bytes (%s), the limit is %d bytes (%s); "+
			"it is not retried until the brain changes (the v3 format splits a brain into packs under the limit)",
			ErrTooLarge, want, spool.size, diskspace.Format(spool.size), s.MaxBlobSize, diskspace.Format(s.MaxBlobSize))
	}
	t := s.now()
	stored, err := s.Store.Put(ctx, spool.path, s.Epochs)
	if err != nil {
		return Result{}, fmt.Errorf("upload: %w", err)
	}
	res.Upload = s.now().Sub(t)
	res.BlobID, res.EndEpoch = stored.BlobID, stored.EndEpoch
	res.AlreadyCertified, res.Attempts = stored.AlreadyCertified, stored.Attempts

	t = s.now()
	if err := s.Store.Check(ctx, stored.BlobID, spool.size, spool.sum); err != nil {
		return Result{}, fmt.Errorf("verify upload of %s: %w", stored.BlobID, err)
	}
	res.Verify = s.now().Sub(t)

	// Only a verified blob becomes the lock's walrusSnapshotBlobId.
	lock.Uploaded(bundlelock.LineageEntry{
		BlobID:     stored.BlobID,
		BundleHash: want.String(),
		CreatedAt:  start.UnixMilli(),
		Size:       spool.size,
		EndEpoch:   uint64(stored.EndEpoch),
	})
	if err := bundlelock.Write(lockPath, lock); err != nil {
		return Result{}, fmt.Errorf("record blob id in lock: %w", err)
	}
	return res, nil
}

func (s *Pipeline) appendTransition(before string, after hash.Digest, parent string, at time.Time) error {
	if s.Signer == nil || s.Receipts == nil {
		return nil
	}
	if s.TokenID == nil {
		// The reference runtime's importer throws on a receipt without a
		// tokenId, so a brain carrying one could not be restored there.
		s.log().Debug("no transition receipt: the agent has no token id")
		return nil
	}
	b := hash.Null
	if before != "" {
		d, err := hash.ParseDigest(before)
		if err != nil {
			// A lock written by another tool may hold junk; the receipt
			// then records the transition from the empty bundle.
			s.log().Warn("lock holds an unparsable bundleHash; transition receipt starts from the null hash", "bundleHash", before)
		} else {
			b = d
		}
	}
	r, err := receipts.NewSnapshotReceipt(receipts.SnapshotInfo{
		AgentID:          s.AgentID,
		TokenID:          tokenID(s.TokenID),
		BundleHashBefore: b.String(),
		BundleHashAfter:  after.String(),
		StateDeltaHash:   hash.StateDelta(b, after).String(),
		ParentBlobID:     parent,
		TS:               at.Unix(),
	}, s.Signer)
	if err != nil {
		return fmt.Errorf("sign transition receipt: %w", err)
	}
	if _, err := s.Receipts.Append(r); err != nil {
		return fmt.Errorf("append transition receipt: %w", err)
	}
	return nil
}

func tokenID(t *uint64) string {
	if t == nil {
		return ""
	}
	return strconv.FormatUint(*t, 10)
}

type spooled struct {
	path  string
	size  int64
	sum   [32]byte
	files int
	bytes int64
}

// pack streams the brain into an encrypted spool file. The tar writer runs
// in its own goroutine so that hashing the files (one core) and encrypting
// plus digesting the blob (the other) overlap.
func (s *Pipeline) pack(ctx context.Context, want hash.Digest, ov *fsys.Overlay) (sp spooled, err error) {
	f, err := os.CreateTemp(s.SpoolDir, s.AgentID+"-*.snapshot")
	if err != nil {
		return sp, fmt.Errorf("create spool: %w", err)
	}
	sp.path = f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(sp.path)
		}
	}()

	// The blob's SHA-256 (for the read-back check) runs on its own
	// goroutine: on a CPU without SHA extensions it costs as much as
	// hashing the brain, and would otherwise serialise with encryption.
	digest := newAsyncDigest()
	defer digest.abort()
	counted := &countWriter{w: io.MultiWriter(f, digest)}
	var enc io.WriteCloser
	switch s.Format {
	case FormatV1:
		enc, err = cipher.EncryptV1(counted, s.Key, s.V1MaxSize)
	case FormatSeal:
		enc = s.newSealWriter(counted)
	default:
		enc, err = cipher.Encrypt(counted, s.Key, s.Identity)
	}
	if err != nil {
		return sp, fmt.Errorf("encrypt: %w", err)
	}

	pr, pw := io.Pipe()
	type packResult struct {
		man tarball.Manifest
		err error
	}
	done := make(chan packResult, 1)
	go func() {
		bw := bufio.NewWriterSize(pw, 1<<20)
		man, err := tarball.Write(ctx, bw, s.BrainDir, tarball.WriteOptions{Overlay: ov})
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
		done <- packResult{man, err}
	}()
	_, copyErr := io.Copy(enc, pr)
	pr.CloseWithError(copyErr) // unblock the writer if encryption failed
	packed := <-done
	if packed.err != nil {
		return sp, fmt.Errorf("pack: %w", packed.err)
	}
	if copyErr != nil {
		return sp, fmt.Errorf("encrypt: %w", copyErr)
	}
	if err := enc.Close(); err != nil {
		return sp, fmt.Errorf("encrypt: %w", err)
	}
	if err := f.Sync(); err != nil {
		return sp, fmt.Errorf("sync spool: %w", err)
	}
	if err := f.Close(); err != nil {
		return sp, fmt.Errorf("close spool: %w", err)
	}

	files := toHashFiles(packed.man)
	if got := hash.FromFiles(files); got != want {
		return sp, fmt.Errorf("%w: packed %s, expected %s", ErrChanged, got, want)
	}
	for _, fl := range files {
		if !hash.Excluded(fl.Path) {
			sp.files++
			sp.bytes += fl.Size
		}
	}
	sp.size = counted.n
	if sp.sum, err = digest.sum(); err != nil {
		return sp, fmt.Errorf("digest spool: %w", err)
	}
	return sp, nil
}

func toHashFiles(m tarball.Manifest) []hash.File {
	files := make([]hash.File, 0, len(m.Files))
	for _, f := range m.Files {
		files = append(files, hash.File{Path: f.Path, Size: f.Size, Mode: f.Mode, SHA256: f.SHA256})
	}
	return files
}

// asyncDigest computes a SHA-256 of what is written to it on a goroutine
// of its own, fed through a pipe.
type asyncDigest struct {
	pw   *io.PipeWriter
	done chan struct{}
	sumv [32]byte
	err  error
}

func newAsyncDigest() *asyncDigest {
	pr, pw := io.Pipe()
	d := &asyncDigest{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		h := sha256.New()
		_, d.err = io.CopyBuffer(h, pr, make([]byte, 1<<20))
		pr.CloseWithError(d.err)
		copy(d.sumv[:], h.Sum(nil))
	}()
	return d
}

func (d *asyncDigest) Write(p []byte) (int, error) { return d.pw.Write(p) }

// sum ends the input and returns the digest.
func (d *asyncDigest) sum() ([32]byte, error) {
	d.pw.Close()
	<-d.done
	return d.sumv, d.err
}

// abort stops the goroutine if sum was never called.
func (d *asyncDigest) abort() {
	d.pw.CloseWithError(errors.New("aborted"))
	<-d.done
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
