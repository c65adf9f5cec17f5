package fsys

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// longPath is exactly MaxPathLen bytes: 16 components of 255 bytes.
var longPath = strings.TrimSuffix(strings.Repeat(strings.Repeat("n", MaxNameLen)+"/", 16), "/")

func TestCheckName(t *testing.T) {
	if len(longPath) != MaxPathLen {
		t.Fatalf("longPath is %d bytes", len(longPath))
	}
	tests := []struct {
		name   string
		reason string // "" = valid
		escape bool
	}{
		{"a", "", false},
		{"system.md", "", false},
		{".hidden", "", false},
		{"skills/reentrancy.md", "", false},
		{"ünïcödé/日本語.md", "", false},
		{"\U0001F600/\uFFFD", "", false}, // U+FFFD is valid text, not an encoding error
		{"a b/c\td", "", false},
		{"..a/b..", "", false},
		{"a:b*c?", "", false}, // only the rules in the package doc apply
		{strings.Repeat("n", MaxNameLen), "", false},
		{longPath, "", false},

		{"", "is empty", false},
		{"/etc/passwd", "is absolute", true},
		{"/", "is absolute", true},
		{"..", `".." component`, true},
		{"../x", `".." component`, true},
		{"a/../../x", `".." component`, true},
		{"a/..", `".." component`, true},
		{"bad\xff/..", `".." component`, true}, // the escape is reported first
		{".", `"." component`, false},
		{"./a", `"." component`, false},
		{"a/./b", `"." component`, false},
		{"a//b", "empty component", false},
		{"a/", "empty component", false},
		{`a\b`, "backslash", false},
		{`dir\x/file`, "backslash", false},
		{`\`, "backslash", false},
		{"a\x00b", "NUL", false},
		{"bad\xff", "not valid UTF-8", false},
		{"d/bad\xfe/f", "not valid UTF-8", false},
		{"\xed\xa0\x80", "not valid UTF-8", false}, // a UTF-16 surrogate encoded in UTF-8
		{strings.Repeat("n", MaxNameLen+1), "more than 255", false},
		{"d/" + strings.Repeat("n", MaxNameLen+1), "more than 255", false},
		{longPath + "x", "more than 4095", false},
	}
	for _, tt := range tests {
		err := CheckName(tt.name)
		if tt.reason == "" {
			if err != nil {
				t.Errorf("CheckName(%.40q) = %v, want nil", tt.name, err)
			}
			continue
		}
		var ne *NameError
		if !errors.Is(err, ErrName) || !errors.As(err, &ne) || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("CheckName(%.40q) = %v, want ErrName: %s", tt.name, err, tt.reason)
			continue
		}
		if errors.Is(err, ErrEscape) != tt.escape {
			t.Errorf("CheckName(%.40q): ErrEscape = %v, want %v", tt.name, !tt.escape, tt.escape)
		}
		if strings.Contains(err.Error(), "\n") || len(err.Error()) > 600 {
			t.Errorf("CheckName(%.40q): error is not one short line: %d bytes", tt.name, len(err.Error()))
		}
	}
}

// TestJoin: walking a path component by component with Join accepts
// exactly what CheckName accepts, and builds the same string.
func TestJoin(t *testing.T) {
	for _, rel := range []string{
		"a", "a/b/c", ".hidden/x", longPath, longPath[:MaxPathLen-1] + "/x",
		`a\b`, "a/bad\xff", "x/a\x00b", "a/../b", "a/./b", "a//b",
		strings.Repeat("n", MaxNameLen+1), "d/" + strings.Repeat("n", MaxNameLen+1),
	} {
		want := CheckName(rel)
		p, err := joinAll(rel)
		if (err == nil) != (want == nil) {
			t.Errorf("%.40q: Join walk %v, CheckName %v", rel, err, want)
		}
		if err == nil && p != rel {
			t.Errorf("%.40q: Join built %.40q", rel, p)
		}
		if err != nil && !errors.Is(err, ErrName) {
			t.Errorf("%.40q: %v does not match ErrName", rel, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`} {
		if _, err := Join("dir", bad); !errors.Is(err, ErrName) {
			t.Errorf("Join(dir, %q) = %v, want ErrName", bad, err)
		}
	}
	if _, err := Join("dir", ".."); !errors.Is(err, ErrEscape) {
		t.Errorf("Join(dir, ..) = %v, want ErrEscape", err)
	}
}

func joinAll(rel string) (string, error) {
	p := ""
	for c := range strings.SplitSeq(rel, "/") {
		var err error
		if p, err = Join(p, c); err != nil {
			return "", err
		}
	}
	return p, nil
}

func TestNameErrorClipsLongNames(t *testing.T) {
	huge := strings.Repeat("ü", 1<<19) // a megabyte, as a GNU long name may be
	err := CheckName(huge)
	if !errors.Is(err, ErrName) || len(err.Error()) > 600 {
		t.Fatalf("error for a 1 MiB name is %d bytes: %.100v", len(err.Error()), err)
	}
	var ne *NameError
	if !errors.As(err, &ne) || !utf8.ValidString(ne.Path) {
		t.Errorf("clipped path is not valid UTF-8: %q", ne.Path)
	}
}

// FuzzCheckName compares CheckName with a naive statement of the policy
// and with the component walk of Join.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", "/abs", `a\b`, "a\x00", "bad\xff", "a//b", "./a", longPath, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		err := CheckName(rel)
		if err != nil && !errors.Is(err, ErrName) {
			t.Fatalf("%q: %v does not match ErrName", rel, err)
		}
		if want := naiveValid(rel); (err == nil) != want {
			t.Fatalf("CheckName(%q) = %v, naive policy says valid=%v", rel, err, want)
		}
		wantEscape := strings.HasPrefix(rel, "/") || strings.Contains("/"+rel+"/", "/../")
		if errors.Is(err, ErrEscape) != wantEscape {
			t.Fatalf("CheckName(%q) = %v, escape should be %v", rel, err, wantEscape)
		}
		if p, jerr := joinAll(rel); !strings.HasPrefix(rel, "/") && (jerr == nil) != (err == nil) || (jerr == nil && p != rel) {
			t.Fatalf("%q: Join walk (%q, %v) disagrees with CheckName %v", rel, p, jerr, err)
		}
	})
}

func naiveValid(rel string) bool {
	if rel == "" || len(rel) > MaxPathLen || !utf8.ValidString(rel) || strings.ContainsAny(rel, "\x00\\") || rel[0] == '/' {
		return false
	}
	for _, c := range strings.Split(rel, "/") {
		if c == "" || c == "." || c == ".." || len(c) > MaxNameLen {
			return false
		}
	}
	return true
}
