package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/fleet"
)

const fleetHelp = `Subcommands:
  status       show the fleet: its nodes, which node owns each agent, the
               fleet heads, hand-offs in flight, and which node lacks which
               agent's key
  drain [NODE] ask NODE (default: this node, then wait until it owns
               nothing) to hand every agent off and take none (before
               maintenance); it lasts until NODE's process ends

Both read the configuration's cluster section (-config) and talk to etcd
directly: they work from any machine that reaches it, whether or not a
daemon runs there.`

func runFleet(ctx context.Context, env *cmdEnv, args []string) error {
	return group{name: "fleet", tail: "[flags]", help: fleetHelp, verbs: []command{
		{name: "status", run: runFleetStatus},
		{name: "drain", run: runFleetDrain},
	}}.run(ctx, env, args)
}

// fleetTimeout bounds a fleet command's requests to etcd.
const fleetTimeout = 30 * time.Second

// fleetClient loads the configuration and dials its fleet's etcd.
func fleetClient(cfgPath string) (*config.Config, func(), *fleetConn, error) {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return nil, nil, nil, err
	}
	cl := cfg.Cluster
	if cl == nil {
		return nil, nil, nil, usageErrorf("the configuration has no cluster section: this hermesd is not in a fleet")
	}
	conn := fleet.Conn{Endpoints: cl.Endpoints, CAFile: cl.TLS.CAFile, CertFile: cl.TLS.CertFile, KeyFile: cl.TLS.KeyFile, Username: cl.Username}
	if !cl.Password.IsZero() {
		if conn.Password, err = config.ReadSecret(cl.Password); err != nil {
			return nil, nil, nil, fmt.Errorf("cluster.password: %w", err)
		}
	}
	cli, err := fleet.Dial(conn)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, func() { cli.Close() }, &fleetConn{cli: cli, fleet: cl.Fleet}, nil
}

type fleetConn struct {
	cli   *clientv3.Client
	fleet string
}

func runFleetStatus(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "fleet status", "fleet status [-config FILE] [--json]",
		`Show the fleet as etcd holds it: every registered node (draining or
not, the agents whose keys it cannot open), every agent with its owner,
the node the assignment wants for it, its fleet head and any hand-off in
flight. An agent no live node can open, or whose owner is not the node
the assignment wants, is flagged.`)
	cfgPath := configFlag(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("fleet status takes no arguments")
	}
	_, done, fc, err := fleetClient(*cfgPath)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, fleetTimeout)
	defer cancel()
	st, err := fleet.Read(ctx, fc.cli, fc.fleet)
	if err != nil {
		return err
	}
	if *jsonOut {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printFleet(env.stdout, st)
	return nil
}

func printFleet(w io.Writer, st fleet.Status) {
	fmt.Fprintf(w, "fleet %s (etcd revision %d)\n\n", sanitize(st.Fleet), st.Revision)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tOWNS\tDRAINING\tAPI\tLACKS KEYS OF")
	for _, n := range st.Nodes {
		var lacks []string
		for id := range n.Missing {
			lacks = append(lacks, id)
		}
		sort.Strings(lacks)
		fmt.Fprintf(tw, "%s\t%d\t%v\t%s\t%s\n", sanitize(n.Node), n.Owns, n.Draining || n.Drained, sanitize(n.API), sanitize(strings.Join(lacks, ",")))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tOWNER\tWANTED ON\tFLEET HEAD\tVERSION\tNOTE")
	for _, a := range st.Agents {
		head, ver := "-", ""
		if a.Head != nil {
			head, ver = a.Head.Value, fmt.Sprint(a.Head.Version)
		}
		var notes []string
		switch {
		case a.Handoff != nil:
			notes = append(notes, fmt.Sprintf("hand-off %s→%s: %s", a.Handoff.From, a.Handoff.To, a.Handoff.Step))
		case a.Owner == "" && a.Desired == "":
			notes = append(notes, "no live node can open its key")
		case a.Owner == "":
			notes = append(notes, "unowned")
		case a.Desired != "" && a.Owner != a.Desired:
			notes = append(notes, "moving")
		}
		for node, why := range a.Lacking {
			notes = append(notes, fmt.Sprintf("%s lacks its key (%s)", node, why))
		}
		owner := a.Owner
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", sanitize(a.ID), sanitize(owner), sanitize(a.Desired), sanitize(head), ver, sanitize(strings.Join(notes, "; ")))
	}
	tw.Flush()
}

func runFleetDrain(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "fleet drain", "fleet drain [-config FILE] [-wait] [-timeout D] [NODE]",
		`Ask NODE to hand every agent it owns off (its last snapshot and fleet
head first) and take no other, for maintenance. The request is bound to
NODE's lease: it ends when NODE's process stops (a restart takes agents
again).

Without NODE it drains this node (cluster.node of the configuration) and
waits until it owns nothing, printing what is left as it shrinks: what a
preStop hook or ExecStop runs before the process is stopped. With NODE it
returns once the request is recorded unless -wait is given. -timeout
bounds the wait (default: cluster.handoff_timeout plus a minute; the
hand-offs run in parallel, each bounded by handoff_timeout); a wait cut
short exits 1 naming what is left, which then moves after the lease TTL,
restored from its fleet head.`)
	cfgPath := configFlag(fs)
	waitFlag := fs.Bool("wait", false, "wait until NODE owns nothing (the default without NODE)")
	timeout := fs.Duration("timeout", 0, "bound the wait (default: cluster.handoff_timeout + 1m)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageErrorf("fleet drain takes at most one NODE")
	}
	cfg, done, fc, err := fleetClient(*cfgPath)
	if err != nil {
		return err
	}
	defer done()
	node, wait := cfg.Cluster.Node, true
	if fs.NArg() == 1 {
		node, wait = fs.Arg(0), *waitFlag
	}
	rctx, cancel := context.WithTimeout(ctx, fleetTimeout)
	err = fleet.Drain(rctx, fc.cli, fc.fleet, node)
	cancel()
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "node %s is draining: it hands its agents off and takes none\n", sanitize(node))
	if !wait {
		return nil
	}
	limit := *timeout
	if limit <= 0 {
		limit = cfg.Cluster.HandoffTimeout.D() + time.Minute
	}
	return waitDrained(ctx, env.stdout, fc, node, limit)
}

// drainPoll is how often a drain's wait reads the fleet.
const drainPoll = time.Second

// waitDrained waits until node owns no agent (a node that stopped owns
// none: its keys go with its lease), printing each change of what it
// still owns, for at most limit.
func waitDrained(ctx context.Context, out io.Writer, fc *fleetConn, node string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	var left []string
	var lastErr error
	shown := -1
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		rctx, rcancel := context.WithTimeout(ctx, fleetTimeout)
		st, err := fleet.Read(rctx, fc.cli, fc.fleet)
		rcancel()
		if err == nil {
			left, lastErr = left[:0], nil
			moving := 0
			for _, a := range st.Agents {
				if a.Owner == node {
					left = append(left, a.ID)
					if a.Handoff != nil {
						moving++
					}
				}
			}
			if len(left) == 0 {
				fmt.Fprintf(out, "node %s owns no agent (%s)\n", sanitize(node), time.Since(start).Round(time.Millisecond))
				return nil
			}
			if len(left) != shown {
				fmt.Fprintf(out, "node %s owns %d agents, %d being handed off\n", sanitize(node), len(left), moving)
				shown = len(left)
			}
		} else if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if shown < 0 {
				return fmt.Errorf("wait for node %s to drain: %w", sanitize(node), errors.Join(lastErr, ctx.Err()))
			}
			return fmt.Errorf("node %s still owns %d agents after %v: %s", sanitize(node), len(left), limit, sanitize(strings.Join(left, ", ")))
		case <-tick.C:
		}
	}
}
