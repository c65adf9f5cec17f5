package tarball_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/tarball"
)

// policyNames are file paths that the hasher, the tar writer and the
// extractor must all accept or all refuse, because they share one name
// policy (fsys.CheckName). Before, a backslash passed the extractor and the
// writer, the brain was committed, and the hasher then refused it forever.
var policyNames = []struct {
	path  string
	valid bool
}{
	{"system.md", true},
	{".hidden", true},
	{"skills/reentrancy.md", true},
	{"ünïcödé/日本語.md", true},
	{"a b/c:d", true},
	{strings.Repeat("n", fsys.MaxNameLen), true},
	{maxPath, true},

	{`a\b`, false},
	{`dir\x/file`, false},
	{"bad\xff.md", false},
	{"dir\xfe/file", false},
	{strings.Repeat("n", fsys.MaxNameLen+1), false}, // no Linux file system stores it
	{"d/" + strings.Repeat("n", fsys.MaxNameLen+1), false},
	{maxPath + "/x", false}, // openat(2) cannot take it in one piece
}

// maxPath is fsys.MaxPathLen bytes long.
var maxPath = strings.TrimSuffix(strings.Repeat(strings.Repeat("p", fsys.MaxNameLen)+"/", 16), "/")

func TestOneNamePolicy(t *testing.T) {
	if len(maxPath) != fsys.MaxPathLen {
		t.Fatalf("maxPath is %d bytes", len(maxPath))
	}
	for _, tt := range policyNames {
		t.Run(strings.ToValidUTF8(tt.path[:min(len(tt.path), 40)], "?"), func(t *testing.T) {
			if err := fsys.CheckName(tt.path); (err == nil) != tt.valid {
				t.Fatalf("CheckName = %v, want valid=%v", err, tt.valid)
			}

			// The extractor, fed the name in an archive.
			data := tarOf(t, tt.path, "contents")
			dst := t.TempDir() + "/x"
			_, err := tarball.Extract(t.Context(), bytes.NewReader(data), dst, tarball.ExtractOptions{})
			checkVerdict(t, "Extract", err, tt.valid)
			if tt.valid {
				// What the extractor restored hashes.
				if res, err := hash.Dir(t.Context(), dst, hash.Options{}); err != nil || res.Count != 1 {
					t.Errorf("hash.Dir of the restored tree = %d files, %v", res.Count, err)
				}
			}

			// The hasher and the writer, on a tree holding the name.
			src := t.TempDir()
			if err := create(src, tt.path); err != nil {
				if tt.valid {
					t.Fatal(err)
				}
				t.Logf("cannot be created on disk: only the extractor is checked")
				return
			}
			_, err = hash.Dir(t.Context(), src, hash.Options{})
			checkVerdict(t, "hash.Dir", err, tt.valid)
			_, err = tarball.Write(t.Context(), io.Discard, src, tarball.WriteOptions{})
			checkVerdict(t, "Write", err, tt.valid)
		})
	}
}

func checkVerdict(t *testing.T, who string, err error, valid bool) {
	t.Helper()
	switch {
	case valid && err != nil:
		t.Errorf("%s: %v, want success", who, err)
	case !valid && !errors.Is(err, hash.ErrName):
		t.Errorf("%s: %v, want an ErrName error", who, err)
	case !valid && !errors.Is(err, tarball.ErrName):
		t.Errorf("%s: %v does not match tarball.ErrName", who, err)
	}
}

// create makes the file rel below root, one component at a time through
// os.Root, so that paths longer than PATH_MAX can be built.
func create(root, rel string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	dir := path.Dir(rel)
	if dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return r.WriteFile(rel, []byte("contents"), 0o644)
}

// tarOf returns an archive with one file, its parent directories implied.
func tarOf(t *testing.T, name, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatGNU}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(tw, body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestExtractUnsafeNames: names only an archive can carry.
func TestExtractUnsafeNames(t *testing.T) {
	for _, tt := range []struct {
		name string
		want error
	}{
		{"/etc/passwd", tarball.ErrUnsafePath},
		{"../x", tarball.ErrUnsafePath},
		{"a/../../x", tarball.ErrUnsafePath},
		{"a/..", tarball.ErrUnsafePath},
		{"", tarball.ErrName},
	} {
		data := tarOf(t, tt.name, "x")
		_, err := tarball.Extract(t.Context(), bytes.NewReader(data), t.TempDir()+"/x", tarball.ExtractOptions{})
		if !errors.Is(err, tt.want) {
			t.Errorf("Extract(%q) = %v, want %v", tt.name, err, tt.want)
		}
	}
}
