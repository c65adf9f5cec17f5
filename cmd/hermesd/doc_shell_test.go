package main

// The documentation's commands, run as written. A block of README.md or
// docs/*.md is marked <!-- tested-by: TestName/id --> on the line before
// its opening fence; the test named there reads it with docBlock(t, "id")
// and runs each of its lines, in order, in a checkout: a scratch directory
// laid out like a developer's checkout after `make run`, where the
// commands run unchanged. TestDocCommandsTested (internal/arch) checks the
// other half: that every shell block is marked and its test reads it.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// docMarker marks a block with the test that reads it and its id (the
// same pattern internal/arch checks).
var docMarker = regexp.MustCompile(`^<!-- tested-by: (Test\w+)/([a-z0-9-]+) -->$`)

// docLines is one block of the documentation, read by a test.
type docLines struct {
	t     *testing.T
	where string // page:line of the opening fence
	id    string
	lines []string // the block's lines, blank lines and whole-line comments left out
	next  int
}

// docBlock reads the block marked id in README.md or docs/*.md. The
// marker must name the test reading it, and the test fails at its end if
// it did not take every line of the block.
func docBlock(t *testing.T, id string) *docLines {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(repoRoot, "README.md")}, pages...)
	var found []*docLines
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i+1 < len(lines); i++ {
			m := docMarker.FindStringSubmatch(lines[i])
			if m == nil || m[2] != id {
				continue
			}
			rel, _ := filepath.Rel(repoRoot, p)
			d := &docLines{t: t, where: fmt.Sprintf("%s:%d", rel, i+2), id: id}
			if test, _, _ := strings.Cut(t.Name(), "/"); m[1] != test {
				t.Fatalf("%s: block %s is marked as tested by %s, not by %s", d.where, id, m[1], test)
			}
			if !strings.HasPrefix(lines[i+1], "```") {
				t.Fatalf("%s: the marker of block %s is not followed by a block", d.where, id)
			}
			closed := false
			for j := i + 2; j < len(lines); j++ {
				if strings.TrimSpace(lines[j]) == "```" {
					closed = true
					break
				}
				if l := strings.TrimSpace(lines[j]); l != "" && !strings.HasPrefix(l, "#") {
					d.lines = append(d.lines, lines[j])
				}
			}
			if !closed || len(d.lines) == 0 {
				t.Fatalf("%s: block %s is empty or not closed", d.where, id)
			}
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d blocks of README.md and docs/*.md are marked %q, want 1", len(found), id)
	}
	d := found[0]
	t.Cleanup(func() {
		if d.next < len(d.lines) {
			t.Errorf("%s: the test left lines of block %s unrun: %q", d.where, id, d.lines[d.next:])
		}
	})
	return d
}

// take returns the block's next line, which must contain want: what the
// test expects to run there, so that a reordered or rewritten block fails
// clearly rather than running a command the test then misjudges.
func (d *docLines) take(want string) string {
	d.t.Helper()
	if d.next >= len(d.lines) {
		d.t.Fatalf("%s: block %s has no line left, want one with %q", d.where, d.id, want)
	}
	l := d.lines[d.next]
	if !strings.Contains(l, want) {
		d.t.Fatalf("%s: block %s, line %d is %q, want one with %q", d.where, d.id, d.next+1, l, want)
	}
	d.next++
	return l
}

// text returns the whole block (an output the docs show), taking every line.
func (d *docLines) text() string {
	d.next = len(d.lines)
	return strings.Join(d.lines, "\n")
}

// A checkout is a scratch copy of a developer's checkout in which the
// documentation's commands run as written: bin/ holds the binaries this
// test process built (what `make run` builds), scripts/, examples/,
// .deps/ and the Makefile are the repository's, and .devnet/ is its own.
// Its devnet listens on free ports of its own instead of the fixed ones
// (bin/hermesd-devnet passes them on), and the addresses the docs name —
// the devnet's defaults — are rewritten to them. That, and nothing else,
// is changed in a command.
type checkout struct {
	t    *testing.T
	w    *e2eWorld
	dir  string
	addr *strings.Replacer // the devnet's default addresses → this checkout's
	// chainPort is the L1 chain's port (the L2 and its gateway follow it).
	chainPort int
}

// The devnet's default addresses, as the docs name them.
const (
	docChainAddr   = "127.0.0.1:18545"
	docL2Addr      = "127.0.0.1:18546"
	docGatewayAddr = "127.0.0.1:18547"
	docWalrusAddr  = "127.0.0.1:31415"
	docHTTPAddr    = "127.0.0.1:9797"
)

func newCheckout(t *testing.T, w *e2eWorld) *checkout {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	c := &checkout{t: t, w: w, dir: t.TempDir()}
	c.chainPort, _ = strconv.Atoi(devnetChainPort(t))
	walrusPort := loopbackPort(t)
	if err := os.Mkdir(filepath.Join(c.dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hermesdBinary(t), filepath.Join(c.dir, "bin", "hermesd")); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\n# the devnet of this checkout, on ports of its own\nexec %q -chain-port %d -walrus-port %s -http %s -shards %d \"$@\"\n",
		devnetBinary(t), c.chainPort, walrusPort, w.http, e2eShards)
	if err := os.WriteFile(filepath.Join(c.dir, "bin", "hermesd-devnet"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"scripts", "examples", ".deps", "Makefile"} {
		if err := os.Symlink(filepath.Join(root, name), filepath.Join(c.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	c.addr = strings.NewReplacer(
		docChainAddr, fmt.Sprintf("127.0.0.1:%d", c.chainPort),
		docL2Addr, fmt.Sprintf("127.0.0.1:%d", c.chainPort+1),
		docGatewayAddr, fmt.Sprintf("127.0.0.1:%d", c.chainPort+2),
		docWalrusAddr, "127.0.0.1:"+walrusPort,
		docHTTPAddr, w.http,
	)
	return c
}

// path is a path inside the checkout.
func (c *checkout) path(rel string) string { return filepath.Join(c.dir, filepath.FromSlash(rel)) }

// expand turns text the docs show into what this checkout shows: its
// addresses, and its absolute path where the docs write "…".
func (c *checkout) expand(s string) string {
	return strings.ReplaceAll(c.addr.Replace(s), "…/", c.dir+"/")
}

// run runs one line to completion as a shell in the checkout would and
// returns its exit code and output. `export NAME=VALUE` sets a variable
// for every later line; `make TARGET` runs what the Makefile says.
func (c *checkout) run(line string) (int, string, string) {
	c.t.Helper()
	if name, value, ok := exported(line); ok {
		c.w.extraEnv = append(c.w.extraEnv, name+"="+value)
		return 0, "", ""
	}
	if target, ok := strings.CutPrefix(bare(line), "make "); ok {
		var code int
		var stdout, stderr string
		for _, cmd := range c.makeCommands(strings.TrimSpace(target)) {
			if code, stdout, stderr = c.run(cmd); code != 0 {
				break
			}
		}
		return code, stdout, stderr
	}
	c.w.runs++
	fmt.Fprintf(c.w.logf, "=== %s #%d: %s\n", filepath.Base(c.dir), c.w.runs, line)
	ctx, cancel := context.WithTimeout(c.t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", c.addr.Replace(line))
	cmd.Dir, cmd.Env = c.dir, c.w.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	fmt.Fprintf(c.w.logf, "--- stdout:\n%s--- stderr:\n%s--- exit: %v\n", stdout.String(), stderr.String(), err)
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		c.t.Fatalf("%s: %v", line, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// mustRun is run for a line that must succeed; it returns the output.
func (c *checkout) mustRun(line string) string {
	c.t.Helper()
	code, stdout, stderr := c.run(line)
	if code != 0 {
		c.t.Fatalf("%s: exit %d\n%s%s", line, code, stdout, stderr)
	}
	return stdout
}

// start starts a line that runs until stopped (a daemon, the devnet, a
// line ending in &) as a terminal's foreground job: in a process group of
// its own, which interrupt sends Ctrl-C to. For `make TARGET` the
// target's earlier commands run to completion first.
func (c *checkout) start(line string) *hermesdProc {
	c.t.Helper()
	line = strings.TrimSpace(strings.TrimSuffix(bare(line), "&"))
	if target, ok := strings.CutPrefix(line, "make "); ok {
		cmds := c.makeCommands(strings.TrimSpace(target))
		for _, cmd := range cmds[:len(cmds)-1] {
			c.mustRun(cmd)
		}
		line = cmds[len(cmds)-1]
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		c.t.Fatal(err)
	}
	return c.w.startBinary(bash, &syscall.SysProcAttr{Setpgid: true}, "-c", "cd "+shellQuote(c.dir)+" && exec "+c.addr.Replace(line))
}

// interrupt presses Ctrl-C in p's terminal and waits for it to exit 0.
func (c *checkout) interrupt(p *hermesdProc) {
	c.t.Helper()
	if err := syscall.Kill(-p.pid(), syscall.SIGINT); err != nil {
		c.t.Fatal(err)
	}
	if code := p.wait(time.Minute); code != 0 {
		c.t.Fatalf("exit %d after Ctrl-C:\n%s", code, p.out.String())
	}
}

// ranByCI checks that a line is `make TARGET...` with targets that CI
// runs itself (.ci/run): the one line of the docs a test cannot run from
// inside the suite it starts.
func (c *checkout) ranByCI(line string) {
	c.t.Helper()
	targets, ok := strings.CutPrefix(bare(line), "make ")
	if !ok {
		c.t.Fatalf("%q is not a make command, which CI could run", line)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	if err != nil {
		c.t.Fatal(err)
	}
	var ci []string
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "make "); ok {
			ci = append(ci, strings.Fields(rest)...)
		}
	}
	for _, target := range strings.Fields(targets) {
		if !slices.Contains(ci, target) {
			c.t.Fatalf("%q: .ci/run does not run make %s (it runs make %v)", line, target, ci)
		}
	}
}

// shellComment is a comment at the end of a line.
var shellComment = regexp.MustCompile(`\s+#.*$`)

// bare is a line without its comment and surrounding space. (A line
// holding " #" inside quotes loses its tail too: the lines this is used
// for — make, export, a background job — hold no quotes.)
func bare(line string) string { return strings.TrimSpace(shellComment.ReplaceAllString(line, "")) }

// exported parses `export NAME=VALUE` (a value without quotes or
// expansions, as the docs write them).
func exported(line string) (string, string, bool) {
	rest, ok := strings.CutPrefix(bare(line), "export ")
	if !ok {
		return "", "", false
	}
	name, value, ok := strings.Cut(rest, "=")
	return name, value, ok && !strings.ContainsAny(value, "$'\"` ")
}

// makeCommands is what `make target` runs in the checkout, prerequisites
// first, with the Makefile's variables expanded: the Makefile's own
// recipes, but for the targets that build bin/ — this test process built
// those binaries already, and a checkout's bin/ holds them.
func (c *checkout) makeCommands(target string) []string {
	c.t.Helper()
	provided := map[string]bool{"build": true, "build-devnet": true}
	b, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		c.t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	vars := map[string]string{}
	rules := map[string][]string{} // target → prerequisites
	recipes := map[string][]string{}
	assign := regexp.MustCompile(`^([A-Z_]+)\s*(?::=|\?=|=)\s*(.*)$`)
	rule := regexp.MustCompile(`^([a-z][a-z0-9-]*):(.*)$`)
	current := "" // the rule whose recipe the tab-indented lines are
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "\t") {
			if r := strings.TrimSpace(l); current != "" && r != "" && !strings.HasPrefix(r, "#") {
				recipes[current] = append(recipes[current], strings.TrimPrefix(r, "@"))
			}
			continue
		}
		current = ""
		if m := assign.FindStringSubmatch(l); m != nil {
			vars[m[1]] = strings.TrimSpace(m[2])
		} else if m := rule.FindStringSubmatch(l); m != nil {
			current = m[1]
			rules[current] = strings.Fields(m[2])
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Z_]+)\)`)
	var expand func(s string, depth int) string
	expand = func(s string, depth int) string {
		if depth > 8 {
			c.t.Fatalf("Makefile: variables nest too deep in %q", s)
		}
		return ref.ReplaceAllStringFunc(s, func(r string) string {
			name := ref.FindStringSubmatch(r)[1]
			v, ok := vars[name]
			if !ok {
				c.t.Fatalf("Makefile: $(%s) is not defined", name)
			}
			return expand(v, depth+1)
		})
	}
	var cmds []string
	done := map[string]bool{}
	var visit func(t string)
	visit = func(t string) {
		if done[t] || provided[t] {
			return
		}
		done[t] = true
		prereqs, ok := rules[t]
		if !ok {
			c.t.Fatalf("the Makefile has no target %q", t)
		}
		for _, p := range prereqs {
			visit(p)
		}
		for _, r := range recipes[t] {
			r = strings.ReplaceAll(expand(r, 0), "$$", "$")
			if strings.Contains(r, "$") {
				c.t.Fatalf("Makefile: target %s runs %q, which this checkout cannot run as written", t, r)
			}
			cmds = append(cmds, r)
		}
	}
	visit(target)
	if len(cmds) == 0 {
		c.t.Fatalf("make %s runs nothing in a checkout", target)
	}
	return cmds
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
