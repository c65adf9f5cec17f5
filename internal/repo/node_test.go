package repo

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/localwalrus"
)

// richBrain has nested and empty directories, unicode names, modes, a
// file of many chunks, a lock and receipts.
func richBrain(t testing.TB) string {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"system.md":            "You are a test agent.\n",
		"skills/reentrancy.md": "---\nname: reentrancy\n---\nLook for re-entrant calls.\n",
		"skills/a/b/c/deep.md": "deep",
		"patterns/":            "",
		"empty/nested/":        "",
		"ünïcødé/日本語.md":       "こんにちは",
		"emoji/🦀.md":           "crab",
		"\uE000/x":             "private use (sorts after non-BMP in UTF-16)",
		"𝔘/y":                  "non-BMP",
		".dotfile":             "dot",
		"zero":                 "",
		"bundle.lock.json":     "{\n  \"bundleHash\": \"0x00\",\n  \"version\": 3\n}",
		"receipts.ndjson":      "{\"callId\":\"2\"}\n{\"callId\":\"1\"}",
	})
	for i := range 40 {
		writeFiles(t, dir, map[string]string{fmt.Sprintf("patterns/p%02d.md", i): fmt.Sprintf("pattern %d\n%s", i, randomBytes(uint64(i), 3000+i*50))})
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.db"), randomBytes(7, 5<<20+777), 0o600); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"bin/tool": "#!/bin/sh\n", "shared/": "", "tmp/x": "sticky"})
	// Second names of files: the walk meets skills/alias.md before
	// system.md, emoji/again.md before patterns/p00.md.
	for _, l := range [][2]string{{"system.md", "skills/alias.md"}, {"patterns/p00.md", "emoji/again.md"}} {
		if err := os.Link(filepath.Join(dir, l[0]), filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	for p, m := range map[string]os.FileMode{"skills/reentrancy.md": 0o444, "system.md": 0o640, "patterns": 0o700, "empty/nested": 0o555, "zero": 0o600,
		"bin/tool": 0o755 | os.ModeSetuid | os.ModeSetgid, "shared": 0o775 | os.ModeSetgid, "tmp": 0o777 | os.ModeSticky} {
		if err := os.Chmod(filepath.Join(dir, p), m); err != nil {
			t.Fatal(err)
		}
	}
	// Symlinks (revision 3): kept as links, targets verbatim, never
	// followed.
	for i, l := range [][2]string{{"../system.md", "skills/link.md"}, {"/etc", "etc"}, {"\xff../..", "patterns/odd"}} {
		p := filepath.Join(dir, l[1])
		if err := os.Symlink(l[0], p); err != nil {
			t.Fatal(err)
		}
		ts := unix.NsecToTimespec(1_650_000_000_123_456_789 + int64(i)*1e9)
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// withoutLinks removes richBrain's second names of files: a file with
// two names is read by every snapshot (resolveLinks), which the tests of
// what a snapshot reuses do not want.
func withoutLinks(t testing.TB, dir string) string {
	for _, p := range []string{"skills/alias.md", "emoji/again.md"} {
		if err := os.Remove(filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// editBrain changes a few things: one page of memory.db, a new file, a
// removed file, the lock.
func editBrain(t testing.TB, dir string) {
	f, err := os.OpenFile(filepath.Join(dir, "memory.db"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xab}, 4096), 3<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	writeFiles(t, dir, map[string]string{"skills/new.md": "new skill", "bundle.lock.json": "{\n  \"version\": 4\n}"})
	if err := os.Remove(filepath.Join(dir, "patterns/p07.md")); err != nil {
		t.Fatal(err)
	}
}

func nodeBin(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the independent reader needs Node.js (make deps installs it with the Seal SDK; Debian: apt-get install nodejs): %v", err)
	}
	return node
}

// localWalrus is a store over a local Walrus server on 127.0.0.1, closed
// with the test.
func localWalrus(t *testing.T) *walrusStore {
	t.Helper()
	srv, err := localwalrus.New(localwalrus.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &walrusStore{url: ts.URL, client: ts.Client()}
}

// v3reader is the independent reader, tools/v3reader/restore.mjs, written
// from docs/format-v3.md alone.
const v3reader = "../../tools/v3reader/restore.mjs"

// runReader restores the head pack head from the aggregator url into out
// with the independent reader, given the master key (or, with agentKey,
// the agent key alone) in a key file, and returns the JSON line it prints.
func runReader(t *testing.T, node, url, head string, key [32]byte, agentKey bool, out string) string {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(base64.RawURLEncoding.EncodeToString(key[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFlag := "--key-file"
	if agentKey {
		keyFlag = "--agent-key-file"
	}
	cmd := exec.Command(node, v3reader, "--aggregator", url, "--blob", head, "--identity", testIdentity, keyFlag, keyFile, "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n%s", v3reader, err, stderr.String())
	}
	return stdout.String()
}

// TestNodeReader runs the whole path over HTTP: packs stored on the local
// Walrus server, then restored with closed range reads by the Go reader
// and by the independent reader (with the master key, and with the agent
// key alone, as a transferred agent's new owner has it), compared byte
// for byte and mode for mode with the brain.
func TestNodeReader(t *testing.T) {
	node := nodeBin(t)
	ws := localWalrus(t)

	brain := richBrain(t)
	f := newFx(t, MinPackSize) // 2 MiB packs: several of them
	f.b.Sink = ws
	first := f.snap(brain, nil)
	editBrain(t, brain)
	second := f.snap(brain, nil)
	if len(first.Commit.Packs) < 2 || len(second.Commit.Packs) < 3 {
		t.Fatalf("want several packs, got %d then %d", len(first.Commit.Packs), len(second.Commit.Packs))
	}

	r, err := Open(context.Background(), ws, f.keys, f.head, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "go")
	if _, err := r.Restore(context.Background(), dir, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	mustEqualTree(t, brain, dir)

	out := filepath.Join(t.TempDir(), "node")
	stdout := runReader(t, node, ws.url, f.head, testMaster, false, out)
	mustEqualTreeNode(t, brain, out)
	var got struct {
		BundleHash string   `json:"bundleHash"`
		Files      int64    `json:"files"`
		Links      int      `json:"links"`
		Symlinks   int      `json:"symlinks"`
		Stripped   []string `json:"stripped"`
		Narrowed   []string `json:"narrowed"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("node output %q: %v", stdout, err)
	}
	links := 2
	if !fsys.Inodes {
		links = 0 // the portable walker cannot tell a file's names: two files
	}
	if got.BundleHash != second.Commit.BundleHash.String() || got.Files != second.Commit.Files || got.Links != links ||
		fmt.Sprint(got.Stripped) != "[bin/tool]" || got.Symlinks != 3 || fmt.Sprint(got.Narrowed) != "[tmp]" {
		t.Errorf("node says %+v, commit says %s and %d files", got, second.Commit.BundleHash, second.Commit.Files)
	}
	// The brain directory's own mode and time (hermesd's Restore leaves
	// them to its caller; the reader applies the commit's).
	bi, _ := os.Stat(brain)
	if oi, err := os.Stat(out); err != nil || oi.Mode() != bi.Mode() || oi.ModTime().Sub(bi.ModTime()).Abs() > 10*time.Microsecond {
		t.Errorf("restored root %v %v, brain %v %v (%v)", oi.Mode(), oi.ModTime(), bi.Mode(), bi.ModTime(), err)
	}

	// The agent key alone (a transferred agent) opens it too.
	out2 := filepath.Join(t.TempDir(), "node2")
	runReader(t, node, ws.url, f.head, DeriveAgentKey(testMaster, testIdentity).Bytes(), true, out2)
	mustEqualTreeNode(t, brain, out2)
}

// walrusStore speaks the Walrus HTTP API: PUT /v1/blobs (then a read-back
// check) and GET /v1/blobs/{id} with a closed Range. It is the shape of
// the sink and range reader the daemon's Walrus client provides.
type walrusStore struct {
	url    string
	client *http.Client
}

func (s *walrusStore) StorePack(ctx context.Context, p *Pack) (Stored, error) {
	f, err := p.Open()
	if err != nil {
		return Stored{}, err
	}
	defer f.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.url+"/v1/blobs?epochs=5", f)
	if err != nil {
		return Stored{}, err
	}
	req.ContentLength = p.Size
	resp, err := s.client.Do(req)
	if err != nil {
		return Stored{}, err
	}
	defer resp.Body.Close()
	var out struct {
		NewlyCreated *struct {
			BlobObject struct {
				BlobID  string `json:"blobId"`
				Storage struct {
					EndEpoch uint64 `json:"endEpoch"`
				} `json:"storage"`
			} `json:"blobObject"`
		} `json:"newlyCreated"`
		AlreadyCertified *struct {
			BlobID   string `json:"blobId"`
			EndEpoch uint64 `json:"endEpoch"`
		} `json:"alreadyCertified"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return Stored{}, fmt.Errorf("PUT: %s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return Stored{}, err
	}
	var st Stored
	switch {
	case out.NewlyCreated != nil:
		st = Stored{BlobID: out.NewlyCreated.BlobObject.BlobID, EndEpoch: out.NewlyCreated.BlobObject.Storage.EndEpoch}
	case out.AlreadyCertified != nil:
		st = Stored{BlobID: out.AlreadyCertified.BlobID, EndEpoch: out.AlreadyCertified.EndEpoch}
	default:
		return Stored{}, fmt.Errorf("PUT: unexpected answer")
	}
	// Read back and compare, as the daemon does before referencing a blob.
	var back bytes.Buffer
	if _, err := s.ReadRange(ctx, st.BlobID, 0, p.Size, &back); err != nil {
		return Stored{}, fmt.Errorf("read back: %w", err)
	}
	rc, err := p.Open()
	if err != nil {
		return Stored{}, err
	}
	defer rc.Close()
	want, err := io.ReadAll(rc)
	if err != nil {
		return Stored{}, err
	}
	if !bytes.Equal(back.Bytes(), want) {
		return Stored{}, fmt.Errorf("read back: the blob differs from the pack")
	}
	return st, nil
}

var contentRange = regexp.MustCompile(`^bytes (\d+)-(\d+)/(\d+)$`)

func (s *walrusStore) ReadRange(ctx context.Context, blobID string, off, n int64, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/blobs/"+blobID, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent {
		return 0, fmt.Errorf("GET %s: %s", blobID, resp.Status)
	}
	m := contentRange.FindStringSubmatch(resp.Header.Get("Content-Range"))
	if m == nil || m[1] != strconv.FormatInt(off, 10) || m[2] != strconv.FormatInt(off+n-1, 10) {
		return 0, fmt.Errorf("GET %s: Content-Range %q", blobID, resp.Header.Get("Content-Range"))
	}
	total, _ := strconv.ParseInt(m[3], 10, 64)
	got, err := io.Copy(w, io.LimitReader(resp.Body, n))
	if err == nil && got != n {
		err = io.ErrUnexpectedEOF
	}
	return total, err
}
