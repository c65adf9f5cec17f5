package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/daemon"
	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/state"
)

func runStatus(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "status", "status [-config FILE] [--json]",
		`Show each agent's state: phase, bundle hash, last verified snapshot, the
pointer published on ENS and any pointer still pending. Asks the running
daemon (http.listen) and falls back to the state directory when it is not
running. Exits 1 when the daemon runs but is not ready.`)
	cfgPath := configFlag(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("status takes no arguments")
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	rep := statusReport{StateDir: cfg.StateDir}
	live, ok, err := fetchStatus(ctx, cfg.HTTP.Listen, len(cfg.Agents))
	if err != nil {
		// The daemon runs: its state files are its own, and showing them
		// as a stopped daemon's would mislead.
		return err
	}
	if ok {
		rep.Running, rep.Ready, rep.Agents, rep.Cost = true, live.Ready, live.Agents, live.Cost
	} else {
		for _, ac := range cfg.Agents {
			st, err := state.LoadAgent(state.AgentPath(cfg.StateDir, ac.ID))
			if err != nil {
				return err
			}
			s := agent.Status{ID: ac.ID, ENSName: ac.ENSName, BrainDir: ac.BrainDir, Phase: agent.PhaseStopped,
				Origin: st.Origin, Last: st.Last, Published: st.Published, Pending: st.Pending, Hold: st.Hold,
				Transferred: st.Transferred, Restore: agent.RestoreReportOf(st.Restored)}
			if st.Last != nil {
				s.BundleHash = st.Last.BundleHash
			}
			if p := st.Pending; p != nil && p.Written != nil && p.Written.Value == p.Value {
				s.PointerNote = fmt.Sprintf("written on chain %d (tx %s) at %s, not visible from L1 when last checked",
					p.Written.ChainID, p.Written.TxHash, p.Written.At.Format(time.RFC3339))
			}
			rep.Agents = append(rep.Agents, s)
		}
	}
	if rep.Cost == nil {
		ids := make([]string, len(cfg.Agents))
		for i, a := range cfg.Agents {
			ids[i] = a.ID
		}
		// A damaged ledger leaves the status to show; the daemon moves it
		// aside when it next records.
		if c, err := costReport(cfg, ids, time.Now()); err != nil {
			fmt.Fprintf(env.stderr, "hermesd: spend not shown: %s\n", sanitize(err.Error()))
		} else {
			rep.Cost = &c
		}
	}
	if *jsonOut {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printStatus(env.stdout, rep)
	}
	if rep.Running && !rep.Ready {
		return withCode(exitFailure, fmt.Errorf("not ready: at least one agent is not restored or is failing"))
	}
	return nil
}

type statusReport struct {
	StateDir string         `json:"stateDir"`
	Running  bool           `json:"running"`
	Ready    bool           `json:"ready"`
	Agents   []agent.Status `json:"agents"`
	// Cost is what the agents spent and spend (hermesd cost).
	Cost *ledger.Report `json:"cost,omitempty"`
}

// Bounds of a status request. A daemon that runs answers its headers at
// once; its body is written one agent at a time and grows with the
// agents (about 3 KB each, at most about 100 KB with a restore's full
// report), so its size and time limits do too: a fixed 16 MiB read as
// "not running" any daemon of more than ~5,800 agents.
const (
	statusHeaderTimeout = 2 * time.Second
	statusBodyBase      = 16 << 20
	statusBodyPerAgent  = 256 << 10
	statusTimePerAgent  = 5 * time.Millisecond
)

// statusBodyLimit is the most of a /v1/status answer read for agents
// agents.
func statusBodyLimit(agents int) int64 {
	return statusBodyBase + int64(max(agents, 0))*statusBodyPerAgent
}

// fetchStatus asks a running daemon for its status. ok is false when no
// daemon answers at listen (none configured, none listening, or not in
// time); an answer that comes but cannot be read whole is an error, since
// the daemon runs. agents (the configuration's) sizes the limits.
func fetchStatus(ctx context.Context, listen string, agents int) (rep daemon.StatusReport, ok bool, err error) {
	if listen == "" {
		return rep, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, statusHeaderTimeout+time.Duration(max(agents, 0))*statusTimePerAgent)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listen+"/v1/status", nil)
	if err != nil {
		return rep, false, nil
	}
	// Only the headers have the short timeout: a daemon that does not
	// answer them in time is taken as not running, as before.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = statusHeaderTimeout
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return rep, false, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rep, false, nil
	}
	limit := statusBodyLimit(agents)
	lr := &io.LimitedReader{R: resp.Body, N: limit}
	dec := json.NewDecoder(lr)
	if err := dec.Decode(&rep); err != nil {
		if lr.N <= 0 {
			return rep, false, fmt.Errorf("the daemon at %s answered more than %d bytes of status for %d agents", listen, limit, agents)
		}
		return rep, false, fmt.Errorf("the daemon at %s runs, but its status could not be read: %w", listen, err)
	}
	return rep, true, nil
}

func printStatus(w io.Writer, rep statusReport) {
	switch {
	case !rep.Running:
		fmt.Fprintf(w, "hermesd is not running (state from %s)\n\n", rep.StateDir)
	case rep.Ready:
		fmt.Fprintln(w, "hermesd is running; all agents ready")
		fmt.Fprintln(w)
	default:
		fmt.Fprintln(w, "hermesd is running; NOT READY")
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tPHASE\tBUNDLE HASH\tLAST SNAPSHOT\tAGE\tPUBLISHED\tPENDING")
	now := time.Now()
	for _, a := range rep.Agents {
		last, age := "-", "-"
		if a.Last != nil {
			last = a.Last.BlobID
			age = now.Sub(a.Last.CreatedAt).Round(time.Second).String()
		}
		pub := "-"
		switch {
		case a.ENSName == "":
			pub = "(no ENS name)"
		case a.Published != "":
			pub = short(a.Published)
		}
		if a.PointerUnverified != "" {
			pub += " (" + a.PointerUnverified + ")"
		}
		pending := "-"
		if a.Pending != nil {
			pending = fmt.Sprintf("%s for %s", short(a.Pending.Value), now.Sub(a.Pending.Since).Round(time.Second))
			switch {
			case a.Pending.LastErr != "":
				pending += " (" + a.Pending.LastErr + ")"
			case a.PointerNote != "":
				pending += " (" + a.PointerNote + ")"
			}
		}
		phase := string(a.Phase)
		if a.Reason != "" {
			phase += ": " + a.Reason
		}
		if a.Hold != nil {
			pending += " HELD: " + a.Hold.Reason
		}
		if a.PointerMisrouted != "" {
			pending += " NOT WRITTEN: " + a.PointerMisrouted
		}
		if a.LastError != "" {
			phase += " (last snapshot failed: " + a.LastError + ")"
		}
		if a.Transferred != nil && a.Phase == agent.PhaseStopped {
			phase += " (transferred: " + a.Transferred.Reason + ")"
		}
		if a.KeyID != "" {
			phase += " [key " + a.KeyID + "]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, phase, short(a.BundleHash), last, age, pub, pending)
	}
	tw.Flush()
	// What a restore left out or could not verify is never silent.
	for _, a := range rep.Agents {
		r := a.Restore
		if r == nil {
			continue
		}
		for _, x := range []struct {
			what  string
			lines []string
		}{{"NOT VERIFIED", r.Unchecked}, {"warning", r.Warnings}, {"stripped", r.Stripped}, {"skipped", r.Skipped}, {"note", r.Notes}} {
			for _, l := range x.lines {
				fmt.Fprintf(w, "%s: restore of %s: %s: %s\n", a.ID, sanitize(r.BlobID), x.what, sanitize(l))
			}
		}
		if r.Omitted > 0 {
			fmt.Fprintf(w, "%s: restore of %s: %d more lines not kept (the restore's own output and log list them all)\n", a.ID, sanitize(r.BlobID), r.Omitted)
		}
	}
	if rep.Cost != nil && len(rep.Cost.Agents) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Spend (per month at the recent rate; details: hermesd cost):")
		// Indented: a line of it never starts with an agent's id, as the
		// status table's do.
		printCostSummary(w, *rep.Cost, "  ")
		if n := rep.Cost.Total.Recorded.Clamped; n > 0 {
			fmt.Fprintf(w, "  %s\n", clampedNote(n))
		}
	}
}

func short(s string) string {
	if len(s) > 14 {
		return s[:12] + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}
