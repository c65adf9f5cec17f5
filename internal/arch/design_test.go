package arch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// designRow is one row of the layer table of docs/design.md §1.1.
type designRow struct {
	line  int    // in the document, for messages
	layer string // the first column
	pkgs  []string
}

var (
	codeSpan   = regexp.MustCompile("`([^`]+)`")
	tableRule  = regexp.MustCompile(`^\|[\s:|-]+\|$`)
	listOfCode = regexp.MustCompile("^`[^`]+`(, `[^`]+`)*$")
)

// designTable reads the layer table of §1.1 from doc, the text of
// design.md: the first table after the heading "### 1.1", whose first
// column names a layer and whose second lists the layer's packages as
// code spans separated by commas, as designName writes them.
func designTable(doc string) ([]designRow, error) {
	lines := strings.Split(doc, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "### 1.1 ") })
	if i < 0 {
		return nil, errors.New("no heading \"### 1.1 \"")
	}
	for i++; i < len(lines) && !strings.HasPrefix(lines[i], "|"); i++ {
		if strings.HasPrefix(lines[i], "#") {
			return nil, errors.New("§1.1 has no table")
		}
	}
	if i+1 >= len(lines) || !tableRule.MatchString(lines[i+1]) {
		return nil, fmt.Errorf("line %d: §1.1's first table has no header row", i+1)
	}
	var rows []designRow
	for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cells := strings.Split(strings.Trim(lines[i], "|"), "|")
		if len(cells) < 2 {
			return nil, fmt.Errorf("line %d: a row of fewer than two columns", i+1)
		}
		list := strings.TrimSpace(cells[1])
		if !listOfCode.MatchString(list) {
			return nil, fmt.Errorf("line %d: the packages column is not a list of `package`, `package`: %q", i+1, list)
		}
		r := designRow{line: i + 1, layer: strings.TrimSpace(cells[0])}
		for _, m := range codeSpan.FindAllStringSubmatch(list, -1) {
			r.pkgs = append(r.pkgs, m[1])
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// designName is how design.md names the package (or pattern) pkg: the
// path from the module root, without "internal/".
func designName(pkg string) string { return strings.TrimPrefix(pkg, "internal/") }

// tableDisagreements compares the rows of design.md's table with place
// and the layers ls, both ways, and returns one line per disagreement:
// a row that is no layer, out of order or twice; a package in the wrong
// row, in two, or in none; a package the table lists that place has not.
func tableDisagreements(rows []designRow, place map[string]layer, ls []layer) []string {
	var out []string
	byName := map[string]layer{}
	for _, l := range ls {
		byName[l.name] = l
	}
	seenLayer := map[string]bool{}
	listed := map[string]string{} // design name → layer of the row that lists it
	prev := 0
	for _, r := range rows {
		l, ok := byName[r.layer]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("design.md:%d: row %q is no layer of internal/arch (%s)", r.line, r.layer, layerNames(ls)))
			continue
		case seenLayer[r.layer]:
			out = append(out, fmt.Sprintf("design.md:%d: a second row for %q", r.line, r.layer))
		case l.rank < prev:
			out = append(out, fmt.Sprintf("design.md:%d: row %q is below a higher layer (the table goes bottom up)", r.line, r.layer))
		}
		seenLayer[r.layer], prev = true, l.rank
		for _, p := range r.pkgs {
			if other, dup := listed[p]; dup {
				out = append(out, fmt.Sprintf("design.md:%d: `%s` is listed in %q and again in %q", r.line, p, other, r.layer))
				continue
			}
			listed[p] = r.layer
		}
	}
	for _, l := range ls {
		if !seenLayer[l.name] {
			out = append(out, fmt.Sprintf("design.md §1.1 has no row for the layer %q", l.name))
		}
	}
	names := map[string]string{} // design name → placement entry
	for _, pkg := range keys(place) {
		names[designName(pkg)] = pkg
		row, ok := listed[designName(pkg)]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("design.md §1.1 does not list %s: add `%s` to the row %q", pkg, designName(pkg), place[pkg].name))
		case row != place[pkg].name:
			out = append(out, fmt.Sprintf("design.md §1.1 lists `%s` in %q, placement puts %s in %q", designName(pkg), row, pkg, place[pkg].name))
		}
	}
	for _, p := range keys(listed) {
		if _, ok := names[p]; !ok {
			out = append(out, fmt.Sprintf("design.md §1.1 lists `%s` in %q, which placement does not place (a package is named as its path without internal/)", p, listed[p]))
		}
	}
	return out
}

func layerNames(ls []layer) string {
	var s []string
	for _, l := range ls {
		s = append(s, fmt.Sprintf("%q", l.name))
	}
	return strings.Join(s, ", ")
}

// TestDesignTableMatchesPlacement: the layer table of docs/design.md §1.1
// and placement say the same, so the document a reader trusts cannot fall
// behind the layering the build enforces.
func TestDesignTableMatchesPlacement(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := designTable(string(doc))
	if err != nil {
		t.Fatalf("docs/design.md: %v", err)
	}
	for _, d := range tableDisagreements(rows, placement, layers) {
		t.Error(d)
	}
}

// TestDesignTableChecks shows the comparison at work on a made-up table
// that disagrees with a made-up placement in every way it can.
func TestDesignTableChecks(t *testing.T) {
	doc := strings.Join([]string{
		"## 1. Architecture",
		"### 1.1 Packages and layers",
		"",
		"text",
		"",
		"| layer | packages | what they are |",
		"|---|---|---|",
		"| leaves | `fsys`, `hash`, `walrus` | one mechanism each; `not` a package |",
		"| agent | `agent`, `fsys` | decisions |",
		"| clients, servers, formats | `ghost` | formats |",
		"| agent | `compose` | again |",
		"| binary | `cmd/hermesd` | a layer that is not one |",
		"",
		"| other | `table` | ignored |",
	}, "\n")
	rows, err := designTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 || !slices.Equal(rows[0].pkgs, []string{"fsys", "hash", "walrus"}) || rows[0].line != 8 {
		t.Fatalf("rows = %+v", rows)
	}
	place := map[string]layer{
		"internal/fsys":   leafLayer,
		"internal/hash":   leafLayer,
		"internal/walrus": formatLayer,
		"internal/agent":  agentLayer,
		"internal/unseen": formatLayer,
		"cmd/hermesd":     commandLayer,
		"scripts/...":     toolLayer,
	}
	ls := []layer{leafLayer, formatLayer, agentLayer, commandLayer, toolLayer}
	want := []string{
		"design.md:9: `fsys` is listed in \"leaves\" and again in \"agent\"",
		"design.md:10: row \"clients, servers, formats\" is below a higher layer (the table goes bottom up)",
		"design.md:11: a second row for \"agent\"",
		"design.md:12: row \"binary\" is no layer of internal/arch (\"leaves\", \"clients, servers, formats\", \"agent\", \"commands\", \"tools\")",
		"design.md §1.1 has no row for the layer \"commands\"",
		"design.md §1.1 has no row for the layer \"tools\"",
		"design.md §1.1 does not list cmd/hermesd: add `cmd/hermesd` to the row \"commands\"",
		"design.md §1.1 does not list internal/unseen: add `unseen` to the row \"clients, servers, formats\"",
		"design.md §1.1 lists `walrus` in \"leaves\", placement puts internal/walrus in \"clients, servers, formats\"",
		"design.md §1.1 does not list scripts/...: add `scripts/...` to the row \"tools\"",
		"design.md §1.1 lists `compose` in \"agent\", which placement does not place (a package is named as its path without internal/)",
		"design.md §1.1 lists `ghost` in \"clients, servers, formats\", which placement does not place (a package is named as its path without internal/)",
	}
	if got := tableDisagreements(rows, place, ls); !slices.Equal(got, want) {
		t.Errorf("disagreements:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for _, bad := range []string{
		"# no section",
		"### 1.1 Packages\n\nno table\n\n### 1.2 Next\n| a | `b` | c |",
		"### 1.1 Packages\n\n| layer | packages |\n| leaves | `fsys` |",
		"### 1.1 Packages\n\n| layer | packages |\n|---|---|\n| leaves | `fsys` and `hash` |",
		"### 1.1 Packages\n\n| layer | packages |\n|---|---|\n| leaves |",
	} {
		if rows, err := designTable(bad); err == nil {
			t.Errorf("designTable(%q) = %+v, want an error", bad, rows)
		}
	}
}
