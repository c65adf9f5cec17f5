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
	"os"
	"path/filepath"
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

An agent's log is <state_dir>/agents/<id>/receipts.log. The state directory
comes from the configuration (-config) or --state-dir, which needs no
configuration file. Trusted operators are receipts.trusted, the address of
receipts.signer, and every --trust ADDRESS. Run 'hermesd receipts add -h'
(list, verify) for their flags.`

func runReceipts(ctx context.Context, env *cmdEnv, args []string) error {
	if len(args) == 0 {
		fmt.Fprintf(env.stderr, "Usage: hermesd receipts <add|list|verify> [flags]\n\n%s\n", receiptsHelp)
		return errUsageShown
	}
	switch args[0] {
	case "add":
		return runReceiptsAdd(ctx, env, args[1:])
	case "list":
		return runReceiptsList(ctx, env, args[1:])
	case "verify":
		return runReceiptsVerify(ctx, env, args[1:])
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(env.stdout, "Usage: hermesd receipts <add|list|verify> [flags]\n\n%s\n", receiptsHelp)
		return nil
	}
	return usageErrorf("receipts: unknown subcommand %q (want add, list or verify)", args[0])
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

const receiptsAddHelp = `Verify receipts and append the new ones (by callId) to an agent's receipt
log, as the daemon's POST /v1/agents/{id}/receipts does. The input is
ndjson or one JSON receipt, from FILE or standard input. Only receipts signed
by a trusted operator enter the log (and so the snapshots). Everything else
(unsigned, bad signature, unknown signer, not a receipt) follows --policy:
quarantine it (set aside in receipts.log.quarantine beside the log, within
its size bound) or reject the whole input (exit 3, log unchanged).

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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *agentID == "" {
		return usageErrorf("receipts add: --agent ID is required")
	}
	if fs.NArg() > 1 {
		return usageErrorf("receipts add: at most one FILE")
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
	in, closeIn, err := openReceiptsInput(env, fs.Arg(0))
	if err != nil {
		return err
	}
	defer closeIn()
	input, err := receiptInput(in)
	if err != nil {
		return err
	}

	sd, err := state.Open(stateDir, state.Options{})
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
	rl, err := receipts.OpenLog(logPath, receipts.Options{Logger: logger, Repair: true})
	if err != nil {
		return err
	}
	defer rl.Close()
	rep, ierr := rl.Import(ctx, input, policy, trusted)
	if *jsonOut {
		out := struct {
			Agent  string `json:"agent"`
			Log    string `json:"log"`
			Policy string `json:"policy"`
			Total  int    `json:"total"`
			receipts.ImportReport
		}{*agentID, logPath, policy.String(), rl.Len(), rep}
		if err := json.NewEncoder(env.stdout).Encode(out); err != nil {
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
	for i, p := range rep.Problems {
		if i == receiptsMaxDetail {
			fmt.Fprintf(w, "  ... and %d more (see --json)\n", len(rep.Problems)-i)
			break
		}
		what := string(p.Action)
		id := ""
		if p.CallID != "" {
			id = " " + p.CallID
		}
		fmt.Fprintf(w, "  line %d%s: %s: %s\n", p.Line, id, what, p.Reason)
	}
	if rep.QuarantineFile != "" {
		fmt.Fprintf(w, "quarantined lines appended to %s\n", rep.QuarantineFile)
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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("receipts list needs exactly one AGENT")
	}
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
	_, logPath, err := rf.agentLog(cfg, fs.Arg(0))
	if err != nil {
		return err
	}
	trusted, err := rf.trusted(env, cfg)
	if err != nil {
		return err
	}
	rl, err := receipts.OpenLog(logPath, receipts.Options{ReadOnly: true})
	if errors.Is(err, os.ErrNotExist) {
		return withCode(exitNotFound, fmt.Errorf("no receipts for agent %s (no log at %s)", fs.Arg(0), logPath))
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
		enc := json.NewEncoder(env.stdout)
		enc.SetEscapeHTML(false) // receipts print as stored
		return enc.Encode(struct {
			Agent    string `json:"agent"`
			Log      string `json:"log"`
			Total    int    `json:"total"`
			Receipts []item `json:"receipts"`
		}{fs.Arg(0), logPath, rl.Len(), items})
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tCALL ID\tSCHEMA\tBUNDLE AFTER\tSIGNATURE")
	for _, it := range items {
		sig := it.Status.String()
		if it.Signer != "" {
			sig += " " + receiptsShortHex(it.Signer, 6, 4)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", time.Unix(it.TS, 0).UTC().Format(time.RFC3339), it.CallID,
			receiptsOrDash(it.SchemaVersion), receiptsOrDash(receiptsShortHex(it.after, 10, 0)), sig)
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

// verifyLine is the outcome for one non-blank line.
type verifyLine struct {
	Line   int             `json:"line"`
	CallID string          `json:"callId,omitempty"`
	Status receipts.Status `json:"status"`
	Signer string          `json:"signer,omitempty"`
	Reason string          `json:"reason,omitempty"`
}

func runReceiptsVerify(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "receipts verify",
		"receipts verify [-config FILE] [--trust ADDRESS]... [--allow-unknown] [--json] FILE|-", receiptsVerifyHelp)
	var rf receiptsFlags
	rf.register(fs, false)
	allowUnknown := fs.Bool("allow-unknown", false, "accept valid signatures by operators that are not trusted")
	jsonOut := fs.Bool("json", false, "print every line's result and the summary as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("receipts verify needs exactly one FILE (- for standard input)")
	}
	cfg, err := rf.loadConfig(false)
	if err != nil {
		return err
	}
	trusted, err := rf.trusted(env, cfg)
	if err != nil {
		return err
	}
	in, closeIn, err := openReceiptsInput(env, fs.Arg(0))
	if err != nil {
		return err
	}
	defer closeIn()
	input, err := receiptInput(in)
	if err != nil {
		return err
	}

	var sum struct {
		File      string       `json:"file"`
		Lines     int          `json:"lines"`
		Blank     int          `json:"blank"`
		Receipts  int          `json:"receipts"`
		Trusted   int          `json:"trusted"`
		Unknown   int          `json:"unknownSigner"`
		Failed    int          `json:"failed"`
		Malformed int          `json:"malformed"`
		OK        bool         `json:"ok"`
		Results   []verifyLine `json:"results"`
	}
	sum.File = fs.Arg(0)
	err = receipts.ScanLines(input, func(n int, line []byte, lerr error) error {
		sum.Lines = n
		if n&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if lerr == nil && len(line) == 0 {
			sum.Blank++
			return nil
		}
		res := verifyLine{Line: n}
		if lerr != nil {
			res.Status, res.Reason = receipts.StatusMalformed, lerr.Error()
		} else if r, perr := receipts.Parse(line); perr != nil {
			res.Status, res.Reason = receipts.StatusMalformed, perr.Error()
		} else {
			sum.Receipts++
			v, _ := receipts.Verify(&r, trusted)
			res.CallID, res.Status, res.Reason = r.CallID, v.Status, v.Reason
			if v.Signer != (common.Address{}) {
				res.Signer = v.Signer.Hex()
			}
		}
		switch res.Status {
		case receipts.StatusTrusted:
			sum.Trusted++
		case receipts.StatusUnknownSigner:
			sum.Unknown++
		case receipts.StatusMalformed:
			sum.Malformed++
			sum.Failed++
		default:
			sum.Failed++
		}
		sum.Results = append(sum.Results, res)
		return nil
	})
	if err != nil {
		return err
	}
	sum.OK = sum.Failed == 0 && (sum.Unknown == 0 || *allowUnknown)
	if sum.Results == nil {
		sum.Results = []verifyLine{}
	}
	if *jsonOut {
		if err := json.NewEncoder(env.stdout).Encode(sum); err != nil {
			return err
		}
	} else {
		shown := 0
		for _, r := range sum.Results {
			if r.Status == receipts.StatusTrusted || r.Status == receipts.StatusUnknownSigner && *allowUnknown {
				continue
			}
			if shown == receiptsMaxDetail {
				fmt.Fprintln(env.stdout, "  ... (see --json for every line)")
				break
			}
			shown++
			id := ""
			if r.CallID != "" {
				id = " " + r.CallID
			}
			fmt.Fprintf(env.stdout, "line %d%s: %s: %s\n", r.Line, id, r.Status, r.Reason)
		}
		fmt.Fprintf(env.stdout, "%s: %s: %d trusted, %d unknown signer, %d failed (%d not receipts); %s\n",
			sum.File, receiptsCount(sum.Receipts+sum.Malformed, "entry", "entries"), sum.Trusted, sum.Unknown,
			sum.Failed, sum.Malformed, receiptsCount(sum.Blank, "blank line", "blank lines"))
		if len(trusted) == 0 && sum.Unknown > 0 {
			fmt.Fprintln(env.stdout, "no trusted operators configured: add --trust ADDRESS or receipts.trusted")
		}
	}
	if !sum.OK {
		bad := sum.Failed
		what := "do not verify"
		if !*allowUnknown {
			bad += sum.Unknown
			what = "do not verify against a trusted operator"
		}
		return withCode(exitMismatch, fmt.Errorf("%d of %d entries %s", bad, sum.Receipts+sum.Malformed, what))
	}
	return nil
}
