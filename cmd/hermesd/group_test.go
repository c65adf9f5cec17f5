package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// Every command group prints its verbs when called bare (exit 2) or asked
// for help (exit 0), runs the verb named, and names the verbs it knows
// when given another.
func TestGroups(t *testing.T) {
	groups := []struct {
		args  []string
		verbs string // as the usage line lists them
		want  string // as the unknown-verb error lists them
	}{
		{[]string{"blob"}, "<put|get>", "put or get"},
		{[]string{"pointer"}, "<get|set|adopt|override|transfer|move>", "get, set, adopt, override, transfer or move"},
		{[]string{"receipts"}, "<add|list|verify|quarantine>", "add, list, verify or quarantine"},
		{[]string{"receipts", "quarantine"}, "<list|purge> [flags] AGENT", "list or purge"},
		{[]string{"seal"}, "<serve|keygen|pubkey|check>", "serve, keygen, pubkey or check"},
		{[]string{"transfer"}, "<request|show|export>", "request, show or export"},
		{[]string{"walrus"}, "<serve>", "(want serve)"},
	}
	for _, g := range groups {
		name := strings.Join(g.args, " ")
		t.Run(name, func(t *testing.T) {
			run := func(extra ...string) (string, string, error) {
				var stdout, stderr bytes.Buffer
				err := Run(context.Background(), append(append([]string{}, g.args...), extra...), strings.NewReader(""), &stdout, &stderr)
				return stdout.String(), stderr.String(), err
			}
			_, stderr, err := run()
			if !errors.Is(err, errUsageShown) || exitCode(err) != exitUsage || !strings.Contains(stderr, "Usage: hermesd "+name+" "+g.verbs) {
				t.Errorf("bare: %v (exit %d), stderr %q", err, exitCode(err), stderr)
			}
			stdout, _, err := run("-h")
			if err != nil || !strings.Contains(stdout, "Usage: hermesd "+name+" "+g.verbs) {
				t.Errorf("-h: %v, stdout %q", err, stdout)
			}
			_, _, err = run("frob")
			if exitCode(err) != exitUsage || err == nil || !strings.Contains(err.Error(), `unknown subcommand "frob"`) || !strings.Contains(err.Error(), g.want) {
				t.Errorf("unknown verb: %v (exit %d)", err, exitCode(err))
			}
		})
	}
	// The verb runs: its own flag set answers -h, on stdout.
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), []string{"blob", "put", "-h"}, strings.NewReader(""), &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(stdout.String(), "Usage: hermesd blob put FILE") || stderr.Len() > 0 {
		t.Errorf("blob put -h: %v, %q %q", err, stdout.String(), stderr.String())
	}
}

func TestOrList(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a or b"}, {[]string{"a", "b", "c"}, "a, b or c"},
	} {
		if got := orList(c.in); got != c.want {
			t.Errorf("orList(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
