package hash

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf16"
)

const (
	systemMD    = "You are a test agent.\n"
	reentrancy  = "---\nname: reentrancy\n---\nLook for re-entrant calls.\n"
	leafSystem  = "0x6993d3456a2281e3d738d2e1743b6733c098d93233e0184080741a3fee39436f"
	bundleOne   = "0x9263e6b872bab2a42f1f2c3ff56c4069a05bfe3fb3bfccf3b8cfed4e77d0b74d"
	bundleTwo   = "0x686d75608202ced471e2bafb0c9a0212e40808a8c359e375c62f1f4129893276"
	nullHex     = "0xf33398eff1c6f8626f071b041025f28ca7cb0b4152e43ba0b5d919a37b6a0c2c"
	deltaNullHx = "0xec175a1641aac3181af3ccff7b88a55f7305582f55bebb399f32f4ce6031e8cc"
)

func writeFile(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestVectors(t *testing.T) {
	ctx := t.Context()
	if got := Null.String(); got != nullHex {
		t.Errorf("Null = %s, want %s", got, nullHex)
	}
	if got := StateDelta(Null, Null).String(); got != deltaNullHx {
		t.Errorf("StateDelta(Null, Null) = %s, want %s", got, deltaNullHx)
	}
	if got := Leaf("system.md", sha256.Sum256([]byte(systemMD))).String(); got != leafSystem {
		t.Errorf("Leaf(system.md) = %s, want %s", got, leafSystem)
	}

	dir := t.TempDir()
	writeFile(t, dir, "system.md", systemMD)
	res, err := Dir(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Digest.String(); got != bundleOne {
		t.Errorf("bundle(system.md) = %s, want %s", got, bundleOne)
	}
	writeFile(t, dir, "skills/reentrancy.md", reentrancy)
	// Excluded names at the top level do not change the hash.
	writeFile(t, dir, "bundle.lock.json", `{"bundleHash":"0x00"}`)
	writeFile(t, dir, "receipts.ndjson", `{}`)
	res, err = Dir(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Digest.String(); got != bundleTwo {
		t.Errorf("bundle(two files) = %s, want %s", got, bundleTwo)
	}
	if res.Count != 2 || res.Bytes != int64(len(systemMD)+len(reentrancy)) {
		t.Errorf("count/bytes = %d/%d", res.Count, res.Bytes)
	}
	if want := []string{"skills/reentrancy.md", "system.md"}; !slices.Equal(paths(res.Files), want) {
		t.Errorf("files = %q, want %q", paths(res.Files), want)
	}

	// FromFiles, in any input order, with excluded names mixed in.
	files := []File{
		{Path: "system.md", SHA256: sha256.Sum256([]byte(systemMD))},
		{Path: "receipts.ndjson", SHA256: sha256.Sum256([]byte("x"))},
		{Path: "skills/reentrancy.md", SHA256: sha256.Sum256([]byte(reentrancy))},
	}
	if got := FromFiles(files).String(); got != bundleTwo {
		t.Errorf("FromFiles = %s, want %s", got, bundleTwo)
	}
	if files[0].Path != "system.md" {
		t.Error("FromFiles reordered its input")
	}
	if got := FromFiles(files[1:2]); got != Null {
		t.Errorf("FromFiles(excluded only) = %s, want Null", got)
	}
	if got := Bundle([]Digest{Leaf("system.md", sha256.Sum256([]byte(systemMD)))}).String(); got != bundleOne {
		t.Errorf("Bundle = %s, want %s", got, bundleOne)
	}

	// The Bundler, leaf by leaf, gives the same vectors.
	b := NewBundler()
	b.Add("skills/reentrancy.md", sha256.Sum256([]byte(reentrancy)))
	b.Add("system.md", sha256.Sum256([]byte(systemMD)))
	if got := b.Sum().String(); got != bundleTwo {
		t.Errorf("Bundler(two files) = %s, want %s", got, bundleTwo)
	}
	if got := NewBundler().Sum(); got != Null {
		t.Errorf("Bundler(nothing) = %s, want Null", got)
	}
}

func paths(files []File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}

func TestDigestText(t *testing.T) {
	d, err := ParseDigest(bundleTwo)
	if err != nil || d.String() != bundleTwo {
		t.Fatalf("ParseDigest round trip: %v %s", err, d)
	}
	upper, err := ParseDigest("0X686D75608202CED471E2BAFB0C9A0212E40808A8C359E375C62F1F4129893276")
	if err != nil || upper != d {
		t.Errorf("upper case: %v %s", err, upper)
	}
	for _, bad := range []string{"", "0x", "0xdeadbeef", bundleTwo[2:], bundleTwo + "0", "1x" + bundleTwo[2:], bundleTwo[:65] + "g"} {
		if _, err := ParseDigest(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseDigest(%q) = %v, want ErrSyntax", bad, err)
		}
	}
	b, err := json.Marshal(struct{ H Digest }{d})
	if err != nil || string(b) != `{"H":"`+bundleTwo+`"}` {
		t.Fatalf("json: %s %v", b, err)
	}
	var back struct{ H Digest }
	if err := json.Unmarshal(b, &back); err != nil || back.H != d {
		t.Errorf("json back: %v %s", err, back.H)
	}
	if err := json.Unmarshal([]byte(`{"H":"0xdeadbeef"}`), &back); !errors.Is(err, ErrSyntax) {
		t.Errorf("json junk: %v", err)
	}
}

func TestExcluded(t *testing.T) {
	for rel, want := range map[string]bool{
		"bundle.lock.json": true, "receipts.ndjson": true,
		"skills/bundle.lock.json": false, "a/receipts.ndjson": false,
		"bundle.lock.json.bak": false, "./bundle.lock.json": false, "": false,
	} {
		if got := Excluded(rel); got != want {
			t.Errorf("Excluded(%q) = %v", rel, got)
		}
	}
}

// utf16Compare is the straightforward definition Compare must match.
func utf16Compare(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func TestCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"a", "b", -1},
		{"a", "a/b", -1},
		{"a.md", "a/b", -1},          // '.' < '/'
		{"\U0001F600", "\uFF5E", -1}, // surrogate pair sorts before U+FF5E (byte order says the opposite)
		{"\uE000", "\U00010000", 1},
		{"\uD7FF", "\U00010000", -1}, // below the surrogates: byte order holds
		{"skills/reentrancy.md", "system.md", -1},
		{"prefix-01234567\U0001F600", "prefix-01234567\uFFFD", -1},
		{"prefix-0123456789abcdef\uE123", "prefix-0123456789abcdef\U0010FFFF", 1},
		{"same long prefix xxxxxxxx", "same long prefix xxxxxxxx", 0},
		{"same long prefix xxxxxxxx", "same long prefix xxxxxxxxy", -1},
	}
	for _, tt := range tests {
		if got := Compare(tt.a, tt.b); got != tt.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := utf16Compare(tt.a, tt.b); got != tt.want {
			t.Errorf("test table wrong for (%q, %q)", tt.a, tt.b)
		}
		if Less(tt.a, tt.b) != (tt.want < 0) {
			t.Errorf("Less(%q, %q) disagrees", tt.a, tt.b)
		}
	}
}

func FuzzLess(f *testing.F) {
	f.Add("\U0001F600", "\uFF5E")
	f.Add("a/b", "a.b")
	f.Add("skills/x\uE000", "skills/x\U00010437")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		got := Compare(a, b)
		if got != -Compare(b, a) {
			t.Fatalf("Compare not antisymmetric on %q %q", a, b)
		}
		if (got == 0) != (a == b) {
			t.Fatalf("Compare(%q, %q) = %d", a, b, got)
		}
		if !utf8Valid(a) || !utf8Valid(b) {
			return // UTF-16 order is only defined for text
		}
		if want := utf16Compare(a, b); got != want {
			t.Fatalf("Compare(%q, %q) = %d, UTF-16 order says %d", a, b, got, want)
		}
		aDir, bDir := len(a)%2 == 0, len(b)%2 == 0
		if bytes.ContainsRune([]byte(a+b), '/') || a == b {
			return
		}
		ka, kb := a, b
		if aDir {
			ka += "/"
		}
		if bDir {
			kb += "/"
		}
		if got, want := compareEntry(a, aDir, b, bDir), utf16Compare(ka, kb); got != want {
			t.Fatalf("compareEntry(%q,%v,%q,%v) = %d, want %d", a, aDir, b, bDir, got, want)
		}
	})
}

func TestDirMissingAndEmpty(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	writeFile(t, dir, "file", "x")
	writeFile(t, dir, "only/bundle.lock.json", "") // not top level: hashed
	writeFile(t, dir, "ex/bundle.lock.json", "")
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	os.MkdirAll(filepath.Join(empty, "a/b/c"), 0o755) // empty dirs count for nothing
	excl := filepath.Join(dir, "excl")
	writeFile(t, excl, "bundle.lock.json", "{}")
	writeFile(t, excl, "receipts.ndjson", "")
	os.Symlink(filepath.Join(dir, "ex"), filepath.Join(excl, "link"))
	tests := []struct {
		name, root string
	}{
		{"missing", filepath.Join(dir, "nope")},
		{"missing parent", filepath.Join(dir, "nope/deeper")},
		{"not a directory", filepath.Join(dir, "file")},
		{"under a file", filepath.Join(dir, "file/x")},
		{"empty", empty},
		{"only excluded files and a symlink", excl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Dir(ctx, tt.root, Options{})
			if err != nil || res.Digest != Null || res.Count != 0 {
				t.Fatalf("Dir = %s, %d files, %v; want Null", res.Digest, res.Count, err)
			}
		})
	}
	res, err := Dir(ctx, dir, Options{})
	if err != nil || !slices.Contains(paths(res.Files), "only/bundle.lock.json") {
		t.Fatalf("nested bundle.lock.json must be hashed: %v %v", paths(res.Files), err)
	}
}

func TestDirNames(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name    string
		setup   func(dir string) error
		wantErr bool
	}{
		{"invalid UTF-8 file", func(d string) error { return os.WriteFile(filepath.Join(d, "bad\xff.md"), nil, 0o644) }, true},
		{"invalid UTF-8 directory", func(d string) error { return os.MkdirAll(filepath.Join(d, "bad\xfe/sub"), 0o755) }, true},
		{"backslash file", func(d string) error { return os.WriteFile(filepath.Join(d, `a\b`), nil, 0o644) }, true},
		{"backslash directory", func(d string) error { return os.Mkdir(filepath.Join(d, `dir\x`), 0o755) }, true},
		{"invalid UTF-8 symlink is skipped", func(d string) error { return os.Symlink("target", filepath.Join(d, "l\xff")) }, false},
		{"backslash fifo is skipped", func(d string) error { return mkfifo(filepath.Join(d, `f\ifo`)) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "ok.md", "ok")
			if err := tt.setup(dir); err != nil {
				t.Fatal(err)
			}
			_, err := Dir(ctx, dir, Options{})
			if tt.wantErr != (err != nil) || (err != nil && !errors.Is(err, ErrName)) {
				t.Fatalf("Dir error = %v, want error %v (ErrName)", err, tt.wantErr)
			}
		})
	}
}

func TestDirCanceled(t *testing.T) {
	dir := t.TempDir()
	for i := range 300 {
		writeFile(t, dir, filepath.Join("d", string(rune('a'+i%26)), "f"+string(rune('a'+i/26))), "x")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Dir(ctx, dir, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Dir on canceled context = %v", err)
	}
}
