package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// One owner for the pointer's life (docs/design.md §7.3): internal/pointer
// decides every state of an agent's head and paces its writes. The rule,
// checked on the source of the packages around it (a syntactic check, so
// it names what it finds and needs no build):
//
//   - writes to the head's persisted places — the agent state's Last,
//     Pending, Published, PublishedAt, Hold, Transferred, or anything below
//     Pending or Written — appear only in internal/pointer;
//   - the results of a chain write (ens.UpdateResult, its outcomes, the
//     WriteBatches call) are read only there;
//   - the pacing settings (pointer_interval, check_interval,
//     head_interval, visibility_timeout) are read only there and in
//     compose, which maps the configuration onto pointer.Config.
var pointerNeighbours = []string{"internal/agent", "internal/daemon", "internal/compose", "internal/drill", "cmd/hermesd"}

var (
	headPlaces   = regexp.MustCompile(`(^|\.)st\.(Last|Pending|Published|PublishedAt|Hold|Transferred)(\.|$)|\.(Pending|Written)\.`)
	writeResults = map[string]bool{"UpdateResult": true, "Outcome": true, "Published": true, "Unchanged": true, "Conflict": true,
		"NotAuthorized": true, "NotFound": true, "Invalid": true, "Retry": true, "Failed": true}
	pacing = []string{"PointerIntervalOf", "CheckInterval", "HeadInterval", "VisibilityTimeout"}
)

// pointerRuleViolations checks one file's source (pkg: its package's
// path in the module) and returns one line per thing it must not do.
func pointerRuleViolations(pkg, name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	var out []string
	add := func(n ast.Node, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), fmt.Sprintf(format, args...)))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for _, lhs := range n.Lhs {
				if s := dotted(lhs); headPlaces.MatchString(s) {
					add(n, "writes %s, a place of the agent's head that internal/pointer owns", s)
				}
			}
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && x.Name == "ens" && writeResults[n.Sel.Name] {
				add(n, "reads ens.%s, a chain write's result that internal/pointer judges", n.Sel.Name)
			}
			if n.Sel.Name == "WriteBatches" {
				add(n, "calls WriteBatches: pointer writes go through internal/pointer")
			}
			if pkg != "internal/compose" && slices.Contains(pacing, n.Sel.Name) {
				add(n, "reads %s, a pacing setting that internal/pointer applies (compose maps it)", n.Sel.Name)
			}
		}
		return true
	})
	return out, nil
}

// dotted spells a selector chain (a.st.Pending.Value); "" for anything
// else.
func dotted(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		if x := dotted(e.X); x != "" {
			return x + "." + e.Sel.Name
		}
	case *ast.StarExpr:
		return dotted(e.X)
	case *ast.ParenExpr:
		return dotted(e.X)
	}
	return ""
}

func TestPointerHasOneOwner(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, pkg := range pointerNeighbours {
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", pkg, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			v, err := pointerRuleViolations(pkg, f, src)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range v {
				t.Error(line)
			}
		}
	}
}

// TestPointerRuleChecks shows the rule at work on planted code.
func TestPointerRuleChecks(t *testing.T) {
	src := `package agent
func f(a *Agent, st *state.AgentState, r ens.UpdateResult, c *ens.Client, cfg *config.Config) {
	a.st.Pending = nil
	st.Published = "x"
	a.st.Pending.Written.TxHash = "0x1"
	p.Written.Value = "v"
	a.phase = "ready"
	st.Origin = "restored"
	_ = r.Outcome == ens.Published
	c.WriteBatches(nil, nil, nil)
	_ = cfg.PointerIntervalOf(nil)
}
`
	got, err := pointerRuleViolations("internal/agent", "planted.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"planted.go:3:2: writes a.st.Pending, a place of the agent's head that internal/pointer owns",
		"planted.go:4:2: writes st.Published, a place of the agent's head that internal/pointer owns",
		"planted.go:5:2: writes a.st.Pending.Written.TxHash, a place of the agent's head that internal/pointer owns",
		"planted.go:6:2: writes p.Written.Value, a place of the agent's head that internal/pointer owns",
		"planted.go:2:42: reads ens.UpdateResult, a chain write's result that internal/pointer judges",
		"planted.go:9:19: reads ens.Published, a chain write's result that internal/pointer judges",
		"planted.go:10:2: calls WriteBatches: pointer writes go through internal/pointer",
		"planted.go:11:6: reads PointerIntervalOf, a pacing setting that internal/pointer applies (compose maps it)",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if v, _ := pointerRuleViolations("internal/compose", "c.go", []byte("package compose\nvar _ = c.PointerIntervalOf(nil)\n")); len(v) != 0 {
		t.Errorf("compose may map the pacing settings: %v", v)
	}
}
