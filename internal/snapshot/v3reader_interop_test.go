package snapshot_test

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/walrus"
)

// The independent reader (tools/v3reader/restore.mjs) restores v3
// snapshots with node's built-in crypto and docs/format-v3.md alone. These
// tests run it against snapshots the daemon's pipeline wrote to a local
// Walrus server, and against the document's own test vector.

const readerScript = "../../tools/v3reader/restore.mjs"

// readerSummary is the JSON line the reader prints on success.
type readerSummary struct {
	Head         string `json:"head"`
	Root         string `json:"root"`
	Parent       string `json:"parent"`
	ParentFormat string `json:"parentFormat"`
	BundleHash   string `json:"bundleHash"`
	Files        int    `json:"files"`
	Bytes        int64  `json:"bytes"`
	Lock         bool   `json:"lock"`
	Receipts     bool   `json:"receipts"`
	Packs        int    `json:"packs"`
	Symlinks     int    `json:"symlinks"`
}

// readerRun is one run of the reader: its exit code, stdout and stderr.
type readerRun struct {
	code           int
	stdout, stderr string
}

// runReader runs the node reader; a missing node fails the test (CI
// installs node for the ENS artifacts; the reader is no optional extra).
func runReader(t *testing.T, args ...string) readerRun {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the independent v3 reader needs node: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{readerScript}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return readerRun{code: ee.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	case err != nil:
		t.Fatalf("run the reader: %v", err)
	}
	return readerRun{stdout: stdout.String(), stderr: stderr.String()}
}

// restoreWithReader runs the reader and decodes its summary.
func restoreWithReader(t *testing.T, args ...string) readerSummary {
	t.Helper()
	r := runReader(t, args...)
	if r.code != 0 {
		t.Fatalf("reader exited %d: %s", r.code, r.stderr)
	}
	var s readerSummary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("reader summary %q: %v", r.stdout, err)
	}
	return s
}

// interopAgent is one agent's v3 pipeline on a local Walrus server with
// packs cut at the smallest cap, so a few MiB need several packs.
type interopAgent struct {
	srv      *localwalrus.Server
	walrus   string // the server's data directory
	p        *snapshot.Pipeline
	brain    string
	keyFile  string
	identity string
}

func newInteropAgent(t *testing.T) *interopAgent {
	t.Helper()
	const maxBlob = repo.MinPackSize
	a := &interopAgent{walrus: t.TempDir(), identity: "reader.hermes.eth"}
	var err error
	a.srv, err = localwalrus.New(localwalrus.Config{Dir: a.walrus, EpochDuration: time.Hour, MaxBodySize: maxBlob})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.srv.Close() })
	c, err := walrus.New(walrus.Config{Publishers: []string{a.srv.URL()}, Aggregators: []string{a.srv.URL()}, MaxBlobSize: maxBlob})
	if err != nil {
		t.Fatal(err)
	}
	// A fixed key makes chunk boundaries, hence pack layouts, the same
	// on every run (nonces differ; lengths do not).
	seed := sha256.Sum256([]byte("hermesd v3reader interop"))
	key, err := cipher.ParseKey(base64.RawURLEncoding.EncodeToString(seed[:]))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	a.brain = filepath.Join(root, "brain")
	a.keyFile = filepath.Join(root, "master.key")
	if err := cipher.WriteKeyFile(a.keyFile, key); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{a.brain, filepath.Join(root, "spool"), filepath.Join(root, "state")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rl, err := receipts.OpenLog(filepath.Join(root, "receipts.log"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	signer, _ := crypto.GenerateKey()
	token := uint64(11)
	a.p = &snapshot.Pipeline{
		AgentID: "reader", TokenID: &token, Identity: a.identity,
		BrainDir: a.brain, SpoolDir: filepath.Join(root, "spool"), CacheDir: filepath.Join(root, "state"),
		Key: key, Format: snapshot.FormatV3, MaxBlobSize: maxBlob,
		Store: compose.Store(c), Epochs: 5, EpochDuration: time.Hour,
		Repack:   snapshot.RepackPolicy{Margin: 1, MaxPacks: 64, MinLive: 0.2},
		Receipts: rl, Signer: signer,
	}
	return a
}

func (a *interopAgent) write(t *testing.T, rel string, content []byte, mode fs.FileMode) {
	t.Helper()
	p := filepath.Join(a.brain, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, content, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func (a *interopAgent) take(t *testing.T) snapshot.Result {
	t.Helper()
	hr, err := hash.Dir(t.Context(), a.brain, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.p.Take(t.Context(), snapshot.Input{Want: hr.Digest, Known: hash.Files(hr.Files)})
	if err != nil {
		t.Fatalf("take: %v", err)
	}
	return r
}

// blobFile is where the local Walrus server keeps a blob's bytes.
func (a *interopAgent) blobFile(t *testing.T, blobID string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(blobID)
	if err != nil {
		t.Fatalf("blob id %s: %v", blobID, err)
	}
	return filepath.Join(a.walrus, "blobs", hex.EncodeToString(raw)+".blob")
}

func (a *interopAgent) readerArgs(blob, out string) []string {
	return []string{"--aggregator", a.srv.URL(), "--blob", blob, "--identity", a.identity, "--key-file", a.keyFile, "--out", out}
}

// entriesOf maps every entry below dir to its mode and, for files, size and
// SHA-256, for symlinks their target; skip names top-level entries to
// leave out.
func entriesOf(t *testing.T, dir string, skip ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		for _, s := range skip {
			if rel == s {
				return nil
			}
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			out[rel+"/"] = fmt.Sprintf("%04o", info.Mode().Perm())
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("%04o %d %x", info.Mode().Perm(), len(b), sha256.Sum256(b))
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("-> %q", target)
		default:
			out[rel] = "unexpected " + info.Mode().Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameListing(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s: want %q, got %q", what, k, v, got[k])
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %s: %q is extra", what, k, v)
		}
	}
}

// TestV3IndependentReader: snapshots the daemon's pipeline writes (two, the
// second after an edit, so the head has a parent and reuses the first
// snapshot's packs) restore byte for byte and mode for mode with the node
// reader, which agrees on the bundle hash; tampered packs make it fail.
func TestV3IndependentReader(t *testing.T) {
	t.Parallel()
	a := newInteropAgent(t)
	rng := rand.New(rand.NewPCG(14, 7))
	big := make([]byte, 5<<20+12345) // several chunks, several 2 MiB packs
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	a.write(t, "memory.db", big, 0o600)
	a.write(t, "system.md", []byte("You are a test agent.\n"), 0o644)
	a.write(t, ".empty", nil, 0o644)
	a.write(t, "tools/run.sh", []byte("#!/bin/sh\necho hi\n"), 0o755)
	a.write(t, "deep/a/b/c/d/notes.md", []byte("deep\n"), 0o640)
	a.write(t, "ünïcødé/日本語.md", []byte("こんにちは"), 0o644)
	// U+1F600 sorts before U+FF01 in UTF-16 but after it in UTF-8 (§8).
	a.write(t, "sort/\U0001F600.md", []byte("smile"), 0o644)
	a.write(t, "sort/\uFF01.md", []byte("bang"), 0o644)
	a.write(t, "sub/bundle.lock.json", []byte("an ordinary file deeper down"), 0o644)
	a.write(t, "ro/frozen.md", []byte("read only"), 0o444)
	if err := os.Chmod(filepath.Join(a.brain, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(a.brain, "ro"), 0o755) })
	for _, d := range []string{"inbox", "patterns/empty"} {
		if err := os.MkdirAll(filepath.Join(a.brain, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Symlinks (revision 3): targets verbatim, never followed.
	for _, l := range [][2]string{{"../system.md", "inbox/rel"}, {"/etc/hostname", "abs"}, {"\xff../..", "inbox/bytes"}} {
		if err := os.Symlink(l[0], filepath.Join(a.brain, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	first := a.take(t)

	a.write(t, "system.md", []byte("You are a test agent, edited.\n"), 0o600)
	a.write(t, "skills/new.md", []byte("a new skill\n"), 0o644)
	if err := os.Remove(filepath.Join(a.brain, "deep/a/b/c/d/notes.md")); err != nil {
		t.Fatal(err)
	}
	second := a.take(t)
	if second.Format != snapshot.FormatV3 || second.LivePacks < 3 || second.Packs >= second.LivePacks {
		t.Fatalf("second snapshot %+v: want a v3 head reusing the first snapshot's packs", second)
	}

	out := filepath.Join(t.TempDir(), "restored")
	s := restoreWithReader(t, a.readerArgs(second.BlobID, out)...)
	if s.BundleHash != second.BundleHash.String() {
		t.Errorf("reader bundle hash %s, daemon's %s", s.BundleHash, second.BundleHash)
	}
	if s.Head != second.BlobID || s.Parent != first.BlobID || s.ParentFormat != "v3" {
		t.Errorf("reader read head %s with parent %s (%s), want %s with parent %s (v3)", s.Head, s.Parent, s.ParentFormat, second.BlobID, first.BlobID)
	}
	if s.Files != second.Files || s.Bytes != second.Bytes || s.Packs != second.LivePacks || !s.Lock || !s.Receipts || s.Symlinks != 3 {
		t.Errorf("reader summary %+v, snapshot %d files, %d bytes, %d live packs, with lock and receipts", s, second.Files, second.Bytes, second.LivePacks)
	}
	// The brain's own lock and receipts are not the snapshot's (the
	// commit holds its parent's lock); the root's mode is not stored.
	top := []string{".", "bundle.lock.json", "receipts.ndjson"}
	sameListing(t, "reader vs brain", entriesOf(t, a.brain, top...), entriesOf(t, out, top...))
	// The daemon's own restore of the same head, lock and receipts and
	// root mode included.
	goOut := filepath.Join(t.TempDir(), "restored")
	if _, err := a.p.Restore(t.Context(), second.BlobID, goOut); err != nil {
		t.Fatalf("daemon restore: %v", err)
	}
	sameListing(t, "reader vs daemon restore", entriesOf(t, goOut), entriesOf(t, out))

	// The parent restores too: an older head is an independent snapshot.
	outFirst := filepath.Join(t.TempDir(), "first")
	if s := restoreWithReader(t, a.readerArgs(first.BlobID, outFirst)...); s.BundleHash != first.BundleHash.String() || s.Parent != "" {
		t.Errorf("first snapshot: reader summary %+v, want bundle hash %s and no parent", s, first.BundleHash)
	}

	// The agent key alone (§2; derived here from the document, not by
	// hermesd) restores as well.
	master, err := cipher.ReadKeyFile(a.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ak, err := hkdf.Key(sha256.New, master[:], []byte("hermesd/v3"), a.identity, 32)
	if err != nil {
		t.Fatal(err)
	}
	akFile := filepath.Join(t.TempDir(), "agent.key")
	if err := os.WriteFile(akFile, []byte(hex.EncodeToString(ak)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outAK := filepath.Join(t.TempDir(), "by-agent-key")
	restoreWithReader(t, "--aggregator", a.srv.URL(), "--blob", second.BlobID, "--identity", a.identity, "--agent-key-file", akFile, "--out", outAK)
	sameListing(t, "agent key vs master key", entriesOf(t, out), entriesOf(t, outAK))

	// Failures: one line on stderr, hermesd's exit code, nothing restored.
	r, err := a.p.OpenV3(t.Context(), second.BlobID)
	if err != nil {
		t.Fatal(err)
	}
	// The first snapshot's head holds objects the second still needs, so
	// the reader meets a listed pack that is itself a head (flag set,
	// commit embedded; §9 step 4).
	if !slices.ContainsFunc(r.Commit().Packs, func(pk repo.PackRef) bool { return pk.BlobID == first.BlobID }) {
		t.Fatalf("the second commit does not list the first head %s; the test no longer covers listed heads", first.BlobID)
	}
	var listed string // the largest pack of the first snapshot the head still needs
	var size int64
	for _, pk := range r.Commit().Packs {
		if pk.Size > size {
			listed, size = pk.BlobID, pk.Size
		}
	}
	if size < 1<<20 {
		t.Fatalf("largest listed pack is %d bytes; want a full one", size)
	}
	withKey := func(identity string) []string {
		return []string{"--identity", identity, "--key-file", a.keyFile}
	}
	withAgentKey := func(identity string) []string {
		return []string{"--identity", identity, "--agent-key-file", akFile}
	}
	tests := []struct {
		name   string
		blob   string // whose byte at offset is flipped, if any
		offset int64
		key    []string
		code   int
		msg    string
	}{
		// The middle of a full pack of the unchanged memory.db's chunks.
		{"chunk in a listed pack", listed, size / 2, withKey(a.identity), 6, "authentication failed"},
		{"head index", second.BlobID, 40, withKey(a.identity), 6, "index of pack"},
		{"head key id", second.BlobID, 9, withKey(a.identity), 6, "not this agent's snapshot"},
		{"head length", second.BlobID, 27, withKey(a.identity), 3, "the blob has"},
		{"head version", second.BlobID, 4, withKey(a.identity), 3, "not a v3 pack"},
		// Another identity derives another agent key from the master key.
		{"master key, another identity", "", 0, withKey("other.hermes.eth"), 6, "not this agent's snapshot"},
		// The right agent key with another identity fails the AAD.
		{"agent key, another identity", "", 0, withAgentKey("other.hermes.eth"), 6, "authentication failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.blob != "" {
				flipByte(t, a.blobFile(t, tt.blob), tt.offset)
				t.Cleanup(func() { flipByte(t, a.blobFile(t, tt.blob), tt.offset) })
			}
			out := filepath.Join(t.TempDir(), "restored")
			args := append([]string{"--aggregator", a.srv.URL(), "--blob", second.BlobID, "--out", out}, tt.key...)
			got := runReader(t, args...)
			if got.code != tt.code || !strings.Contains(got.stderr, tt.msg) {
				t.Errorf("reader exited %d with %q, want %d and %q", got.code, got.stderr, tt.code, tt.msg)
			}
			if lines := strings.Split(strings.TrimSuffix(got.stderr, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "v3reader: ") {
				t.Errorf("stderr %q: want one v3reader line", got.stderr)
			}
			if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("failed restore left %s: %v", out, err)
			}
		})
	}
}

// flipByte inverts one byte of a stored blob in place.
func flipByte(t *testing.T, file string, off int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestV3IndependentReaderDocVector: the head packs printed in
// docs/format-v3.md §12 — revision 2, and the revision 1 fixture of §12.2 —
// stored on a local Walrus server, restore with the reader to the
// document's tiny brain: revision 2 with its recorded times and root mode,
// revision 1 with the restore's times and root mode 0755.
func TestV3IndependentReaderDocVector(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/format-v3.md")
	if err != nil {
		t.Fatal(err)
	}
	rest := string(doc)
	for _, rev := range []struct {
		name  string
		size  int
		times map[string]int64 // recorded mtimes (ns); nil: none
	}{
		{"revision 2", 1242, map[string]int64{".": 1700000004_250000000, "notes": 1700000003_000000000, "skills": 1700000002_000000000,
			"skills/reentrancy.md": 1700000001_500000000, "system.md": 1700000000_000000000}},
		{"revision 1", 1161, nil},
	} {
		var ok bool
		_, rest, ok = strings.Cut(rest, "The whole head pack")
		if !ok {
			t.Fatalf("format-v3.md has no %s head pack vector", rev.name)
		}
		var hexPack strings.Builder
		for _, line := range strings.Split(rest, "\n")[3:] {
			if !strings.HasPrefix(line, "    ") {
				break
			}
			hexPack.WriteString(strings.TrimSpace(line))
		}
		pack, err := hex.DecodeString(hexPack.String())
		if err != nil || len(pack) != rev.size {
			t.Fatalf("%s: vector pack of %d bytes: %v", rev.name, len(pack), err)
		}
		docVector(t, rev.name, pack, rev.times)
	}
}

func docVector(t *testing.T, name string, pack []byte, times map[string]int64) {
	srv, err := localwalrus.New(localwalrus.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL()+"/v1/blobs", bytes.NewReader(pack))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("store the vector pack: %s", resp.Status)
	}
	keyFile := filepath.Join(t.TempDir(), "master.key")
	master := make([]byte, 32)
	for i := range master {
		master[i] = byte(i)
	}
	if err := os.WriteFile(keyFile, []byte(base64.RawURLEncoding.EncodeToString(master)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "restored")
	start := time.Now().Add(-time.Second)
	s := restoreWithReader(t, "--aggregator", srv.URL(), "--blob", localwalrus.BlobID(pack),
		"--identity", "auditor.hermes.eth", "--key-file", keyFile, "--out", out)
	if s.BundleHash != "0x686d75608202ced471e2bafb0c9a0212e40808a8c359e375c62f1f4129893276" || s.Files != 2 || s.Bytes != 74 {
		t.Errorf("%s: reader summary %+v", name, s)
	}
	sum := func(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }
	want := map[string]string{
		".":                    "0755",
		"notes/":               "0700",
		"skills/":              "0755",
		"skills/reentrancy.md": "0600 52 " + sum("---\nname: reentrancy\n---\nLook for re-entrant calls.\n"),
		"system.md":            "0644 22 " + sum("You are a test agent.\n"),
	}
	got := entriesOf(t, out)
	got["."] = strings.TrimSuffix(got["./"], "/")
	delete(got, "./")
	sameListing(t, name, want, got)
	for _, p := range []string{".", "notes", "skills", "skills/reentrancy.md", "system.md"} {
		fi, err := os.Stat(filepath.Join(out, p))
		if err != nil {
			t.Fatal(err)
		}
		switch want, ok := times[p]; {
		case !ok && fi.ModTime().Before(start):
			t.Errorf("%s: %s dated %v: no time is recorded, so the restore's stays", name, p, fi.ModTime())
		case ok && fi.ModTime().Sub(time.Unix(0, want)).Abs() > 5*time.Microsecond:
			t.Errorf("%s: %s dated %v, recorded %v", name, p, fi.ModTime(), time.Unix(0, want))
		}
	}
}
