// Command hermesd-devnet runs hermesd's world on one machine, for
// development, demos and drills: a go-ethereum chain with the real ENS
// registry and PublicResolver (the agents' names registered and owned by
// the funded dev key), with an agent whose record lives on an L2 also a
// second chain and the CCIP-read gateway between them, the local
// Walrus-compatible server and local Seal key
// servers, all on 127.0.0.1, plus the key files and a ready configuration
// in DIR/hermesd.yml.
//
// It is a command of its own so that the daemon operators run (cmd/hermesd)
// carries no EVM: go-ethereum's core, state, vm and the chain's database
// are linked into this binary only. The daemon talks to this world over
// 127.0.0.1 exactly as it talks to a real chain and a real Walrus, so the
// world outlives a stopped daemon and a daemon outlives a stopped world.
//
// Given a command after "--" (make run: `bin/hermesd run`), it runs that
// command once the world is up, as a supervised child, and stops the world
// when the child exits, with the child's exit status.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ethereum/go-ethereum/node"

	"github.com/hermesd/hermesd/internal/devnet"
)

func main() {
	// Every SIGINT and SIGTERM goes to the child, if there is one; the
	// first also cancels ctx (what stops the world when there is none).
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], &cmdEnv{stdout: os.Stdout, stderr: os.Stderr, signals: sigs})
	stop()
	os.Exit(report(os.Stderr, err))
}

// cmdEnv carries the process's streams and its signals, so tests can run
// the command in-process.
type cmdEnv struct {
	stdout, stderr io.Writer
	signals        <-chan os.Signal // SIGINT and SIGTERM, passed on to the child
}

const usage = `Usage: hermesd-devnet [flags] [-- COMMAND [ARG...]]

Run the local devnet until interrupted: a go-ethereum chain with the real
ENS registry and PublicResolver (the agents' names registered and owned by
the funded dev key), the local Walrus-compatible server and local Seal key
servers, all on 127.0.0.1. It writes the key files and a ready
configuration to DIR/hermesd.yml; the chain is persisted in DIR/chain, so
pointers survive a restart. In another terminal:

  hermesd run -config DIR/hermesd.yml

With a COMMAND after --, it runs COMMAND once the devnet is up, with
HERMESD_CONFIG set to DIR/hermesd.yml, passes every SIGINT and SIGTERM on to
it (once each: a first Ctrl-C lets the daemon flush its pending pointers, a
second aborts the flush), and when COMMAND exits stops the devnet and exits
with COMMAND's status. make run is:

  hermesd-devnet -dir .devnet -seed .devnet/seed -- bin/hermesd run

With -nodes N it also runs an etcd member (a real one, data in DIR/etcd)
and writes one configuration per node of a fleet, DIR/node-1.yml …
DIR/node-N.yml: the same agents and keys, each node with its own state and
brain directories (DIR/node-K/) and HTTP port. A COMMAND then runs once per
node (HERMESD_CONFIG set to its configuration, its lines prefixed with the
node's name); a node that exits or is killed leaves the others running,
and Ctrl-C stops them all. make fleet is:

  hermesd-devnet -dir .devnet-fleet -nodes 3 -seed .devnet/seed -- bin/hermesd run

Exit status: 0 success, 1 failure, 2 usage error, 5 DIR in use by another
hermesd-devnet, 130 interrupted; with a COMMAND, COMMAND's status (with
-nodes, the first failure among the nodes Ctrl-C stopped, or, when every
node exited on its own, the first failure).

Flags:
`

// Run executes one hermesd-devnet invocation. It never calls os.Exit.
func Run(ctx context.Context, args []string, env *cmdEnv) error {
	fs, f := newFlagSet(env)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(env.stdout)
			fmt.Fprint(env.stdout, usage)
			fs.PrintDefaults()
			return nil
		}
		return usageErrorf("run 'hermesd-devnet -h' for the flags") // flag printed what was wrong
	}
	child := fs.Args()
	if i := len(args) - len(child); len(child) > 0 && (i == 0 || args[i-1] != "--") {
		return usageErrorf("unexpected argument %q (a command to run goes after --)", child[0])
	}
	if i := len(args) - len(child); i > 0 && args[i-1] == "--" && len(child) == 0 {
		return usageErrorf("no command after --")
	}
	if err := f.check(); err != nil {
		return err
	}
	opts, err := f.options()
	if err != nil {
		return err
	}
	dn, err := devnet.Start(ctx, opts)
	if errors.Is(err, node.ErrDatadirUsed) {
		return withCode(exitLocked, fmt.Errorf("%s is in use by another hermesd-devnet (is make run already running?); stop it or choose another -dir", opts.Dir))
	}
	if err != nil {
		return err
	}
	fmt.Fprint(env.stdout, banner(dn, child))
	switch {
	case len(child) == 0:
		<-ctx.Done()
	case ctx.Err() != nil:
		err = ctx.Err() // interrupted before the command started
	case len(dn.Nodes) > 0:
		err = superviseNodes(child, dn.Nodes, env)
	default:
		err = supervise(child, dn.ConfigPath, env)
	}
	fmt.Fprintln(env.stderr, "devnet stopping")
	if cerr := dn.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("stopping the devnet: %w", cerr)
	}
	return err
}

func newFlagSet(env *cmdEnv) (*flag.FlagSet, *devnetFlags) {
	fs := flag.NewFlagSet("hermesd-devnet", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {} // -h prints the usage on stdout; a mistake says only what was wrong
	return fs, addDevnetFlags(fs)
}

func orOff(addr string) string {
	if addr == "" {
		return "off"
	}
	return addr
}

// banner says where everything runs and what to do next.
func banner(dn *devnet.Devnet, child []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `devnet running
  chain (JSON-RPC)  %s   chain id %s, ENS registry %s
`, dn.Chain.URL(), dn.Chain.ChainID(), dn.Chain.RegistryAddress().Hex())
	if dn.L2 != nil {
		fmt.Fprintf(&b, "  L2 (JSON-RPC)     %s   chain id %d, records on %s\n  L2 gateway        %s   (%s on L1 → OffchainResolver %s)\n",
			dn.L2.RPC(), dn.L2.ChainID, dn.L2.Resolver().Hex(), strings.TrimSuffix(dn.L2.GatewayURL, "/{sender}/{data}.json"),
			dn.L2.Parent, dn.L2.OffchainResolver.Hex())
	}
	fmt.Fprintf(&b, "  walrus            %s\n", dn.Walrus.URL())
	for i, k := range dn.Seal {
		fmt.Fprintf(&b, "  seal key server %d %s   object %s\n", i+1, k.URL(), k.ObjectID)
	}
	if len(dn.Seal) > 0 {
		fmt.Fprintf(&b, "  seal requester    %s (policy account_based, threshold %d of %d)\n",
			dn.SuiKeyPath, dn.Config.Seal.Threshold, len(dn.Seal))
	}
	fmt.Fprintf(&b, "  names owned by    %s\n  configuration     %s\n", dn.Owner().Hex(), dn.ConfigPath)
	if len(dn.Nodes) > 0 {
		fmt.Fprintf(&b, "  etcd              %s   fleet %s\n", strings.Join(dn.EtcdEndpoints(), ","), dn.Fleet())
		for _, n := range dn.Nodes {
			fmt.Fprintf(&b, "  %-17s %s   http %s, state %s\n", n.Name, n.ConfigPath, orOff(n.HTTP), n.StateDir)
		}
	}
	switch {
	case len(child) == 0 && len(dn.Nodes) > 0:
		fmt.Fprintf(&b, "\nrun the fleet's daemons against it, one per terminal:\n")
		for _, n := range dn.Nodes {
			fmt.Fprintf(&b, "  hermesd run -config %s\n", n.ConfigPath)
		}
	case len(child) == 0:
		fmt.Fprintf(&b, "\nrun the daemon against it:\n  hermesd run -config %s\n", dn.ConfigPath)
	}
	return b.String()
}
