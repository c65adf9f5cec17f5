package arch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// outside matches the ways the repository used to cite documents it does
// not hold: the shared design notes it was planned from, their section
// numbers, the research notes and the seed documents beside them. (The
// patterns are written so that this file does not match them.)
var outside = []*regexp.Regexp{
	regexp.MustCompile(`\bDESIGN\.md\b`),
	regexp.MustCompile(`\bDESIGN\s*§`),
	regexp.MustCompile(`\.\./shared\b`),
	regexp.MustCompile(`/work/share[d]\b`),
	regexp.MustCompile(`\bshared/(notes|seeds|DESIGN)`),
	regexp.MustCompile(`\bseeds/\d{3}_`),
	regexp.MustCompile(`\bnotes/(aesthetics|anchors|ens|perf|reference-formats|seal|walrus)\.m[d]\b`),
}

// sectionCite matches a file name ending in .md followed by a section sign:
// a citation of a section of a document, which must be one of the
// repository's.
var sectionCite = regexp.MustCompile(`([\w./-]*\w\.md)\s*§`)

// outsideCitations returns one line per place in text (the contents of
// the tracked file name) that cites a document outside the repository;
// tracked lists the repository's files, '/'-separated.
func outsideCitations(name, text string, tracked []string) []string {
	var out []string
	for i, line := range strings.Split(text, "\n") {
		for _, re := range outside {
			if m := re.FindString(line); m != "" {
				out = append(out, fmt.Sprintf("%s:%d: cites %q, outside the repository", name, i+1, m))
			}
		}
		for _, m := range sectionCite.FindAllStringSubmatch(line, -1) {
			if !resolves(m[1], path.Dir(name), tracked) && !slices.ContainsFunc(outside, func(re *regexp.Regexp) bool { return re.MatchString(m[0]) }) {
				out = append(out, fmt.Sprintf("%s:%d: cites %q, which is no document of the repository", name, i+1, m[0]))
			}
		}
	}
	return out
}

// resolves reports whether doc names a tracked file: from the repository's
// root, from the citing file's directory dir, or (a bare file name) by its
// base name.
func resolves(doc, dir string, tracked []string) bool {
	if slices.Contains(tracked, path.Clean(doc)) || slices.Contains(tracked, path.Join(dir, doc)) {
		return true
	}
	if strings.Contains(doc, "/") {
		return false
	}
	return slices.ContainsFunc(tracked, func(f string) bool { return path.Base(f) == doc })
}

// trackedFiles lists the repository's files as git sees them: tracked, or
// new and not ignored.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files (the check reads the repository's files): %v\n%s", err, stderr.String())
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	if !slices.Contains(files, "internal/arch/cite_test.go") {
		t.Fatalf("git ls-files did not list this repository: %d files", len(files))
	}
	return files
}

// TestNoCitationOutsideRepository: every citation points into the
// repository (docs/design.md, docs/format-v3.md, ...), so a reader of a
// clean clone can follow each one.
func TestNoCitationOutsideRepository(t *testing.T) {
	files := trackedFiles(t)
	read := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(f)))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the working tree
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary
		}
		read++
		for _, c := range outsideCitations(f, string(b), files) {
			t.Error(c)
		}
	}
	if read < 100 {
		t.Fatalf("read only %d of %d files", read, len(files))
	}
}

// TestOutsideCitations shows the check at work.
func TestOutsideCitations(t *testing.T) {
	tracked := []string{"docs/design.md", "docs/format-v3.md", "testnet/seal.md", "README.md", "internal/hash/doc.go"}
	// The citations are split in two, so that this file cites nothing.
	design, shared := "DESIGN", "sha"+"red"
	for _, tc := range []struct {
		text string
		bad  bool
	}{
		{"the bundle hash (docs/design.md §2)", false},
		{"see docs/format-v3.md §6.1 and format-v3.md §12", false},
		{"the servers' keys (testnet/seal.md §3)", false},
		{"a blob id, verbatim (§7)", false},
		{"skills/reentrancy.md is a file of the brain", false},
		{"a bare DESIGNER.md mention", false},
		{"(" + design + ".md §2)", true},
		{"the layering of " + design + " §1", true},
		{"the " + design + ".md in the shared documents", true},
		{"read ../" + shared + "/notes", true},
		{"the datasets of " + shared + "/notes/perf" + ".md", true},
		{"recently_deleted (perf.md" + " §8)", true},
		{"open-mode servers (notes/seal" + ".md §6)", true},
		{"seeds/" + "000_0f8408dce9a1344c.txt", true},
		{"answer shapes from the docs (notes/walrus" + ".md)", true},
		{"a brain file notes/mine.md", false},
	} {
		got := outsideCitations("internal/hash/doc.go", tc.text, tracked)
		if (len(got) > 0) != tc.bad {
			t.Errorf("%q: %v, want a citation outside the repository: %v", tc.text, got, tc.bad)
		}
	}
}
