package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHelpGoesToStdout: every command and verb prints its help on stdout
// and exits 0, asked as CMD -h, CMD --help, CMD -help or hermesd help CMD;
// nothing goes to stderr, so `hermesd CMD --help | less` shows it.
// The verbs of each group are read from the group's own usage line.
func TestHelpGoesToStdout(t *testing.T) {
	run := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		err := Run(t.Context(), args, strings.NewReader(""), &out, &errOut)
		return out.String(), errOut.String(), report(&errOut, err)
	}
	verbs := regexp.MustCompile(`Usage: hermesd [a-z ]+ <([a-z|]+)>`)
	var cmds [][]string
	for _, c := range commands() {
		if c.name != "help" {
			cmds = append(cmds, []string{c.name})
		}
	}
	for i := 0; i < len(cmds); i++ {
		cmd := cmds[i]
		for _, how := range [][]string{
			append(append([]string(nil), cmd...), "-h"),
			append(append([]string(nil), cmd...), "--help"),
			append(append([]string(nil), cmd...), "-help"),
			append([]string{"help"}, cmd...),
		} {
			out, errOut, code := run(how...)
			if code != exitOK || errOut != "" || !strings.Contains(out, "Usage: hermesd "+strings.Join(cmd, " ")) {
				t.Errorf("hermesd %s: exit %d, stdout %d bytes, stderr %q", strings.Join(how, " "), code, len(out), errOut)
			}
			if how[len(how)-1] == "-h" {
				if m := verbs.FindStringSubmatch(out); m != nil && len(cmd) < 3 {
					for _, v := range strings.Split(m[1], "|") {
						cmds = append(cmds, append(append([]string(nil), cmd...), v))
					}
				}
			}
		}
	}
	if len(cmds) < 30 {
		t.Errorf("only %d commands and verbs found: %v", len(cmds), cmds)
	}
	// A mistake still goes to stderr, with the usage, and exits 2.
	out, errOut, code := run("drill", "--nosuch")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "flag provided but not defined: -nosuch") || !strings.Contains(errOut, "Usage: hermesd drill") {
		t.Errorf("a wrong flag: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestConfigErrorOneLine: a configuration error reaches the terminal as
// one line naming the YAML path and line, without escapes or Go types.
func TestConfigErrorOneLine(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "hermesd.yml")
	body := "state_dir: /srv/hermesd\nshutdown_timout: 10s\nagents:\n  - id: a\n    brain_dri: /srv/a\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := report(&errOut, Run(t.Context(), []string{"status", "-config", cfg}, strings.NewReader(""), &out, &errOut))
	want := "hermesd: config " + cfg + ": shutdown_timout (line 2): unknown key; did you mean shutdown_timeout?; " +
		"agents[0].brain_dri (line 5): unknown key; did you mean brain_dir?\n"
	if code != exitUsage || errOut.String() != want {
		t.Fatalf("exit %d, stderr:\n%q\nwant\n%q", code, errOut.String(), want)
	}
}
