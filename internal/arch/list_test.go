package arch

import (
	"bytes"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/hermesd/hermesd/"

// A build is one configuration whose files the layering is checked on: a
// file only another operating system, architecture or tag compiles is as
// much a part of its package as the host's files are.
type build struct{ goos, goarch, tags string }

func (b build) String() string {
	s := b.goos + "/" + b.goarch
	if b.tags != "" {
		s += " -tags " + b.tags
	}
	return s
}

// builds between them compile every non-test file of the module: the
// three systems hermesd builds for (make lint builds darwin and windows),
// and the portable fallbacks of the assembly (purego, !amd64) and of
// fsys's Linux calls (fsys_portable). A file none of them compiles fails
// TestEveryFileIsChecked until a build here compiles it.
var builds = []build{
	{"linux", "amd64", ""},
	{"linux", "arm64", "purego,fsys_portable"},
	{"darwin", "arm64", ""},
	{"windows", "amd64", ""},
}

// graph is the module as the layering checks read it.
type graph struct {
	// deps maps each package to its non-test imports of the module, the
	// union over the builds; paths are relative to the module root.
	deps map[string][]string
	// unbuilt lists the non-test files ("pkg/name.go") that no build
	// compiles, whose imports are therefore not checked.
	unbuilt []string
}

// repoGraph is this repository's graph, listed once per test binary.
var repoGraph = sync.OnceValues(func() (graph, error) {
	return listModule(filepath.Join("..", ".."), module, builds)
})

// modulePackages returns this repository's packages and their imports.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	g, err := repoGraph()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.deps["internal/arch"]; !ok {
		t.Fatalf("go list did not list this module's packages: %v", keys(g.deps))
	}
	return g.deps
}

// goCommand returns the go command that runs the tests (it exports GOROOT
// and puts itself on PATH).
func goCommand() (string, error) {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is needed to list packages: %w", err)
	}
	return p, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// listFormat is one line per package: path, directory, the files this
// build compiles, the files its constraints exclude; tab-separated.
const listFormat = `{{.ImportPath}}	{{.Dir}}	{{join .GoFiles " "}} {{join .CgoFiles " "}}	{{join .IgnoredGoFiles " "}}`

// listModule runs `go list -find ./...` in the module at dir (module path
// mod, ending in "/") once per build, concurrently, and reads the imports
// of every file some build compiles. -find has go choose each build's
// files without loading their dependencies (four full listings took
// several times as long); the imports are then read from the files'
// headers, as go list reads them.
func listModule(dir, mod string, builds []build) (graph, error) {
	goTool, err := goCommand()
	if err != nil {
		return graph{}, err
	}
	outs := make([][]byte, len(builds))
	errs := make([]error, len(builds))
	var wg sync.WaitGroup
	for i, b := range builds {
		wg.Go(func() {
			cmd := exec.Command(goTool, "list", "-find", "-tags", b.tags, "-f", listFormat, "./...")
			cmd.Dir = dir
			// CGO_ENABLED=1 so that cgo files count as compiled (go list
			// runs no C compiler); GOFLAGS is replaced so that no -tags
			// of the caller's changes the file sets.
			cmd.Env = append(os.Environ(), "GOOS="+b.goos, "GOARCH="+b.goarch, "CGO_ENABLED=1", "GOFLAGS=-mod=readonly")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				errs[i] = fmt.Errorf("go list ./... for %s: %v\n%s", b, err, stderr.Bytes())
			}
			outs[i] = out
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return graph{}, err
	}
	return mergeLists(mod, outs)
}

// mergeLists merges go list answers in listFormat, one per build, and
// reads the module imports of every file some build compiles.
func mergeLists(mod string, outs [][]byte) (graph, error) {
	g := graph{deps: map[string][]string{}}
	built := map[string]bool{}   // "pkg/file.go" → some build compiles it
	paths := map[string]string{} // "pkg/file.go" → its path on disk
	for _, out := range outs {
		for line := range strings.Lines(string(out)) {
			f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
			if len(f) != 4 {
				return graph{}, fmt.Errorf("go list: unexpected line %q", line)
			}
			pkg, ok := strings.CutPrefix(f[0], mod)
			if !ok {
				continue
			}
			if _, ok := g.deps[pkg]; !ok {
				g.deps[pkg] = nil
			}
			for _, name := range strings.Fields(f[2]) {
				built[pkg+"/"+name] = true
				paths[pkg+"/"+name] = filepath.Join(f[1], name)
			}
			for _, name := range strings.Fields(f[3]) {
				if !strings.HasSuffix(name, "_test.go") && !built[pkg+"/"+name] {
					built[pkg+"/"+name] = false
				}
			}
		}
	}
	fset := token.NewFileSet()
	for _, file := range keys(built) {
		if !built[file] {
			g.unbuilt = append(g.unbuilt, file)
			continue
		}
		pkg := path.Dir(file)
		ast, err := parser.ParseFile(fset, paths[file], nil, parser.ImportsOnly)
		if err != nil {
			return graph{}, err
		}
		for _, spec := range ast.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return graph{}, fmt.Errorf("%s: import %s: %v", paths[file], spec.Path.Value, err)
			}
			if rel, ok := strings.CutPrefix(imp, mod); ok && !slices.Contains(g.deps[pkg], rel) {
				g.deps[pkg] = append(g.deps[pkg], rel)
			}
		}
	}
	for _, d := range g.deps {
		slices.Sort(d)
	}
	return g, nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestEveryFileIsChecked: the builds compile every non-test file, so an
// import in any of them is checked.
func TestEveryFileIsChecked(t *testing.T) {
	modulePackages(t)
	g, _ := repoGraph()
	for _, f := range g.unbuilt {
		t.Errorf("%s is compiled by none of the builds the layering is checked on (%v): add one to builds in internal/arch/list_test.go", f, builds)
	}
}

// TestOtherSystemsAreChecked shows, on a made-up module, that an import
// in a file only another system compiles is read and fails the layering,
// though the host's `go list` alone does not see it; and that a file no
// build compiles is reported.
func TestOtherSystemsAreChecked(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":                "module example.com/m\n\ngo 1.26\n",
		"low/low.go":            "package low\n",
		"low/low_windows.go":    "package low\n\nimport _ \"example.com/m/high\"\n",
		"low/low_darwin.go":     "package low\n\nimport _ \"example.com/m/tool\"\n",
		"low/low_plan9.go":      "package low\n",
		"low/low_plan9_test.go": "package low\n",
		"high/high.go":          "package high\n",
		"tool/tool.go":          "package tool\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	place := map[string]layer{"low": leafLayer, "high": agentLayer, "tool": toolLayer}

	host, err := listModule(dir, "example.com/m/", builds[:1])
	if err != nil {
		t.Fatal(err)
	}
	if v := violations(host.deps, place, nil); len(v) != 0 {
		t.Errorf("linux alone: violations = %q; want none (the hole: linux does not compile low_windows.go)", v)
	}

	g, err := listModule(dir, "example.com/m/", builds)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"low (leaves) imports high (agent), which is above it",
		"low (leaves) imports tool (tools), which is above it",
	}
	if got := violations(g.deps, place, nil); !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Equal(g.unbuilt, []string{"low/low_plan9.go"}) {
		t.Errorf("unbuilt = %v; want [low/low_plan9.go]", g.unbuilt)
	}
}
