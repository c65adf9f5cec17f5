package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/state"
)

const receiptsHelp = `Subcommands:
  add --agent ID [FILE|-]  verify receipts (ndjson, or one JSON receipt) and
                           append the new ones to the agent's receipt log
  list AGENT               print an agent's receipts, newest first
  verify FILE|-            check the signature of every receipt in a file
  quarantine list AGENT    print what was set aside instead of imported
  quarantine purge AGENT   delete an agent's quarantined lines

An agent's log is <state_dir>/agents/<id>/receipts.log. The state directory
comes from the configuration (-config) or --state-dir, which needs no
configuration file. Trusted operators are receipts.trusted, the address of
receipts.signer, and every --trust ADDRESS. Run 'hermesd receipts add -h'
(list, verify, quarantine list, quarantine purge) for their flags.`

func runReceipts(ctx context.Context, env *cmdEnv, args []string) error {
	return group{name: "receipts", tail: "[flags]", help: receiptsHelp, verbs: []command{
		{name: "add", run: runReceiptsAdd},
		{name: "list", run: runReceiptsList},
		{name: "verify", run: runReceiptsVerify},
		{name: "quarantine", run: runReceiptsQuarantine},
	}}.run(ctx, env, args)
}

// receiptsFlags are the flags the receipts subcommands share.
type receiptsFlags struct {
	config   string
	stateDir string
	trust    []string
}

func (f *receiptsFlags) register(fs *flag.FlagSet, stateDir bool) {
	fs.StringVar(&f.config, "config", "", "configuration `FILE` (default $"+config.EnvPath+", else "+config.DefaultPath+")")
	if stateDir {
		fs.StringVar(&f.stateDir, "state-dir", "", "state `DIR` (overrides state_dir; without -config no configuration file is read)")
	}
	fs.Func("trust", "also trust operator `ADDRESS` (repeatable)", func(s string) error {
		f.trust = append(f.trust, s)
		return nil
	})
}

// loadConfig returns the configuration, or nil when the command can do
// without one: --state-dir given (for add and list), or no file named and
// none at the default path (for verify).
func (f *receiptsFlags) loadConfig(needState bool) (*config.Config, error) {
	named := f.config != "" || os.Getenv(config.EnvPath) != ""
	if !named {
		if needState && f.stateDir != "" {
			return nil, nil
		}
		if !needState {
			if _, err := os.Stat(config.DefaultPath); err != nil {
				return nil, nil
			}
		}
	}
	return loadConfig(f.config)
}

// trusted collects the trusted operator addresses. The configured receipt
// signer is trusted as the daemon trusts it; if its key cannot be read here
// (an environment variable only the service has, say) that is a warning.
func (f *receiptsFlags) trusted(env *cmdEnv, cfg *config.Config) ([]common.Address, error) {
	addrs, err := receipts.ParseAddresses(f.trust)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	if cfg != nil {
		conf, warn, err := compose.Trusted(cfg)
		if err != nil {
			return nil, withCode(exitUsage, err)
		}
		if warn != nil {
			fmt.Fprintf(env.stderr, "hermesd: warning: %v\n", warn)
		}
		for _, a := range conf {
			if !receiptsHasAddr(addrs, a) {
				addrs = append(addrs, a)
			}
		}
	}
	return addrs, nil
}

func receiptsHasAddr(list []common.Address, a common.Address) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

// agentLog resolves the state directory and checks the agent id. With a
// configuration (and no --state-dir) the agent must be configured.
func (f *receiptsFlags) agentLog(cfg *config.Config, id string) (stateDir, path string, err error) {
	if err := receipts.CheckAgentID(id); err != nil {
		return "", "", withCode(exitUsage, err)
	}
	stateDir = f.stateDir
	if stateDir == "" {
		if cfg == nil {
			return "", "", usageErrorf("receipts: no state directory: pass -config FILE or --state-dir DIR")
		}
		if _, err := cfg.Agent(id); err != nil {
			return "", "", withCode(exitUsage, err)
		}
		stateDir = cfg.StateDir
	}
	if stateDir, err = filepath.Abs(stateDir); err != nil {
		return "", "", fmt.Errorf("receipts: %w", err)
	}
	return stateDir, receipts.LogPath(stateDir, id), nil
}

// openReceiptsInput opens FILE, or standard input for "" and "-".
func openReceiptsInput(env *cmdEnv, name string) (io.Reader, func(), error) {
	if name == "" || name == "-" {
		return env.stdin, func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, withCode(exitNotFound, err)
		}
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

// receiptInput makes one pretty-printed JSON receipt readable as one line;
// anything else passes through as ndjson. Only an input that ends within
// the size limit of one receipt can be a single receipt.
func receiptInput(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, receipts.MaxReceiptSize+2)
	head, err := br.Peek(receipts.MaxReceiptSize + 1)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("read input: %w", err)
	}
	if err == io.EOF {
		t := bytes.TrimSpace(head)
		if len(t) > 0 && t[0] == '{' && bytes.IndexByte(t, '\n') >= 0 && json.Valid(t) {
			var c bytes.Buffer
			if err := json.Compact(&c, t); err == nil {
				return &c, nil
			}
		}
	}
	return br, nil
}

// quarantineLimits are the configured bounds of a quarantine file; without
// a configuration the receipts package's defaults apply (as they do for
// the daemon's defaults).
func quarantineLimits(cfg *config.Config) receipts.QuarantineLimits {
	if cfg == nil {
		return receipts.QuarantineLimits{}
	}
	return receipts.QuarantineLimits{MaxBytes: int64(cfg.Receipts.QuarantineMaxBytes), MaxCount: cfg.Receipts.QuarantineMaxCount}
}

const receiptsAddHelp = `Verify receipts and append the new ones (by callId) to an agent's receipt
log, as the daemon's POST /v1/agents/{id}/receipts does. The input is
ndjson or one JSON receipt, from FILE or standard input. Only receipts signed
by a trusted operator enter the log (and so the snapshots). Everything else
(unsigned, bad signature, unknown signer, not a receipt, a tokenId beyond
what JavaScript holds exactly) follows --policy: quarantine it (set aside in
receipts.log.quarantine beside the log, within its size bound) or reject the
whole input (exit 3, log unchanged).

An agent's snapshots carry only its own token's receipts (agents[].token_id).
With a configuration, a receipt of another configured agent's token goes to
that agent's log; one of a token no agent holds follows --policy, with the
reason. (With --state-dir and no configuration no token is known: every
trusted receipt enters the log, and snapshots still export only the agent's
own token's.)

The daemon holds the state directory while it runs; stop it, or POST the
receipts to it instead.`

func runReceiptsAdd(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "receipts add",
		"receipts add [-config FILE | --state-dir DIR] --agent ID [--policy quarantine|reject] [--trust ADDRESS]... [--json] [FILE|-]",
		receiptsAddHelp)
	var rf receiptsFlags
	rf.register(fs, true)
	agentID := fs.String("agent", "", "agent `ID` (required)")
	policyName := fs.String("policy", "", "what to do with lines that are not receipts of a trusted operator: quarantine or reject (default receipts.import_policy, else quarantine)")
	jsonOut := fs.Bool("json", false, "print the import report as one JSON object")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *agentID == "" {
		return usageErrorf("receipts add: --agent ID is required")
	}
	if len(pos) > 1 {
		return usageErrorf("receipts add: at most one FILE")
	}
	file := ""
	if len(pos) == 1 {
		file = pos[0]
	}
	cfg, err := rf.loadConfig(true)
	if err != nil {
		return err
	}
	stateDir, logPath, err := rf.agentLog(cfg, *agentID)
	if err != nil {
		return err
	}
	if *policyName == "" && cfg != nil {
		*policyName = cfg.Receipts.ImportPolicy
	}
	policy := receipts.PolicyQuarantine
	if *policyName != "" {
		if policy, err = receipts.ParsePolicy(*policyName); err != nil {
			return withCode(exitUsage, err)
		}
	}
	trusted, err := rf.trusted(env, cfg)
	if err != nil {
		return err
	}
	in, closeIn, err := openReceiptsInput(env, file)
	if err != nil {
		return err
	}
	defer closeIn()
	input, err := receiptInput(in)
	if err != nil {
		return err
	}

	sd, err := state.Open(stateDir, stateOptions(cfg))
	if err != nil {
		if errors.Is(err, state.ErrLocked) {
			return fmt.Errorf("%w; stop the daemon or POST the receipts to its /v1/agents/%s/receipts", err, *agentID)
		}
		return err
	}
	defer sd.Close()
	logger, err := newLogger(env.stderr, "warn", "text")
	if err != nil {
		return err
	}
	rl, err := receipts.OpenLog(logPath, receipts.Options{Logger: logger, Repair: true, Quarantine: quarantineLimits(cfg)})
	if err != nil {
		return err
	}
	defer rl.Close()
	var route *receipts.Route
	if cfg != nil {
		// Receipts of another configured agent's token go to its log
		// (this process holds the state directory); others are
		// quarantined with the reason.
		others := map[string]*receipts.Log{}
		defer func() {
			for _, l := range others {
				if l != nil {
					l.Close()
				}
			}
		}()
		route = compose.ReceiptRoute(cfg, *agentID, func(holder string) *receipts.Log {
			if l, ok := others[holder]; ok {
				return l
			}
			l, err := receipts.OpenLog(receipts.LogPath(stateDir, holder), receipts.Options{Logger: logger, Repair: true, Quarantine: quarantineLimits(cfg)})
			if err != nil {
				logger.Warn("cannot open the receipt log of the agent holding a token; its receipts are quarantined", "agent", holder, "error", err)
			}
			others[holder] = l
			return l
		})
	}
	rep, ierr := rl.ImportRouted(ctx, input, policy, trusted, route)
	if *jsonOut {
		out := struct {
			Agent  string `json:"agent"`
			Log    string `json:"log"`
			Policy string `json:"policy"`
			Total  int    `json:"total"`
			receipts.ImportReport
		}{*agentID, logPath, policy.String(), rl.Len(), rep}
		if err := newJSONEncoder(env.stdout).Encode(out); err != nil {
			return err
		}
		return ierr
	}
	printImportReport(env.stdout, *agentID, rep)
	return ierr
}

func receiptsCount(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// receiptsMaxDetail bounds the per-line detail in text output.
const receiptsMaxDetail = 20

func printImportReport(w io.Writer, agent string, rep receipts.ImportReport) {
	fmt.Fprintf(w, "%s: %s: %d added, %s, %d quarantined, %d dropped (quarantine full), %d rejected, %s\n",
		agent, receiptsCount(rep.Lines, "line", "lines"), rep.Imported,
		receiptsCount(rep.Duplicates, "duplicate", "duplicates"), rep.Quarantined, rep.Dropped, rep.Rejected,
		receiptsCount(rep.Blank, "blank line", "blank lines"))
	for _, f := range rep.Forwarded {
		fmt.Fprintf(w, "  token %s belongs to agent %s: %d added to its log, %s\n", sanitize(f.TokenID), sanitize(f.Agent),
			f.Imported, receiptsCount(f.Duplicates, "duplicate", "duplicates"))
	}
	for i, p := range rep.Problems {
		if i == receiptsMaxDetail {
			fmt.Fprintf(w, "  ... and %d more (see --json)\n", len(rep.Problems)-i)
			break
		}
		id := ""
		if p.CallID != "" {
			id = " " + sanitize(p.CallID)
		}
		fmt.Fprintf(w, "  line %d%s: %s: %s\n", p.Line, id, p.Action, sanitize(p.Reason))
	}
	if rep.QuarantineFile != "" {
		fmt.Fprintf(w, "quarantined lines appended to %s (see 'hermesd receipts quarantine list %s')\n", sanitize(rep.QuarantineFile), agent)
	}
}

func runReceiptsList(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "receipts list",
		"receipts list [-config FILE | --state-dir DIR] [--limit N] [--trust ADDRESS]... [--json | --ndjson] AGENT",
		`List an agent's receipts, newest first (ts descending; equal ts: the later
append first), with each signature's status against the trusted operators.
--ndjson prints the stored receipts exactly, one per line. The log is opened
read-only, so this is safe while the daemon runs.`)
	var rf receiptsFlags
	rf.register(fs, true)
	limit := fs.Int("limit", 0, "show at most `N` receipts (0 = all)")
	jsonOut := fs.Bool("json", false, "print one JSON object with every receipt and its status")
	ndjson := fs.Bool("ndjson", false, "print the receipts as stored, one per line")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("receipts list needs exactly one AGENT")
	}
	id := pos[0]
	if *jsonOut && *ndjson {
		return usageErrorf("receipts list: --json and --ndjson are exclusive")
	}
	if *limit < 0 {
		return usageErrorf("receipts list: --limit must not be negative")
	}
	cfg, err := rf.loadConfig(true)
	if err != nil {
		return err
	}
	_, logPath, err := rf.agentLog(cfg, id)
	if err != nil {
		return err
	}
	trusted, err := rf.trusted(env, cfg)
	if err != nil {
		return err
	}
	rl, err := receipts.OpenLog(logPath, receipts.Options{ReadOnly: true})
	if errors.Is(err, os.ErrNotExist) {
		return withCode(exitNotFound, fmt.Errorf("no receipts for agent %s (no log at %s)", id, logPath))
	}
	if err != nil {
		return err
	}
	defer rl.Close()

	type item struct {
		CallID        string          `json:"callId"`
		TS            int64           `json:"ts"`
		SchemaVersion string          `json:"schemaVersion,omitempty"`
		Status        receipts.Status `json:"status"`
		Signer        string          `json:"signer,omitempty"`
		Reason        string          `json:"reason,omitempty"`
		Receipt       json.RawMessage `json:"receipt"`
		after         string
	}
	var items []item
	bw := bufio.NewWriter(env.stdout)
	n := 0
	err = rl.Iterate(func(r receipts.Receipt) bool {
		if *limit > 0 && n == *limit {
			return false
		}
		n++
		if *ndjson {
			bw.Write(r.Bytes())
			bw.WriteByte('\n')
			return ctx.Err() == nil
		}
		res, _ := receipts.Verify(&r, trusted)
		it := item{CallID: r.CallID, TS: r.TS, SchemaVersion: r.SchemaVersion, Status: res.Status, Receipt: r.Bytes(), after: r.BundleHashAfter}
		if res.Signer != (common.Address{}) {
			it.Signer = res.Signer.Hex()
		}
		if res.Status != receipts.StatusTrusted {
			it.Reason = res.Reason
		}
		items = append(items, it)
		return ctx.Err() == nil
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return err
	}
	switch {
	case *ndjson:
		return bw.Flush()
	case *jsonOut:
		if items == nil {
			items = []item{}
		}
		// Receipts print as stored, but for controls a terminal obeys.
		return newJSONEncoder(env.stdout).Encode(struct {
			Agent    string `json:"agent"`
			Log      string `json:"log"`
			Total    int    `json:"total"`
			Receipts []item `json:"receipts"`
		}{id, logPath, rl.Len(), items})
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tCALL ID\tSCHEMA\tBUNDLE AFTER\tSIGNATURE")
	for _, it := range items {
		sig := it.Status.String()
		if it.Signer != "" {
			sig += " " + receiptsShortHex(it.Signer, 6, 4)
		}
		// Receipts come from the agent runtime: nothing of theirs reaches
		// the terminal unescaped.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", time.Unix(it.TS, 0).UTC().Format(time.RFC3339), sanitize(it.CallID),
			sanitize(receiptsOrDash(it.SchemaVersion)), sanitize(receiptsOrDash(receiptsShortHex(it.after, 10, 0))), sig)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rl.Len() > len(items) {
		fmt.Fprintf(env.stdout, "(%d of %d receipts; --limit 0 shows all)\n", len(items), rl.Len())
	}
	if rec := rl.Recovery(); rec.TruncatedBytes > 0 {
		fmt.Fprintf(env.stderr, "hermesd: warning: %d bytes after the last complete record were skipped (a write in progress, or a torn one)\n", rec.TruncatedBytes)
	}
	return nil
}

// receiptsShortHex abbreviates 0x-hex s to its first head and last tail digits.
func receiptsShortHex(s string, head, tail int) string {
	if len(s) <= 2+head+tail+1 {
		return s
	}
	out := s[:2+head] + "…"
	if tail > 0 {
		out += s[len(s)-tail:]
	}
	return out
}

func receiptsOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

const receiptsVerifyHelp = `Check every receipt in FILE (ndjson such as a brain's receipts.ndjson, or
one JSON receipt; - reads standard input) against the trusted operators.
Failures are printed per line, then a summary. Exit status 3 if any line is
not a receipt, any signature is missing or invalid, or (unless
--allow-unknown) any receipt is signed by an operator that is not trusted.`

func runReceiptsVerify(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "receipts verify",
		"receipts verify [-config FILE] [--trust ADDRESS]... [--allow-unknown] [--json] FILE|-", receiptsVerifyHelp)
	var rf receiptsFlags
	rf.register(fs, false)
	allowUnknown := fs.Bool("allow-unknown", false, "accept valid signatures by operators that are not trusted")
	jsonOut := fs.Bool("json", false, "print every line's result and the summary as one JSON object")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("receipts verify needs exactly one FILE (- for standard input)")
	}
	file := pos[0]
	cfg, err := rf.loadConfig(false)
	if err != nil {
		return err
	}
	trusted, err := rf.trusted(env, cfg)
	if err != nil {
		return err
	}
	in, closeIn, err := openReceiptsInput(env, file)
	if err != nil {
		return err
	}
	defer closeIn()
	input, err := receiptInput(in)
	if err != nil {
		return err
	}

	// Results stream: as JSON the "results" array is written line by line
	// and the summary after it; as text only the first failures are kept.
	// Memory stays bounded whatever the file holds.
	bw := bufio.NewWriter(env.stdout)
	var enc *json.Encoder
	if *jsonOut {
		enc = newJSONEncoder(bw)
		jsonEscaper{bw}.Write(fmt.Appendf(nil, "{\"file\":%s,\"results\":[", receiptsJSONString(file)))
	}
	shown, n := 0, 0
	tally, err := receipts.VerifyLines(ctx, input, trusted, func(r receipts.LineResult) {
		if enc != nil {
			if n > 0 {
				bw.WriteByte(',')
			}
			n++
			enc.Encode(r)
			return
		}
		if r.Status == receipts.StatusTrusted || r.Status == receipts.StatusUnknownSigner && *allowUnknown {
			return
		}
		if shown == receiptsMaxDetail {
			fmt.Fprintln(bw, "  ... (see --json for every line)")
		}
		if shown++; shown > receiptsMaxDetail {
			return
		}
		id := ""
		if r.CallID != "" {
			id = " " + sanitize(r.CallID)
		}
		fmt.Fprintf(bw, "line %d%s: %s: %s\n", r.Line, id, r.Status, sanitize(r.Reason))
	})
	if err != nil {
		bw.Flush()
		return err
	}
	ok := tally.Failed == 0 && (tally.Unknown == 0 || *allowUnknown)
	if enc != nil {
		sum, err := json.Marshal(struct {
			receipts.Tally
			OK bool `json:"ok"`
		}{tally, ok})
		if err != nil {
			return err
		}
		// The tally's fields follow the results in the same object.
		bw.WriteString("],")
		bw.Write(sum[1:])
		bw.WriteByte('\n')
	} else {
		fmt.Fprintf(bw, "%s: %s: %d trusted, %d unknown signer, %d failed (%d not receipts); %s\n",
			sanitize(file), receiptsCount(tally.Receipts+tally.Malformed, "entry", "entries"), tally.Trusted, tally.Unknown,
			tally.Failed, tally.Malformed, receiptsCount(tally.Blank, "blank line", "blank lines"))
		if len(trusted) == 0 && tally.Unknown > 0 {
			fmt.Fprintln(bw, "no trusted operators configured: add --trust ADDRESS or receipts.trusted")
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if !ok {
		bad := tally.Failed
		what := "do not verify"
		if !*allowUnknown {
			bad += tally.Unknown
			what = "do not verify against a trusted operator"
		}
		return withCode(exitMismatch, fmt.Errorf("%d of %d entries %s", bad, tally.Receipts+tally.Malformed, what))
	}
	return nil
}

// receiptsJSONString is s as a JSON string.
func receiptsJSONString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

const receiptsQuarantineHelp = `Lines that were not receipts of a trusted operator (unsigned, bad or
unknown signature, not a receipt) are set aside in the agent's quarantine
file, <state_dir>/agents/<id>/receipts.log.quarantine, within its bounds
(receipts.quarantine_max_bytes and quarantine_max_count); once it is full,
further lines are dropped and counted. Nothing quarantined is ever folded
into a snapshot.

  quarantine list AGENT   what is quarantined: when, from where, why, the
                          callId when the line parses, and its size. Read
                          only: safe while the daemon runs.
  quarantine purge AGENT  delete the quarantined lines and print how many.
                          While the daemon runs, hermesd asks it (POST
                          /v1/agents/{id}/quarantine/purge over http.socket,
                          or http.listen with http.token); otherwise it
                          changes the state directory itself.`

func runReceiptsQuarantine(ctx context.Context, env *cmdEnv, args []string) error {
	return group{name: "receipts quarantine", tail: "[flags] AGENT", help: receiptsQuarantineHelp, verbs: []command{
		{name: "list", run: runQuarantineList},
		{name: "purge", run: runQuarantinePurge},
	}}.run(ctx, env, args)
}

// quarantineItem is one quarantined line as `quarantine list` shows it.
type quarantineItem struct {
	Time      time.Time `json:"time,omitzero"`
	Source    string    `json:"source"` // import, log, or quarantine (a damaged line of the file itself)
	File      string    `json:"file,omitempty"`
	Line      int       `json:"line"`
	Status    string    `json:"status,omitempty"`
	Reason    string    `json:"reason"`
	CallID    string    `json:"callId,omitempty"`
	Size      int64     `json:"size"` // the line's full length
	Truncated bool      `json:"truncated,omitempty"`
}

// maxShownCallID bounds a callId in the listing; a receipt's own is
// shorter, a hostile one is not.
const maxShownCallID = 80

func newQuarantineItem(r receipts.QuarantineRecord) quarantineItem {
	it := quarantineItem{Source: r.Source, File: r.File, Line: r.Line, Status: r.Status, Reason: r.Reason,
		Size: r.Length, Truncated: r.Truncated}
	if r.Time > 0 {
		it.Time = time.Unix(r.Time, 0).UTC()
	}
	var data []byte
	switch {
	case r.Receipt != nil:
		data = r.Receipt
	case r.Text != nil:
		data = []byte(*r.Text)
	}
	var probe struct {
		CallID string `json:"callId"`
	}
	if data != nil && json.Unmarshal(data, &probe) == nil {
		it.CallID = probe.CallID
		if len(it.CallID) > maxShownCallID {
			it.CallID = it.CallID[:maxShownCallID] + "..."
		}
	}
	return it
}

func runQuarantineList(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "receipts quarantine list",
		"receipts quarantine list [-config FILE | --state-dir DIR] [--limit N] [--json] AGENT", receiptsQuarantineHelp)
	var rf receiptsFlags
	rf.register(fs, true)
	limit := fs.Int("limit", 0, "show at most `N` records, oldest first (0 = all)")
	jsonOut := fs.Bool("json", false, "print one JSON object with the quarantine's size and every record")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("receipts quarantine list needs exactly one AGENT")
	}
	if *limit < 0 {
		return usageErrorf("receipts quarantine list: --limit must not be negative")
	}
	id := pos[0]
	cfg, err := rf.loadConfig(true)
	if err != nil {
		return err
	}
	_, logPath, err := rf.agentLog(cfg, id)
	if err != nil {
		return err
	}
	// Read-only: the daemon may be importing into this log right now.
	rl, err := receipts.OpenLog(logPath, receipts.Options{ReadOnly: true, Quarantine: quarantineLimits(cfg)})
	if errors.Is(err, os.ErrNotExist) {
		rl = nil
	} else if err != nil {
		return err
	}
	info := receipts.QuarantineInfo{Path: receipts.QuarantinePath(logPath)}
	if rl != nil {
		defer rl.Close()
		if info, err = rl.Quarantine(); err != nil {
			return err
		}
	}

	// Records stream (the file is bounded by configuration, the output by
	// nothing else): JSON writes its array record by record, text writes
	// fixed columns rather than aligning the whole table in memory.
	bw := bufio.NewWriter(env.stdout)
	var enc *json.Encoder
	if *jsonOut {
		head, err := json.Marshal(struct {
			Agent string `json:"agent"`
			receipts.QuarantineInfo
		}{id, info})
		if err != nil {
			return err
		}
		jsonEscaper{bw}.Write(head[:len(head)-1])
		bw.WriteString(`,"records":[`)
		enc = newJSONEncoder(bw)
	} else {
		fmt.Fprintf(bw, "%s: %s in %s (%d of at most %d bytes, at most %d records)\n", id,
			receiptsCount(info.Count, "record", "records"), sanitize(info.Path), info.Bytes, info.MaxBytes, info.MaxCount)
		if info.Count > 0 {
			fmt.Fprintf(bw, "%-20s  %-16s  %-14s  %9s  %-24s  %s\n", "TIME", "SOURCE", "STATUS", "SIZE", "CALL ID", "REASON")
		}
	}
	n := 0
	if rl != nil {
		err = rl.IterateQuarantine(func(r receipts.QuarantineRecord) bool {
			if *limit > 0 && n == *limit {
				return false
			}
			it := newQuarantineItem(r)
			if enc != nil {
				if n > 0 {
					bw.WriteByte(',')
				}
				enc.Encode(it)
			} else {
				when := "-"
				if !it.Time.IsZero() {
					when = it.Time.Format(time.RFC3339)
				}
				src := fmt.Sprintf("%s:%d", it.Source, it.Line)
				size := fmt.Sprint(it.Size)
				if it.Truncated {
					size += "+"
				}
				// Everything but the counts was chosen by whoever posted
				// the line.
				fmt.Fprintf(bw, "%-20s  %-16s  %-14s  %9s  %-24s  %s\n", when, src, receiptsOrDash(it.Status), size,
					receiptsOrDash(sanitize(it.CallID)), sanitize(it.Reason))
			}
			n++
			return ctx.Err() == nil
		})
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			bw.Flush()
			return err
		}
	}
	if enc != nil {
		bw.WriteString("]}\n")
	} else if *limit > 0 && n < info.Count {
		fmt.Fprintf(bw, "(%d of %d records; --limit 0 shows all)\n", n, info.Count)
	}
	return bw.Flush()
}

func runQuarantinePurge(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "receipts quarantine purge",
		"receipts quarantine purge [-config FILE | --state-dir DIR] [--json] AGENT", receiptsQuarantineHelp)
	var rf receiptsFlags
	rf.register(fs, true)
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("receipts quarantine purge needs exactly one AGENT")
	}
	id := pos[0]
	cfg, err := rf.loadConfig(true)
	if err != nil {
		return err
	}
	stateDir, logPath, err := rf.agentLog(cfg, id)
	if err != nil {
		return err
	}
	out := struct {
		Agent   string `json:"agent"`
		Removed int    `json:"removed"`
		Via     string `json:"via"` // "daemon" or "state directory"
	}{Agent: id}

	sd, err := state.Open(stateDir, stateOptions(cfg))
	switch {
	case errors.Is(err, state.ErrLocked):
		// The daemon holds the log: only it may change the file.
		if cfg == nil {
			return fmt.Errorf("%w; pass -config so that hermesd can ask the daemon to purge, or stop it", err)
		}
		if out.Removed, err = purgeViaDaemon(ctx, cfg, id); err != nil {
			return err
		}
		out.Via = "daemon"
	case err != nil:
		return err
	default:
		defer sd.Close()
		out.Via = "state directory"
		if _, err := os.Lstat(logPath); errors.Is(err, os.ErrNotExist) {
			break // no log: nothing was ever quarantined
		}
		logger, err := newLogger(env.stderr, "warn", "text")
		if err != nil {
			return err
		}
		rl, err := receipts.OpenLog(logPath, receipts.Options{Logger: logger, Repair: true, Quarantine: quarantineLimits(cfg)})
		if err != nil {
			return err
		}
		defer rl.Close()
		if out.Removed, err = rl.PurgeQuarantine(); err != nil {
			return err
		}
	}
	if *jsonOut {
		return newJSONEncoder(env.stdout).Encode(out)
	}
	fmt.Fprintf(env.stdout, "%s: removed %s from the quarantine (%s)\n", id, receiptsCount(out.Removed, "record", "records"), out.Via)
	return nil
}

// Bounds of a request to the running daemon.
const (
	daemonRequestTimeout = 30 * time.Second
	maxDaemonAnswer      = 1 << 20
)

// purgeViaDaemon asks the running daemon to purge agent id's quarantine:
// over http.socket when there is one (its file mode is the credential),
// else over http.listen with the bearer token of http.token.
func purgeViaDaemon(ctx context.Context, cfg *config.Config, id string) (int, error) {
	client := &http.Client{
		Timeout: daemonRequestTimeout,
		// The daemon never redirects; following one would carry the token
		// elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	base, token := "", ""
	switch {
	case cfg.HTTP.Socket != "":
		sock := cfg.HTTP.Socket
		client.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}
		base = "http://hermesd"
	case cfg.HTTP.Listen != "" && !cfg.HTTP.Token.IsZero():
		t, err := config.ReadSecret(cfg.HTTP.Token)
		if err != nil {
			return 0, withCode(exitUsage, fmt.Errorf("http.token: %w", err))
		}
		base, token = "http://"+cfg.HTTP.Listen, t
	default:
		return 0, withCode(exitUsage, errors.New("the daemon runs and holds the state directory, and the configuration gives no way to ask it (set http.socket, or http.token with http.listen), so stop it first"))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/agents/"+url.PathEscape(id)+"/quarantine/purge", strings.NewReader("{}"))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("ask the daemon: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDaemonAnswer))
	if err != nil {
		return 0, fmt.Errorf("ask the daemon: %w", err)
	}
	var ans struct {
		Removed *int   `json:"removed"`
		Error   string `json:"error"`
	}
	jerr := json.Unmarshal(body, &ans)
	if resp.StatusCode != http.StatusOK {
		msg := ans.Error
		if jerr != nil || msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return 0, fmt.Errorf("the daemon refused to purge: HTTP %d: %s", resp.StatusCode, msg)
	}
	if jerr != nil || ans.Removed == nil {
		return 0, errors.New("the daemon's answer to purge is not what hermesd sends")
	}
	return *ans.Removed, nil
}

// stateOptions are the state directory's checks for a command that may run
// without a configuration (--state-dir): then nothing is relaxed.
func stateOptions(cfg *config.Config) state.Options {
	if cfg == nil {
		return state.Options{}
	}
	return compose.StateOptions(cfg)
}
