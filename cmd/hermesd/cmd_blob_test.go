package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/walrus"
)

func startBlobServer(t *testing.T, cfg localwalrus.Config) *localwalrus.Server {
	t.Helper()
	cfg.Dir = t.TempDir()
	s, err := localwalrus.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func runBlobCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(t.Context(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestBlobPutGet(t *testing.T) {
	s := startBlobServer(t, localwalrus.Config{})
	dir := t.TempDir()
	content := bytes.Repeat([]byte("brain snapshot "), 5000)
	in := filepath.Join(dir, "in.bin")
	os.WriteFile(in, content, 0o600)
	sum := sha256.Sum256(content)
	pub, agg := "--publisher="+s.URL(), "--aggregator="+s.URL()

	stdout, _, err := runBlobCmd(t, "blob", "put", in, pub, agg, "--epochs", "4", "--permanent", "--verify", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var put struct {
		BlobID           string `json:"blobId"`
		Size             int64  `json:"size"`
		EndEpoch         uint32 `json:"endEpoch"`
		AlreadyCertified bool   `json:"alreadyCertified"`
		SHA256           string `json:"sha256"`
		DurationMs       *int64 `json:"durationMs"`
		Verified         bool   `json:"verified"`
	}
	if err := json.Unmarshal([]byte(stdout), &put); err != nil || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("put --json printed %q: %v", stdout, err)
	}
	if put.BlobID != localwalrus.BlobID(content) || put.Size != int64(len(content)) || put.EndEpoch != s.Epoch()+4 ||
		put.AlreadyCertified || put.SHA256 != hex.EncodeToString(sum[:]) || put.DurationMs == nil || !put.Verified {
		t.Fatalf("put result %+v", put)
	}
	stdout, _, err = runBlobCmd(t, "blob", "put", pub, "--permanent", "--epochs=2", in)
	if err != nil || !strings.Contains(stdout, "already certified") || !strings.Contains(stdout, put.BlobID) {
		t.Fatalf("second put: %v\n%s", err, stdout)
	}

	out := filepath.Join(dir, "out.bin")
	stdout, _, err = runBlobCmd(t, "blob", "get", put.BlobID, "-o", out, agg, "--sha256", put.SHA256, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var get struct {
		BlobID string `json:"blobId"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
		Path   string `json:"path"`
	}
	if err := json.Unmarshal([]byte(stdout), &get); err != nil || get.BlobID != put.BlobID || get.Size != put.Size || get.SHA256 != put.SHA256 || get.Path != out {
		t.Fatalf("get --json printed %q (%v)", stdout, err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, content) {
		t.Fatal("downloaded content differs")
	}

	// An existing file is kept unless --force.
	os.WriteFile(out, []byte("precious"), 0o600)
	_, _, err = runBlobCmd(t, "blob", "get", put.BlobID, "-o", out, agg)
	if !errors.Is(err, fs.ErrExist) || exitCode(err) != exitFailure {
		t.Fatalf("overwrite without --force: exit %d, %v", exitCode(err), err)
	}
	if got, _ := os.ReadFile(out); string(got) != "precious" {
		t.Fatal("existing file was changed")
	}
	if _, _, err := runBlobCmd(t, "blob", "get", "-o", out, "--force", agg, put.BlobID); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, content) {
		t.Fatal("--force did not replace the file")
	}

	// A digest mismatch exits 3 and leaves no file behind.
	bad := filepath.Join(dir, "bad.bin")
	_, _, err = runBlobCmd(t, "blob", "get", put.BlobID, "-o", bad, agg, "--sha256", strings.Repeat("00", 32))
	if exitCode(err) != exitMismatch {
		t.Fatalf("mismatch: exit %d, %v", exitCode(err), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("directory holds %v", ents)
	}
}

// TestBlobGetPatch: blob get reads a quilt patch whole by its patch id.
func TestBlobGetPatch(t *testing.T) {
	s := startBlobServer(t, localwalrus.Config{})
	c, err := walrus.New(walrus.Config{Publishers: []string{s.URL()}, Aggregators: []string{s.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("a pack "), 300)
	q, err := c.StoreQuilt(t.Context(), []walrus.QuiltPart{{Identifier: "p000", Body: walrus.BytesBody([]byte("other"))},
		{Identifier: "p001", Body: walrus.BytesBody(content)}})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "patch")
	sum := sha256.Sum256(content)
	if _, _, err := runBlobCmd(t, "blob", "get", q.Patches[1].PatchID, "-o", out, "--aggregator="+s.URL(), "--sha256", hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, content) {
		t.Fatal("the patch read differs")
	}
}

func TestBlobErrors(t *testing.T) {
	s := startBlobServer(t, localwalrus.Config{MaxBodySize: 1024})
	dir := t.TempDir()
	big := filepath.Join(dir, "big.bin")
	os.WriteFile(big, make([]byte, 4096), 0o600)
	cfg := filepath.Join(dir, "hermesd.yml")
	os.WriteFile(cfg, []byte("state_dir: state\nwalrus:\n  publishers: [\""+s.URL()+"\"]\n  aggregators: [\""+s.URL()+"\"]\n  max_blob_size: 2KiB\nencryption:\n  format: v2\n"), 0o600)
	agg := "--aggregator=" + s.URL()

	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"client size check", []string{"blob", "put", "-config", cfg, big}, exitFailure, "over the publisher limit of 2.0 KiB"},
		{"publisher 413", []string{"blob", "put", "--publisher", s.URL(), big}, exitFailure, "413"},
		{"not found", []string{"blob", "get", localwalrus.BlobID([]byte("absent")), "-o", filepath.Join(dir, "x"), "-config", cfg}, exitNotFound, "BLOB_NOT_FOUND"},
		{"malformed id", []string{"blob", "get", "not-an-id", "-o", filepath.Join(dir, "x"), agg}, exitUsage, "invalid blob id"},
		{"no file", []string{"blob", "put", "--publisher", s.URL()}, exitUsage, "exactly one FILE"},
		{"missing file", []string{"blob", "put", "--publisher", s.URL(), filepath.Join(dir, "nope")}, exitFailure, "no such file"},
		{"no -o", []string{"blob", "get", localwalrus.BlobID(nil), agg}, exitUsage, "-o FILE"},
		{"bad sha256", []string{"blob", "get", localwalrus.BlobID(nil), "-o", "x", agg, "--sha256", "abc"}, exitUsage, "64 hex"},
		{"missing config", []string{"blob", "put", "-config", filepath.Join(dir, "none.yml"), big}, exitUsage, "does not exist"},
		{"bad epochs", []string{"blob", "put", "--publisher", s.URL(), "--epochs", "60", big}, exitUsage, "1..53"},
		{"unknown subcommand", []string{"blob", "list"}, exitUsage, "put or get"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runBlobCmd(t, tt.args...)
			if exitCode(err) != tt.code || !strings.Contains(errString(err), tt.want) {
				t.Fatalf("exit %d (want %d): %v", exitCode(err), tt.code, err)
			}
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("directory holds %v", ents)
	}
}

func TestProgressMeter(t *testing.T) {
	var out bytes.Buffer
	// Not a terminal: nothing is drawn.
	m := startProgressMeter(&out, "upload", 100)
	m.Write(make([]byte, 40))
	m.stop()
	if out.Len() != 0 {
		t.Fatalf("drew on a non-terminal: %q", out.String())
	}
	// The drawing itself, and a log line clearing it first.
	m = &progressMeter{out: &out, label: "upload", total: 10 << 20}
	m.n.Store(3 << 20)
	m.draw()
	if !strings.HasPrefix(out.String(), "\r\033[Kupload 3.0 MiB / 10.0 MiB  ") || !strings.HasSuffix(out.String(), "/s") {
		t.Fatalf("drew %q", out.String())
	}
	out.Reset()
	m.logWriter().Write([]byte("level=WARN msg=retrying\n"))
	if out.String() != "\r\033[Klevel=WARN msg=retrying\n" {
		t.Fatalf("log line %q", out.String())
	}
}

// hostileAggregator serves every blob as an answer that never ends (or
// ends only after limit bytes): with lie set, it first announces
// Content-Length lie. It counts what it managed to send.
func hostileAggregator(t *testing.T, lie string, limit int64) (url string, sent func() int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lie != "" {
			w.Header().Set("Content-Length", lie)
		}
		w.WriteHeader(http.StatusOK)
		buf := bytes.Repeat([]byte("hostile "), 8<<10)
		for n.Load() < limit {
			k, err := w.Write(buf)
			n.Add(int64(k))
			if err != nil {
				return
			}
		}
	}))
	// Close waits for the handler: sent() then counts everything.
	return srv.URL, func() int64 { srv.Close(); return n.Load() }
}

// TestBlobGetHostileAggregator: blob get honours walrus.max_download_size
// (a hostile aggregator writes gigabytes in seconds, so a built-in bound
// of 16 GiB is no bound). An endless body and a lying Content-Length are
// cut off at the configured bound, exit 3, and leave nothing behind.
func TestBlobGetHostileAggregator(t *testing.T) {
	const limit = 64 << 20 // the server gives up here (an unbounded client takes it all)
	id := localwalrus.BlobID([]byte("anything"))
	for _, tt := range []struct {
		name    string
		lie     string
		flags   bool // --aggregator and --max-size instead of -config
		code    int
		want    string
		maxSent int64
	}{
		{"endless body, config", "", false, exitMismatch, "past the read limit of 1.0 MiB", 24 << 20},
		{"endless body, flags", "", true, exitMismatch, "past the read limit of 1.0 MiB", 24 << 20},
		{"Content-Length of a TiB", "1099511627776", false, exitMismatch, "Content-Length says the blob is 1.0 TiB, over the read limit of 1.0 MiB", 24 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url, sent := hostileAggregator(t, tt.lie, limit)
			dir := t.TempDir()
			cfg := filepath.Join(dir, "hermesd.yml")
			os.WriteFile(cfg, []byte("state_dir: state\nwalrus:\n  aggregators: [\""+url+"\"]\n  max_download_size: 1MiB\n  retry_max: 2\n"), 0o600)
			out := filepath.Join(dir, "out.bin")
			args := []string{"blob", "get", id, "-o", out, "-config", cfg}
			if tt.flags {
				args = []string{"blob", "get", id, "-o", out, "--aggregator", url, "--max-size", "1MiB"}
			}
			_, _, err := runBlobCmd(t, args...)
			if exitCode(err) != tt.code || !strings.Contains(errString(err), tt.want) {
				t.Fatalf("exit %d (want %d): %v", exitCode(err), tt.code, err)
			}
			n := sent()
			if n > tt.maxSent {
				t.Errorf("the aggregator sent %d bytes before the client stopped (bound 1 MiB)", n)
			}
			t.Logf("the aggregator got %d bytes out before the client hung up", n)
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("left behind: %v", ents)
			}
		})
	}

	// Within the bound but beyond the disk: refused before the first byte.
	url, sent := hostileAggregator(t, strconv.FormatInt(1<<61, 10), limit)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.bin")
	_, _, err := runBlobCmd(t, "blob", "get", id, "-o", out, "--aggregator", url, "--max-size", "4194304TiB")
	if !errors.Is(err, walrus.ErrNoSpace) || !strings.Contains(errString(err), "2.000 EiB are needed") {
		t.Fatalf("a 2 EiB blob: exit %d: %v", exitCode(err), err)
	}
	if n := sent(); n > 24<<20 {
		t.Errorf("the aggregator sent %d bytes", n)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestBlobClientConfig: blob's client takes walrus.max_download_size from
// the configuration, and the configuration's default without one.
func TestBlobClientConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hermesd.yml")
	os.WriteFile(cfg, []byte("state_dir: state\nwalrus:\n  aggregators: [\"http://127.0.0.1:1\"]\n  max_download_size: 3MiB\n"), 0o600)
	for _, tt := range []struct {
		ep   endpointFlags
		want int64
	}{
		{endpointFlags{config: cfg}, 3 << 20},
		{endpointFlags{config: cfg, aggregators: urlListFlag{"http://127.0.0.1:2"}}, 3 << 20},
		{endpointFlags{aggregators: urlListFlag{"http://127.0.0.1:2"}}, int64(config.Default().Walrus.MaxDownloadSize)},
	} {
		wc, err := tt.ep.clientConfig(false)
		if err != nil || wc.MaxReadSize != tt.want {
			t.Errorf("%+v: max read size %d, want %d (%v)", tt.ep, wc.MaxReadSize, tt.want, err)
		}
	}
}
