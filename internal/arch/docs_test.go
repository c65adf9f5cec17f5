package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The commands a reader pastes from the documentation run in tests. A
// shell block in README.md or docs/*.md is marked, on the line before its
// opening fence, with the test that runs it:
//
//	<!-- tested-by: TestE2EFirstHour/first-look -->
//	```sh
//	bin/hermesd status
//	```
//
// and that test reads the block with docBlock(t, "first-look") and runs
// every line of it as written (cmd/hermesd/doc_shell_test.go; docBlock
// fails the test when a line is left unrun). This file checks the other
// half: every shell block is marked, every marker names a test that
// exists and reads that very block, and nothing that looks like a command
// hides in a block of another kind or in the prose. A marked block of
// another kind (an output the docs show) is read and compared by its
// test the same way.

// docMarker marks a block with the test that reads it and the block's id.
var docMarker = regexp.MustCompile(`^<!-- tested-by: (Test\w+)/([a-z0-9-]+) -->$`)

// shellInfo are the info strings of blocks a reader runs in a shell.
var shellInfo = []string{"sh", "bash", "shell", "console", "zsh"}

// commandLike matches a line that a reader would paste into a shell: a
// prompt, or hermesd, its devnet, make or a tool a page tells them to run.
var commandLike = regexp.MustCompile(`^\s*(\$ |(bin/hermesd(-devnet)?|hermesd|hermesd-devnet|make|curl|export|go|npm|sudo|systemctl|age|rm|echo|scripts/\S+)( |$))`)

// inlineCode is a code span in prose.
var inlineCode = regexp.MustCompile("`([^`]+)`")

// docFence is one fenced block of a page.
type docFence struct {
	line   int      // of the opening fence, 1-based
	info   string   // the first word of the info string
	marker string   // "TestName/id" from the line before, or ""
	body   []string // the lines between the fences
}

// docFences parses the fenced blocks of a Markdown page, and reports a
// marker that no fence follows and a fence that is never closed.
func docFences(name, text string) ([]docFence, []string) {
	var out []docFence
	var problems []string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		t := strings.TrimLeft(lines[i], " ")
		if m := docMarker.FindStringSubmatch(lines[i]); m != nil {
			if i+1 >= len(lines) || !strings.HasPrefix(strings.TrimLeft(lines[i+1], " "), "```") {
				problems = append(problems, fmt.Sprintf("%s:%d: a tested-by marker must be the line right before a block's opening fence", name, i+1))
			}
			continue
		}
		if !strings.HasPrefix(t, "```") {
			continue
		}
		f := docFence{line: i + 1}
		if fields := strings.Fields(strings.TrimPrefix(t, "```")); len(fields) > 0 {
			f.info = fields[0]
		}
		if i > 0 {
			if m := docMarker.FindStringSubmatch(lines[i-1]); m != nil {
				f.marker = m[1] + "/" + m[2]
			}
		}
		closed := false
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				closed = true
				break
			}
			f.body = append(f.body, lines[i])
		}
		if !closed {
			problems = append(problems, fmt.Sprintf("%s:%d: a block that is never closed", name, f.line))
		}
		out = append(out, f)
	}
	return out, problems
}

// prose is the lines of text with its fenced blocks blanked out.
func prose(text string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		fence := strings.HasPrefix(strings.TrimLeft(l, " "), "```")
		if fence {
			in = !in
		}
		if in || fence {
			l = "" // kept, so that lines keep their numbers
		}
		out = append(out, l)
	}
	return out
}

// docCommandProblems checks pages (name → text) against reads (each test
// function of the repository → the block ids it passes to docBlock) and
// the make targets the Makefile defines.
func docCommandProblems(pages map[string]string, reads map[string][]string, targets []string) []string {
	var problems []string
	names := make([]string, 0, len(pages))
	for n := range pages {
		names = append(names, n)
	}
	sort.Strings(names)
	seen := map[string]string{} // id → where
	var tested []string         // the command lines of every marked shell block
	for _, name := range names {
		fences, p := docFences(name, pages[name])
		problems = append(problems, p...)
		for _, f := range fences {
			where := fmt.Sprintf("%s:%d", name, f.line)
			shell := slices.Contains(shellInfo, f.info)
			if f.marker == "" {
				if shell {
					problems = append(problems, where+": a shell block no test runs: mark it <!-- tested-by: TestName/id --> and read it in that test with docBlock(t, \"id\")")
					continue
				}
				for j, l := range f.body {
					if commandLike.MatchString(l) {
						problems = append(problems, fmt.Sprintf("%s:%d: %q looks like a command in a %q block: put it in a shell block that a test runs", name, f.line+1+j, strings.TrimSpace(l), f.info))
					}
				}
				continue
			}
			test, id, _ := strings.Cut(f.marker, "/")
			if prev, dup := seen[id]; dup {
				problems = append(problems, fmt.Sprintf("%s: block id %q is also the id of the block at %s", where, id, prev))
			}
			seen[id] = where
			ids, ok := reads[test]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s: marked as tested by %s, which is no test of the repository", where, test))
			case !slices.Contains(ids, id):
				problems = append(problems, fmt.Sprintf("%s: marked as tested by %s, which does not read it (docBlock(t, %q))", where, test, id))
			}
			if shell {
				for _, l := range f.body {
					if c := shellCommand(l); c != "" {
						tested = append(tested, c)
					}
				}
			}
		}
	}
	// A command in the prose is either one a tested block runs or, for
	// make, a target the Makefile has.
	for _, name := range names {
		for i, l := range prose(pages[name]) {
			for _, m := range inlineCode.FindAllStringSubmatch(l, -1) {
				span := strings.TrimSpace(m[1])
				switch {
				case strings.HasPrefix(span, "bin/") && strings.Contains(span, " "):
					if !slices.Contains(tested, span) {
						problems = append(problems, fmt.Sprintf("%s:%d: `%s` is a command no tested block runs: run it in one, or name it without bin/ as a synopsis", name, i+1, span))
					}
				case strings.HasPrefix(span, "make "):
					for _, w := range strings.Fields(span)[1:] {
						placeholder := strings.ToUpper(w) == w || strings.Contains(w, "…") // make TARGET
						if !strings.Contains(w, "=") && !placeholder && !slices.Contains(targets, w) {
							problems = append(problems, fmt.Sprintf("%s:%d: `%s`: the Makefile has no target %q", name, i+1, span, w))
						}
					}
				}
			}
		}
	}
	return problems
}

// shellCommand is a shell line without its comment and surrounding
// space ("" for a blank line or a comment).
func shellCommand(line string) string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "#") {
		return ""
	}
	return line
}

// docBlockReads maps every test function in files (Go sources, by path
// from the repository's root) to the string literals its body passes to
// docBlock: the blocks it reads.
func docBlockReads(t *testing.T, root string, files []string) map[string][]string {
	t.Helper()
	reads := map[string][]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, filepath.Join(root, filepath.FromSlash(f)), nil, 0)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Body == nil {
				continue
			}
			ids := reads[fn.Name.Name]
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "docBlock" {
					return true
				}
				for _, a := range call.Args {
					if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if s, err := strconv.Unquote(lit.Value); err == nil {
							ids = append(ids, s)
						}
					}
				}
				return true
			})
			reads[fn.Name.Name] = ids
		}
	}
	return reads
}

// makeTargets lists the targets the Makefile defines.
func makeTargets(text string) []string {
	rule := regexp.MustCompile(`^([a-z][a-z0-9-]*):`)
	var targets []string
	for _, l := range strings.Split(text, "\n") {
		if m := rule.FindStringSubmatch(l); m != nil {
			targets = append(targets, m[1])
		}
	}
	return targets
}

// isDocPage reports whether a tracked file is one of the pages whose
// commands must be tested: the README and docs/*.md.
func isDocPage(f string) bool {
	return f == "README.md" || (path.Dir(f) == "docs" && strings.HasSuffix(f, ".md"))
}

// TestDocCommandsTested: every shell block of the README and docs/ is
// run by the test its marker names, and no command is left outside one.
func TestDocCommandsTested(t *testing.T) {
	files := trackedFiles(t)
	root := filepath.Join("..", "..")
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	pages := map[string]string{}
	blocks := 0
	for _, f := range files {
		if isDocPage(f) {
			pages[f] = read(f)
			fences, _ := docFences(f, pages[f])
			for _, x := range fences {
				if x.marker != "" {
					blocks++
				}
			}
		}
	}
	if pages["README.md"] == "" || pages["docs/README.md"] == "" || blocks < 10 {
		t.Fatalf("read %d pages with %d tested blocks: not this repository's documentation", len(pages), blocks)
	}
	reads := docBlockReads(t, root, files)
	for _, p := range docCommandProblems(pages, reads, makeTargets(read("Makefile"))) {
		t.Error(p)
	}
}

// TestDocCommandChecks shows the check at work on planted pages.
func TestDocCommandChecks(t *testing.T) {
	reads := map[string][]string{"TestRuns": {"look", "says"}, "TestOther": nil}
	targets := []string{"run", "test", "fuzz"}
	fence := "```"
	for _, tc := range []struct {
		name, page string
		want       string // a substring of the one problem; "" for none
	}{
		{"a tested block", "<!-- tested-by: TestRuns/look -->\n" + fence + "sh\nbin/hermesd status\n" + fence + "\n", ""},
		{"an untested shell block", "text\n\n" + fence + "sh\nbin/hermesd status\n" + fence + "\n", "a shell block no test runs"},
		{"a bash block", fence + "bash\nmake run\n" + fence + "\n", "a shell block no test runs"},
		{"a test that does not exist", "<!-- tested-by: TestNobody/look -->\n" + fence + "sh\nls\n" + fence + "\n", "which is no test of the repository"},
		{"a test that reads another block", "<!-- tested-by: TestOther/look -->\n" + fence + "sh\nls\n" + fence + "\n", "which does not read it"},
		{"a marker apart from its block", "<!-- tested-by: TestRuns/look -->\n\n" + fence + "sh\nls\n" + fence + "\n", "right before a block"},
		{"a command in an output block", fence + "text\n$ bin/hermesd cost auditor\nagent auditor: ...\n" + fence + "\n", "looks like a command"},
		{"a command in a plain block", fence + "\nbin/hermesd drill auditor\n" + fence + "\n", "looks like a command"},
		{"an output block", fence + "text\nmsg=\"pointer published\" agent=auditor\n" + fence + "\n", ""},
		{"a tested output block", "<!-- tested-by: TestRuns/says -->\n" + fence + "text\nhermesd: chain unreachable\n" + fence + "\n", ""},
		{"a command in the prose", "run `bin/hermesd drill --mode a auditor` now\n", "no tested block runs"},
		{"a tested command in the prose", "<!-- tested-by: TestRuns/look -->\n" + fence + "sh\nbin/hermesd status   # all agents\n" + fence + "\nthen `bin/hermesd status` again\n", ""},
		{"a path in the prose", "builds `bin/hermesd`\n", ""},
		{"a make target", "`make fuzz FUZZTIME=1m` fuzzes\n", ""},
		{"no such make target", "`make bench` measures\n", "no target \"bench\""},
		{"a make synopsis", "`make TARGET` runs its recipe\n", ""},
		{"an unclosed block", fence + "sh\nls\n", "never closed"},
	} {
		got := docCommandProblems(map[string]string{"docs/x.md": tc.page}, reads, targets)
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("%s: %v, want no problem", tc.name, got)
		case tc.want != "" && (len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, got, tc.want)
		}
	}
	// One id, two blocks.
	page := "<!-- tested-by: TestRuns/look -->\n" + fence + "sh\nls\n" + fence + "\n"
	if got := docCommandProblems(map[string]string{"README.md": page, "docs/x.md": page}, reads, targets); len(got) != 1 || !strings.Contains(got[0], "is also the id") {
		t.Errorf("a duplicate id: %v", got)
	}
}

// TestDocBlockReads: the reads of a test are the ids its body passes to
// docBlock, and only its own body counts.
func TestDocBlockReads(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import "testing"

func TestA(t *testing.T) {
	b := docBlock(t, "one")
	func() { docBlock(t, "two") }()
	_ = b
}

func TestB(t *testing.T) { helper(t) }

func helper(t *testing.T) { docBlock(t, "three") }

func docBlock(t *testing.T, id string) int { return 0 }
`
	if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := docBlockReads(t, dir, []string{"x_test.go"})
	if b, ok := got["TestB"]; !slices.Equal(got["TestA"], []string{"one", "two"}) || !ok || len(b) != 0 || len(got) != 2 {
		t.Errorf("reads: %v, want TestA reading one and two, TestB reading nothing", got)
	}
}

// TestDocsIndexed: docs/README.md links to every page of docs/, so a
// reader finds each one from the index.
func TestDocsIndexed(t *testing.T) {
	index, err := os.ReadFile(filepath.Join("..", "..", "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(string(index), -1) {
		file, _, _ := strings.Cut(m[1], "#")
		linked[path.Join("docs", file)] = true
	}
	pages := 0
	for _, f := range trackedFiles(t) {
		if isDocPage(f) && f != "README.md" && f != "docs/README.md" {
			pages++
			if !linked[f] {
				t.Errorf("docs/README.md does not link to %s", f)
			}
		}
	}
	if pages < 5 {
		t.Fatalf("found %d pages in docs/", pages)
	}
}
