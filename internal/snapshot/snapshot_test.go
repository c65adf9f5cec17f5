package snapshot_test

import (
	"archive/tar"
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
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/snapshot"
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

// testShards is the fixtures' Walrus shard count: blob ids (the server's
// and the client's checks) at a hundredth of mainnet's 1000-shard cost.
// What depends on the count itself is tested in internal/redstuff.
const testShards = 100

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv, err := localwalrus.New(localwalrus.Config{Dir: t.TempDir(), Shards: testShards})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := walrus.New(walrus.Config{Publishers: []string{srv.URL()}, Aggregators: []string{srv.URL()}, Shards: testShards})
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

// pipeline is the pipeline of agent alpha under identity, with others as
// the other configured identities.
func (f *fixture) pipeline(identity string, others ...string) *snapshot.Pipeline {
	token := uint64(7)
	return &snapshot.Pipeline{
		AgentID:  "alpha",
		TokenID:  &token,
		Identity: identity,
		Others:   others,
		BrainDir: f.brain,
		SpoolDir: f.spool,
		Key:      f.key,
		Format:   snapshot.FormatV2,
		Store:    compose.Store(f.client),
		Epochs:   3,
		Receipts: f.log,
		Signer:   f.signer,
	}
}

func (f *fixture) take(identity string, want hash.Digest) (snapshot.Result, error) {
	return f.pipeline(identity).Take(f.t.Context(), snapshot.Input{Want: want})
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
		ra.Files[i].Stat, rb.Files[i].Stat = fsys.Info{}, fsys.Info{} // where and when, not what
		if ra.Files[i] != rb.Files[i] {
			t.Errorf("%s: %+v vs %+v", ra.Files[i].Path, ra.Files[i], rb.Files[i])
		}
	}
}

func TestTakeAndRestore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	want := f.hash()
	res, err := f.take("alpha.eth", want)
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
	nd, err := os.ReadFile(filepath.Join(f.brain, snapshot.ReceiptsFile))
	if err != nil || !bytes.Contains(nd, []byte(`"schemaVersion":"hermesd/snapshot/v1"`)) {
		t.Fatalf("receipts.ndjson = %q, %v", nd, err)
	}
	if entries, _ := os.ReadDir(f.spool); len(entries) != 0 {
		t.Errorf("spool not cleaned: %v", entries)
	}

	target := filepath.Join(t.TempDir(), "restored")
	r, err := f.pipeline("alpha.eth").Restore(t.Context(), res.BlobID, target)
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
	res2, err := f.take("alpha.eth", f.hash())
	if err != nil {
		t.Fatal(err)
	}
	if res2.Version != 2 {
		t.Errorf("version = %d", res2.Version)
	}
	inner, err := f.pipeline("alpha.eth").ReadLock(t.Context(), res2.BlobID)
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
	t.Parallel()
	f := newFixture(t)
	// The brain "changed" between hashing and packing.
	_, err := f.take("alpha.eth", hash.Null)
	if !errors.Is(err, snapshot.ErrChanged) {
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
	t.Parallel()
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
		r      *snapshot.Pipeline
		target func(parent string) string
		want   error
	}{
		{"lock lies about the hash", lyingBlob, f.pipeline("alpha.eth"), missing, snapshot.ErrHashMismatch},
		{"no lock", noLockBlob, f.pipeline("alpha.eth"), missing, snapshot.ErrNoLock},
		{"corrupted", corrupt, f.pipeline("alpha.eth"), missing, cipher.ErrAuth},
		{"wrong key", goodBlob, &snapshot.Pipeline{SpoolDir: f.spool, Key: otherKey, Identity: "alpha.eth"}, missing, cipher.ErrAuth},
		{"another agent's blob", goodBlob, f.pipeline("beta.eth", "gamma.eth", "alpha.eth"), missing, snapshot.ErrWrongAgent},
		{"target holds files", goodBlob, f.pipeline("alpha.eth"), withFile, snapshot.ErrNotEmpty},
		{"target is a file", goodBlob, f.pipeline("alpha.eth"), isFile, snapshot.ErrNotEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			target := tt.target(parent)
			before := listing(t, parent)
			_, err := tt.r.RestoreFile(t.Context(), tt.blob, target, snapshot.RestoreOptions{})
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
		if _, err := f.pipeline("alpha.eth").RestoreFile(t.Context(), goodBlob, target, snapshot.RestoreOptions{}); err != nil {
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

// TestRestoredRootMode: the brain root gets RootMode (the reference
// runtime's), not the temporary directory's 0700.
func TestRestoredRootMode(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res, err := f.take("alpha.eth", f.hash())
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "brain")
	if _, err := f.pipeline("alpha.eth").Restore(t.Context(), res.BlobID, target); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(target); err != nil || st.Mode().Perm() != snapshot.RootMode {
		t.Fatalf("root mode %v, %v; want %v", st.Mode().Perm(), err, snapshot.RootMode)
	}
}

// TestUnverifiedRestore: a snapshot without a lock (or with a lying one)
// is refused by default, and installed with RestoreOptions.Unverified,
// which reports what it could not check and the hash of the files.
func TestUnverifiedRestore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	want := f.hash()
	noLock := packed(t, f.brain, f.key, "alpha.eth")
	p := f.pipeline("alpha.eth")
	if _, err := p.RestoreFile(t.Context(), noLock, filepath.Join(t.TempDir(), "b"), snapshot.RestoreOptions{}); !errors.Is(err, snapshot.ErrNoLock) {
		t.Fatalf("default: %v", err)
	}
	target := filepath.Join(t.TempDir(), "b")
	r, err := p.RestoreFile(t.Context(), noLock, target, snapshot.RestoreOptions{Unverified: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verified || len(r.Unchecked) != 1 || !strings.Contains(r.Unchecked[0], "bundle.lock.json") || r.BundleHash != want {
		t.Fatalf("unverified restore: %+v", r)
	}
	same(t, f.brain, target)
	// A blob that does not authenticate is refused even so.
	b, _ := os.ReadFile(noLock)
	b[len(b)-20] ^= 1
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, b, 0o600)
	if _, err := p.RestoreFile(t.Context(), bad, filepath.Join(t.TempDir(), "c"), snapshot.RestoreOptions{Unverified: true}); !errors.Is(err, cipher.ErrAuth) {
		t.Fatalf("tampered, unverified: %v", err)
	}
}

// TestV1MaxSizeAppliesToRestore: a v1 snapshot bigger than the default
// reading cap, written under a configured v1_max_size, restores under the
// same setting (it used to fail with the 256 MiB default).
func TestV1MaxSizeAppliesToRestore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := f.pipeline("alpha.eth")
	p.Format, p.V1MaxSize = snapshot.FormatV1, 1<<20
	// 3 MiB of incompressible content: over the 1 MiB cap.
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>9)
	}
	os.WriteFile(filepath.Join(f.brain, "memory.db"), big, 0o644)
	if _, err := p.Take(t.Context(), snapshot.Input{Want: f.hash()}); !errors.Is(err, cipher.ErrTooLarge) {
		t.Fatalf("v1 over its cap: %v", err)
	}
	p.V1MaxSize = 8 << 20
	res, err := p.Take(t.Context(), snapshot.Input{Want: f.hash()})
	if err != nil {
		t.Fatal(err)
	}
	reader := f.pipeline("alpha.eth")
	reader.V1MaxSize = 2 << 20
	if _, err := reader.Restore(t.Context(), res.BlobID, filepath.Join(t.TempDir(), "small")); !errors.Is(err, cipher.ErrTooLarge) {
		t.Fatalf("restore under a smaller cap: %v", err)
	}
	reader.V1MaxSize = 8 << 20
	target := filepath.Join(t.TempDir(), "ok")
	if _, err := reader.Restore(t.Context(), res.BlobID, target); err != nil {
		t.Fatalf("restore under the writing cap: %v", err)
	}
	same(t, f.brain, target)
}

// TestOverTheBlobLimit: a snapshot over the store's limit fails before any
// upload, with both sizes exact (they used to round to the same "1.0 GiB").
func TestOverTheBlobLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := f.pipeline("alpha.eth")
	p.MaxBlobSize = 100_000
	_, err := p.Take(t.Context(), snapshot.Input{Want: f.hash()})
	if !errors.Is(err, snapshot.ErrTooLarge) || !strings.Contains(err.Error(), "the limit is 100000 bytes") {
		t.Fatalf("Take = %v", err)
	}
	if n := f.srv.Stats().Requests; n != 0 {
		t.Errorf("%d requests reached Walrus", n)
	}
}

// TestHostileArchiveIsAVerificationFailure: an archive the extractor
// refuses (here: an entry with a backslash, which the hasher would refuse
// too) is ErrHostile, which the CLI maps to exit 3.
func TestHostileArchiveIsAVerificationFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: `skills\evil.md`, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("x"))
	tw.Close()
	p := filepath.Join(t.TempDir(), "blob")
	out, _ := os.Create(p)
	enc, err := cipher.Encrypt(out, f.key, "alpha.eth")
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(tb.Bytes())
	enc.Close()
	out.Close()
	parent := t.TempDir()
	_, err = f.pipeline("alpha.eth").RestoreFile(t.Context(), p, filepath.Join(parent, "b"), snapshot.RestoreOptions{})
	if !errors.Is(err, snapshot.ErrHostile) {
		t.Fatalf("RestoreFile = %v, want ErrHostile", err)
	}
	if l := listing(t, parent); l != ". "+mustMode(t, parent)+"\n" {
		t.Errorf("left behind:\n%s", l)
	}
}

func mustMode(t *testing.T, p string) string {
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().String()
}
