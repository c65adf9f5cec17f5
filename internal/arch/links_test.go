package arch

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// Citations of the repository's own pages must lead somewhere: a Markdown
// link to a file that exists and a heading it has, a `page.md#anchor` in a
// comment or message, and a page's numbered section (page.md, §N). Pages get
// split and headings renamed; a citation that then leads nowhere fails
// here rather than in a reader's hands.

// mdLink is a Markdown link's target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// anchorCite is a page and anchor cited in any text: docs/cost.md#gas.
var anchorCite = regexp.MustCompile(`([\w./-]*\w\.md)#([\w-]+)`)

// numberedCite is a page and section number: docs/design.md §7.2.
var numberedCite = regexp.MustCompile(`([\w./-]*\w\.md)\s*§\s*(\d+[a-z]?(?:\.\d+)*)`)

// headingSlug is the anchor GitHub gives a heading: lower case, without
// punctuation, spaces as hyphens.
func headingSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || r == '_' || r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// mdHeadings returns the ATX headings of a page, outside its fenced blocks.
func mdHeadings(text string) []string {
	var out []string
	for _, l := range prose(text) {
		if h := strings.TrimLeft(l, "#"); len(h) < len(l) && len(l)-len(h) <= 6 && strings.HasPrefix(h, " ") {
			out = append(out, strings.TrimSpace(strings.TrimRight(strings.TrimSpace(h), "#")))
		}
	}
	return out
}

// mdAnchors are the anchors of a page's headings, a repeated one numbered
// as GitHub numbers it (name, name-1, ...).
func mdAnchors(text string) []string {
	var out []string
	n := map[string]int{}
	for _, h := range mdHeadings(text) {
		s := headingSlug(h)
		if k := n[s]; k > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, k))
		} else {
			out = append(out, s)
		}
		n[s]++
	}
	return out
}

// mdSections reports whether a page has section number num: a heading
// that begins with it ("7.", "7.1 ", "4c.") or a paragraph labelled
// "(§7.1)".
func mdSections(text, num string) bool {
	for _, h := range mdHeadings(text) {
		if rest, ok := strings.CutPrefix(h, num); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, ". ")) {
			return true
		}
	}
	return strings.Contains(text, "(§"+num+")")
}

// resolvePath is the tracked file a citation of doc from a file in dir
// names ("" for none): from the repository's root, from dir, or (a bare
// name) the one tracked file of that name.
func resolvePath(doc, dir string, tracked []string) string {
	for _, p := range []string{path.Clean(doc), path.Join(dir, doc)} {
		if slices.Contains(tracked, p) {
			return p
		}
	}
	if strings.Contains(doc, "/") {
		return ""
	}
	var found string
	for _, f := range tracked {
		if path.Base(f) == doc {
			if found != "" {
				return "" // ambiguous: README.md, say
			}
			found = f
		}
	}
	return found
}

// linkProblems checks the citations in files (name → text) against the
// tracked files.
func linkProblems(files map[string]string, tracked []string) []string {
	var problems []string
	isDir := func(p string) bool {
		return slices.ContainsFunc(tracked, func(f string) bool { return strings.HasPrefix(f, p+"/") })
	}
	hasAnchor := func(page, anchor string) bool {
		text, ok := files[page]
		return ok && slices.Contains(mdAnchors(text), anchor)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		text, dir := files[name], path.Dir(name)
		if strings.HasSuffix(name, ".md") {
			for i, l := range prose(text) {
				for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
					target := m[1]
					if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
						continue
					}
					file, anchor, _ := strings.Cut(target, "#")
					page := name
					if file != "" {
						page = path.Join(dir, file)
						if !slices.Contains(tracked, page) && !isDir(page) {
							problems = append(problems, fmt.Sprintf("%s:%d: links to %s, which is no file of the repository", name, i+1, target))
							continue
						}
					}
					if anchor != "" && strings.HasSuffix(page, ".md") && !hasAnchor(page, anchor) {
						problems = append(problems, fmt.Sprintf("%s:%d: links to %s, but %s has no heading #%s", name, i+1, target, page, anchor))
					}
				}
			}
		}
		for i, l := range strings.Split(text, "\n") {
			if strings.HasSuffix(name, ".md") {
				l = mdLink.ReplaceAllString(l, "]()") // checked above
			}
			for _, m := range anchorCite.FindAllStringSubmatch(l, -1) {
				if page := resolvePath(m[1], dir, tracked); page != "" && !hasAnchor(page, m[2]) {
					problems = append(problems, fmt.Sprintf("%s:%d: cites %s#%s, but %s has no such heading", name, i+1, m[1], m[2], page))
				}
			}
			for _, m := range numberedCite.FindAllStringSubmatch(l, -1) {
				if page := resolvePath(m[1], dir, tracked); page != "" && strings.HasSuffix(page, ".md") && !mdSections(files[page], m[2]) {
					problems = append(problems, fmt.Sprintf("%s:%d: cites %s §%s, but %s has no section %s", name, i+1, m[1], m[2], page, m[2]))
				}
			}
		}
	}
	return problems
}

// TestDocLinksResolve: every link between the repository's pages, and
// every page#anchor or page §N cited anywhere, leads to a heading or
// section that exists.
func TestDocLinksResolve(t *testing.T) {
	tracked := trackedFiles(t)
	files := map[string]string{}
	for _, f := range tracked {
		b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(f)))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) < 0 {
			files[f] = string(b)
		}
	}
	if len(mdAnchors(files["docs/design.md"])) < 10 {
		t.Fatalf("docs/design.md has %d headings: not this repository", len(mdAnchors(files["docs/design.md"])))
	}
	for _, p := range linkProblems(files, tracked) {
		t.Error(p)
	}
}

// TestLinkChecks shows the check at work.
func TestLinkChecks(t *testing.T) {
	tracked := []string{"README.md", "docs/a.md", "docs/design.md", "configs/x.yml", "internal/y/doc.go"}
	design := "# Design\n\n## 7. ENS pointer\n\n**Read (§7.1).** text\n\n### 1.4 Invariants\n"
	a := "# A page\n\n## Where the record lives: L1 or an L2\n\n## `hermesd/snapshot/v1` receipts\n\n## Gas\n\n## Gas\n"
	for _, tc := range []struct {
		name, file, text string
		bad              bool
	}{
		{"a link to a heading", "README.md", "[x](docs/a.md#where-the-record-lives-l1-or-an-l2)", false},
		{"a link to a heading with code", "README.md", "[x](docs/a.md#hermesdsnapshotv1-receipts)", false},
		{"a repeated heading", "docs/a.md", "[x](#gas-1)", false},
		{"a link to no heading", "README.md", "[x](docs/a.md#where-the-record-lives)", true},
		{"a link to no file", "README.md", "[x](docs/b.md)", true},
		{"a link to a directory", "README.md", "[x](configs)", false},
		{"a link up and over", "docs/a.md", "[x](../configs/x.yml)", false},
		{"a web link", "README.md", "[x](https://example.com/a.md#nowhere)", false},
		{"a link in a block", "README.md", "```text\n[x](docs/b.md)\n```", false},
		{"an anchor in a comment", "internal/y/doc.go", "// see docs/a.md#gas", false},
		{"a stale anchor in a comment", "internal/y/doc.go", "// see docs/a.md#gas-costs", true},
		// (The section citations are split in two, so that this file cites
		// nothing.)
		{"a section", "internal/y/doc.go", "// docs/design.md" + " §7", false},
		{"a labelled section", "internal/y/doc.go", "// docs/design.md" + " §7.1", false},
		{"a subsection", "docs/a.md", "design.md" + " §1.4", false},
		{"no such section", "internal/y/doc.go", "// docs/design.md" + " §7.3", true},
		{"a page elsewhere", "internal/y/doc.go", "// Seal's docs/SealCLI.md" + " §3", false},
	} {
		files := map[string]string{"docs/design.md": design, "docs/a.md": a, tc.file: tc.text}
		if tc.file == "docs/a.md" {
			files[tc.file] = a + tc.text
		}
		got := linkProblems(files, tracked)
		if (len(got) > 0) != tc.bad {
			t.Errorf("%s: %v, want a problem: %v", tc.name, got, tc.bad)
		}
	}
}
