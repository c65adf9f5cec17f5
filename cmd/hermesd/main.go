// Command hermesd keeps an AI agent's brain directory alive beyond any one
// machine: it snapshots the directory into encrypted Walrus blobs, points the
// agent's ENS text record at the newest one, and cold-restores the brain from
// chain plus Walrus alone.
//
// main only maps the error returned by Run to an exit code; everything else
// lives in the subcommand files (cmd_*.go), each with its own flag.FlagSet.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(report(os.Stderr, err))
}

// command is one hermesd subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *cmdEnv, args []string) error
}

// cmdEnv carries the process's standard streams, so tests can run commands
// in-process and capture what they print.
type cmdEnv struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// commands lists every subcommand in the order `hermesd help` shows them.
func commands() []command {
	return []command{
		{"run", "watch, snapshot and publish every configured agent (the daemon)", runRun},
		{"restore", "cold-restore an agent's brain from chain plus Walrus, once", runRestore},
		{"status", "show each agent's snapshot and pointer state", runStatus},
		{"cost", "show what the agents spend, per day and month, beside the naive way", runCost},
		{"log", "list an agent's snapshots: commits, changes, what is restorable", runLog},
		{"diff", "show what changed between two v3 snapshots (trees only)", runDiff},
		{"verify", "check that a snapshot is intact (--read-data: every object)", runVerify},
		{"drill", "amnesia drill: snapshot, cold-restore elsewhere, compare", runDrill},
		{"hash", "print the bundle hash of a directory", runHash},
		{"keygen", "generate a snapshot encryption key file", runKeygen},
		{"blob", "put or get a raw blob on the configured Walrus endpoints", runBlob},
		{"walrus", "run the local Walrus-compatible server", runWalrus},
		{"seal", "run a local Seal key server; create Seal key files", runSeal},
		{"pointer", "get or set an ENS agent-snapshot record; adopt or override a held one", runPointer},
		{"receipts", "add, list and verify signed receipts", runReceipts},
		{"fleet", "show a fleet of nodes on etcd; drain a node before maintenance", runFleet},
		{"transfer", "hand an agent to a new owner: request a handover, show one", runTransfer},
		{"version", "print the version", runVersion},
		{"help", "show this help", nil},
	}
}

// Run executes one hermesd invocation. It never calls os.Exit.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	env := &cmdEnv{stdin: stdin, stdout: stdout, stderr: stderr}
	if errPlatform != nil {
		return errPlatform
	}
	if len(args) == 0 {
		printUsage(stderr)
		return errUsageShown
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			// hermesd help CMD [VERB...]: what CMD [VERB...] -h prints.
			n := 1
			for n < len(rest) && !strings.HasPrefix(rest[n], "-") {
				n++
			}
			return Run(ctx, append(append([]string(nil), rest[:n]...), "-h"), stdin, stdout, stderr)
		}
		printUsage(stdout)
		return nil
	case "-version", "--version":
		name = "version"
	}
	for _, c := range commands() {
		if c.name == name && c.run != nil {
			return c.run(ctx, env, rest)
		}
	}
	if name == "devnet" {
		return usageErrorf("the local devnet is its own command now: hermesd-devnet (make run starts it with the daemon)")
	}
	return usageErrorf("unknown command %q (see 'hermesd help')", name)
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `hermesd keeps an AI agent's brain alive beyond any one machine.

Usage:
  hermesd <command> [flags] [args]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run 'hermesd <command> -h' for a command's flags.

Every command that prints results accepts --json. The configuration file is
read from -config, else $HERMESD_CONFIG, else /etc/hermesd/hermesd.yml.
Flags may come before, between or after arguments; a flag's value may begin
with "-" (--expect -xyz, or --expect=-xyz), and so may an argument that is a
blob id. Anything after "--" is an argument.
`)
	fmt.Fprint(w, exitCodeHelp)
}
