package snapshot

import (
	"bytes"
	"crypto/ecdsa"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/tarball"
	"github.com/hermesd/hermesd/internal/walrus"
)

type fixture struct {
	t      *testing.T
	srv    *localwalrus.Server
	client *walrus.Client
	key    cipher.Key
	brain  string
	spool  string
	log    *receipts.Log
	signer *ecdsa.PrivateKey
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv, err := localwalrus.New(localwalrus.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := walrus.New(walrus.Config{Publishers: []string{srv.URL()}, Aggregators: []string{srv.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := cipher.GenerateKey()
	signer, _ := crypto.GenerateKey()
	root := t.TempDir()
	rl, err := receipts.OpenLog(filepath.Join(root, "receipts.log"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	f := &fixture{t: t, srv: srv, client: c, key: key, brain: filepath.Join(root, "brain"),
		spool: filepath.Join(root, "spool"), log: rl, signer: signer}
	for _, d := range []string{f.brain, f.spool} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]struct {
		content string
		mode    fs.FileMode
	}{
		"system.md":            {"You are a test agent.\n", 0o644},
		"skills/reentrancy.md": {"---\nname: reentrancy\n---\nLook for re-entrant calls.\n", 0o600},
		"patterns/deep/p.md":   {"pattern\n", 0o640},
		"memory.db":            {strings.Repeat("page", 50000), 0o644},
		".hidden":              {"", 0o644},
	}
	for p, fc := range files {
		full := filepath.Join(f.brain, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(fc.content), fc.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(full, fc.mode)
	}
	return f
}

func (f *fixture) snapshotter(identity string) *Snapshotter {
	token := uint64(7)
	return &Snapshotter{
		AgentID:  "alpha",
		TokenID:  &token,
		BrainDir: f.brain,
		SpoolDir: f.spool,
		Envelope: Envelope{Key: f.key, Identity: identity},
		Store:    f.client,
		Epochs:   3,
		Receipts: f.log,
		Signer:   f.signer,
	}
}

func (f *fixture) restorer(identity string, others ...string) *Restorer {
	return &Restorer{Store: f.client, SpoolDir: f.spool, Key: f.key, Identity: identity, Others: others}
}

func (f *fixture) hash() hash.Digest {
	f.t.Helper()
	r, err := hash.Dir(f.t.Context(), f.brain, hash.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	return r.Digest
}

// same compares the hashed files of two trees, content and mode.
func same(t *testing.T, a, b string) {
	t.Helper()
	ra, err := hash.Dir(t.Context(), a, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := hash.Dir(t.Context(), b, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ra.Digest != rb.Digest || len(ra.Files) != len(rb.Files) {
		t.Fatalf("trees differ: %s vs %s", ra.Digest, rb.Digest)
	}
	for i := range ra.Files {
		if ra.Files[i] != rb.Files[i] {
			t.Errorf("%s: %+v vs %+v", ra.Files[i].Path, ra.Files[i], rb.Files[i])
		}
	}
}

func TestTakeAndRestore(t *testing.T) {
	f := newFixture(t)
	want := f.hash()
	res, err := f.snapshotter("alpha.eth").Take(t.Context(), want)
	if err != nil {
		t.Fatal(err)
	}
	if res.BundleHash != want || res.Version != 1 || res.Files != 5 || res.BlobID == "" || res.EndEpoch == 0 {
		t.Fatalf("result = %+v", res)
	}
	lock, err := bundlelock.Read(filepath.Join(f.brain, bundlelock.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if lock.BundleHash() != want.String() || lock.BlobID() != res.BlobID || len(lock.Lineage()) != 1 {
		t.Fatalf("lock after upload: %s", lock)
	}
	nd, err := os.ReadFile(filepath.Join(f.brain, ReceiptsFile))
	if err != nil || !bytes.Contains(nd, []byte(`"schemaVersion":"hermesd/snapshot/v1"`)) {
		t.Fatalf("receipts.ndjson = %q, %v", nd, err)
	}
	if entries, _ := os.ReadDir(f.spool); len(entries) != 0 {
		t.Errorf("spool not cleaned: %v", entries)
	}

	target := filepath.Join(t.TempDir(), "restored")
	r, err := f.restorer("alpha.eth").Restore(t.Context(), res.BlobID, target)
	if err != nil {
		t.Fatal(err)
	}
	if r.BundleHash != want || r.Files != 5 || r.BlobSize != res.Size {
		t.Fatalf("restored = %+v", r)
	}
	same(t, f.brain, target)
	// Inside the blob the lock names its parent (none for the first one).
	if r.Lock.BlobID() != "" || r.Lock.BundleHash() != want.String() {
		t.Errorf("restored lock: %s", r.Lock)
	}

	// A second snapshot after a change: version 2, lineage in the new blob.
	os.WriteFile(filepath.Join(f.brain, "skills/new.md"), []byte("new\n"), 0o644)
	res2, err := f.snapshotter("alpha.eth").Take(t.Context(), f.hash())
	if err != nil {
		t.Fatal(err)
	}
	if res2.Version != 2 {
		t.Errorf("version = %d", res2.Version)
	}
	inner, err := ReadLock(t.Context(), f.client, res2.BlobID, f.key, "alpha.eth")
	if err != nil {
		t.Fatal(err)
	}
	if inner.BlobID() != res.BlobID || len(inner.Lineage()) != 1 || inner.Lineage()[0].BlobID != res.BlobID {
		t.Errorf("lock inside the second blob: %s", inner)
	}
	if n := f.log.Len(); n != 2 {
		t.Errorf("transition receipts = %d, want 2", n)
	}
}

func TestTakeRefusesAHashItDoesNotContain(t *testing.T) {
	f := newFixture(t)
	// The brain "changed" between hashing and packing.
	_, err := f.snapshotter("alpha.eth").Take(t.Context(), hash.Null)
	if !errors.Is(err, ErrChanged) {
		t.Fatalf("Take = %v, want ErrChanged", err)
	}
	if n := f.srv.Stats().Requests; n != 0 {
		t.Errorf("%d requests reached Walrus", n)
	}
}

// packed writes an encrypted snapshot of dir to a file without uploading.
func packed(t *testing.T, dir string, key cipher.Key, identity string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "blob")
	out, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := cipher.Encrypt(out, key, identity)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tarball.Write(t.Context(), enc, dir, tarball.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	out.Close()
	return p
}

func TestRestoreFailuresLeaveTargetUntouched(t *testing.T) {
	f := newFixture(t)
	good := f.hash()
	withLock := func(h string) string {
		l := &bundlelock.Lock{}
		l.Record(h, 1)
		if err := bundlelock.Write(filepath.Join(f.brain, bundlelock.FileName), l); err != nil {
			t.Fatal(err)
		}
		return packed(t, f.brain, f.key, "alpha.eth")
	}
	goodBlob := withLock(good.String())
	lyingBlob := withLock(hash.Null.String())
	os.Remove(filepath.Join(f.brain, bundlelock.FileName))
	noLockBlob := packed(t, f.brain, f.key, "alpha.eth")
	otherKey, _ := cipher.GenerateKey()
	corrupt := filepath.Join(t.TempDir(), "corrupt")
	b, _ := os.ReadFile(goodBlob)
	b[len(b)/2] ^= 1
	os.WriteFile(corrupt, b, 0o600)

	tests := []struct {
		name   string
		blob   string
		r      *Restorer
		target func(parent string) string
		want   error
	}{
		{"lock lies about the hash", lyingBlob, f.restorer("alpha.eth"), missing, ErrHashMismatch},
		{"no lock", noLockBlob, f.restorer("alpha.eth"), missing, ErrNoLock},
		{"corrupted", corrupt, f.restorer("alpha.eth"), missing, cipher.ErrAuth},
		{"wrong key", goodBlob, &Restorer{SpoolDir: f.spool, Key: otherKey, Identity: "alpha.eth"}, missing, cipher.ErrAuth},
		{"another agent's blob", goodBlob, f.restorer("beta.eth", "gamma.eth", "alpha.eth"), missing, ErrWrongAgent},
		{"target holds files", goodBlob, f.restorer("alpha.eth"), withFile, ErrNotEmpty},
		{"target is a file", goodBlob, f.restorer("alpha.eth"), isFile, ErrNotEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			target := tt.target(parent)
			before := listing(t, parent)
			_, err := tt.r.RestoreFile(t.Context(), tt.blob, target)
			if !errors.Is(err, tt.want) {
				t.Fatalf("RestoreFile = %v, want %v", err, tt.want)
			}
			if after := listing(t, parent); after != before {
				t.Errorf("parent changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	t.Run("empty subdirectories are replaced", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "brain")
		os.MkdirAll(filepath.Join(target, "skills"), 0o755)
		os.MkdirAll(filepath.Join(target, "patterns"), 0o755)
		if _, err := f.restorer("alpha.eth").RestoreFile(t.Context(), goodBlob, target); err != nil {
			t.Fatal(err)
		}
		same(t, f.brain, target)
	})
}

func missing(parent string) string { return filepath.Join(parent, "brain") }

func withFile(parent string) string {
	p := filepath.Join(parent, "brain")
	os.MkdirAll(p, 0o755)
	os.WriteFile(filepath.Join(p, "keep.md"), []byte("precious"), 0o644)
	return p
}

func isFile(parent string) string {
	p := filepath.Join(parent, "brain")
	os.WriteFile(p, []byte("x"), 0o644)
	return p
}

// listing renders everything under dir (names, sizes, modes, contents).
func listing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, _ := d.Info()
		rel, _ := filepath.Rel(dir, p)
		b.WriteString(rel + " " + info.Mode().String())
		if d.Type().IsRegular() {
			c, _ := os.ReadFile(p)
			b.WriteString(" " + string(c))
		}
		b.WriteString("\n")
		return nil
	})
	return b.String()
}
