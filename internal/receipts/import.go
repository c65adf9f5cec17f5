package receipts

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ethereum/go-ethereum/common"
)

// Policy decides what Import does with a line that is not a receipt signed
// by a trusted operator: a bad or missing signature, an unknown signer,
// missing digest fields, a bad hermesd binding, or not a receipt at all.
// Such a line never enters the log, under any policy: whatever is in the
// log is folded into every later snapshot, so an unverified line would
// let anyone who can post receipts grow (and break) every snapshot.
type Policy int

const (
	// PolicyQuarantine (the default) writes such lines to the quarantine
	// file beside the log, within its limits, and imports the rest.
	PolicyQuarantine Policy = iota
	// PolicyReject aborts the whole import, leaving the log unchanged, if
	// any line is not a trusted receipt.
	PolicyReject
)

// ErrPolicy is matched by the error of ParsePolicy.
var ErrPolicy = errors.New("receipts: unknown import policy")

// ParsePolicy parses "quarantine" or "reject".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "quarantine":
		return PolicyQuarantine, nil
	case "reject":
		return PolicyReject, nil
	case "keep":
		return 0, fmt.Errorf("%w: %q was removed: receipts not signed by a trusted operator are never folded into snapshots (use quarantine)", ErrPolicy, s)
	}
	return 0, fmt.Errorf("%w: %q is not one of quarantine, reject", ErrPolicy, s)
}

func (p Policy) String() string {
	switch p {
	case PolicyQuarantine:
		return "quarantine"
	case PolicyReject:
		return "reject"
	}
	return fmt.Sprintf("policy(%d)", int(p))
}

// ErrRejected is matched by the error of an import aborted by PolicyReject.
var ErrRejected = errors.New("receipts: import rejected")

// Action is what happened to one input line.
type Action string

const (
	ActionImported    Action = "imported"
	ActionDuplicate   Action = "duplicate"
	ActionQuarantined Action = "quarantined"
	ActionDropped     Action = "dropped" // for the quarantine, but it was full
	ActionRejected    Action = "rejected"
	ActionSkipped     Action = "skipped" // acceptable, but the import was rejected
)

// LineResult describes one input line: in an ImportReport one that was
// not a clean import, from VerifyLines every non-blank line. CallID and
// Reason are cut to a few hundred bytes (the input chooses them).
type LineResult struct {
	Line   int    `json:"line"`             // 1-based
	CallID string `json:"callId,omitempty"` // "" when the line is not a receipt
	Status Status `json:"status,omitempty"` // 0 for a conflicting duplicate
	Signer string `json:"signer,omitempty"` // the recovered address, when a signature recovered
	Reason string `json:"reason,omitempty"`
	Action Action `json:"action,omitempty"` // "" from VerifyLines
}

// MaxProblems bounds ImportReport.Problems; the rest are only counted.
const MaxProblems = 100

// ImportReport accounts for every line of the input:
// Lines = Blank + Imported + Duplicates + Quarantined + Dropped + Rejected + Skipped + Routed.
type ImportReport struct {
	Lines    int `json:"lines"`
	Blank    int `json:"blank"`
	Imported int `json:"imported"`
	// Flagged is always 0: untrusted receipts are no longer imported. It
	// stays for readers of earlier reports.
	Flagged     int `json:"flagged"`
	Duplicates  int `json:"duplicates"` // callId already in the log or earlier in the input
	Conflicts   int `json:"conflicts"`  // duplicates whose bytes differ (CRC-32C or length)
	Quarantined int `json:"quarantined"`
	Dropped     int `json:"dropped"` // not trusted and not quarantined: the quarantine was full
	Rejected    int `json:"rejected"`
	Skipped     int `json:"skipped"` // trusted lines not imported because the import was rejected
	// Routed counts the trusted receipts of another agent's token that
	// were handed to that agent's log (ImportRouted); Forwarded says how
	// each agent's went.
	Routed    int         `json:"routed,omitempty"`
	Forwarded []Forwarded `json:"forwarded,omitempty"`
	// Problems lists, in line order, the first MaxProblems lines that were
	// quarantined, dropped, rejected, or conflicting duplicates;
	// ProblemsOmitted counts the rest.
	Problems        []LineResult `json:"problems,omitempty"`
	ProblemsOmitted int          `json:"problemsOmitted,omitempty"`
	// QuarantineFile is where quarantined lines went ("" if none).
	QuarantineFile string `json:"quarantineFile,omitempty"`
}

// Forwarded is what became of the receipts an import handed to the agent
// holding their token.
type Forwarded struct {
	Agent      string `json:"agent"`
	TokenID    string `json:"tokenId"`
	Imported   int    `json:"imported"`
	Duplicates int    `json:"duplicates"` // already in that agent's log
}

// Route says whose receipts a log holds: an agent's snapshot carries only
// its own token's receipts (Export), so Import takes a trusted receipt of
// another token only to hand it to the agent holding that token.
type Route struct {
	// Agent is the log's agent, for reasons.
	Agent string
	// Token is its token id in decimal; "" when it has none (then every
	// receipt with a tokenId belongs elsewhere).
	Token string
	// Forward returns the log of the agent holding token, and that agent's
	// id; a nil log (with or without a holder) when the receipt cannot be
	// handed over here, which quarantines it with the reason. Nil: no agent
	// holds another token.
	Forward func(token string) (log *Log, holder string)
}

// foreign returns where a receipt of token goes: -1 for this log, else an
// index in im.dests; or why it goes nowhere.
func (im *importer) foreign(token string) (int, string) {
	rt := im.route
	if rt == nil || token == "" || token == rt.Token {
		return -1, ""
	}
	var dst *Log
	holder := ""
	if rt.Forward != nil {
		dst, holder = rt.Forward(token)
	}
	own := "holds no token (agents[].token_id)"
	if rt.Token != "" {
		own = "holds token " + rt.Token
	}
	switch {
	case dst != nil && dst != im.l:
		for i, d := range im.dests {
			if d.log == dst {
				return i, ""
			}
		}
		im.dests = append(im.dests, dest{log: dst, agent: holder, token: token})
		return len(im.dests) - 1, ""
	case holder != "":
		return 0, fmt.Sprintf("a receipt of token %s, which agent %s holds: not imported into %s, which %s (add it to %s)", clip(token), holder, rt.Agent, own, holder)
	}
	return 0, fmt.Sprintf("a receipt of token %s, which no configured agent holds: not imported into %s, which %s", clip(token), rt.Agent, own)
}

// dest is another agent's log an import hands receipts to.
type dest struct {
	log   *Log
	agent string
	token string
}

// maxImportLine bounds one input line before trimming; past it the line is
// malformed (and only its start is quarantined).
const maxImportLine = MaxReceiptSize + 4096

// Import reads receipts (ndjson: one compact JSON receipt per line, so a
// single receipt is a one-line input) and adds the new ones to the log.
// Each line is parsed and verified against trusted; only receipts whose
// signature recovers to a trusted signer (StatusTrusted) are imported.
// Blank lines are counted and skipped, duplicates (by callId) counted, and
// everything else follows policy. Nothing is dropped without a count.
// There are no network side effects.
//
// Memory and disk stay bounded whatever the input: lines are read within
// a bound and handled in chunks (signatures of a chunk are checked in
// parallel), the report keeps MaxProblems problems, and the quarantine
// file stops at its limits (Options.Quarantine).
//
// Accepted receipts are spooled to a temporary file beside the log, then
// appended as one batch (one fsync) in reverse input order, so that among
// equal ts the first line of the input is the newest: importing an
// exported receipts.ndjson into an empty log and exporting again
// reproduces it byte for byte.
func (l *Log) Import(ctx context.Context, r io.Reader, policy Policy, trusted []common.Address) (ImportReport, error) {
	return l.ImportRouted(ctx, r, policy, trusted, nil)
}

// ImportRouted is Import for a log whose agent's token is known (route):
// a trusted receipt whose tokenId is another token's is handed to the log
// of the agent holding it (route.Forward), appended there in one batch
// after this log's (each log's own lock held in turn, never two at once),
// or, when it cannot be, follows policy like an untrusted line (status
// foreign-token, with the reason). Receipts without a tokenId stay here,
// as Import keeps them. A nil route is Import.
func (l *Log) ImportRouted(ctx context.Context, r io.Reader, policy Policy, trusted []common.Address, route *Route) (ImportReport, error) {
	l.importMu.Lock()
	defer l.importMu.Unlock()
	var rep ImportReport
	if policy != PolicyQuarantine && policy != PolicyReject {
		return rep, fmt.Errorf("receipts: import: unknown %v", policy)
	}
	l.mu.Lock()
	err := l.usableLocked()
	l.mu.Unlock()
	if err != nil {
		return rep, err
	}

	im := &importer{l: l, policy: policy, rep: &rep, seen: make(map[string]crcLen), route: route}
	defer im.cleanup()
	c := newChunker(r)
	for {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		lines, err := c.next()
		if err != nil {
			return rep, fmt.Errorf("receipts: import: %w", err)
		}
		if len(lines) == 0 {
			break
		}
		im.lookup(lines)
		verifyChunk(lines, trusted)
		for i := range lines {
			rep.Lines++
			if err := im.line(&lines[i]); err != nil {
				return rep, err
			}
		}
	}
	if im.q != nil {
		err := im.q.close()
		im.q = nil
		if err != nil {
			return rep, err
		}
	}
	if policy == PolicyReject && rep.Rejected > 0 {
		rep.Skipped = len(im.accepted) + im.skipped
		return rep, im.rejection()
	}
	return rep, im.commit()
}

// inLine is one input line, read and parsed.
type inLine struct {
	no    int
	n     int64 // bytes consumed, newline included
	blank bool
	rec   Receipt // when perr is nil
	perr  error
	data  []byte // when perr is not nil: the line, cut to maxQuarantineBytes
	crc   uint32

	inLog bool   // callId already in the log
	logCL crcLen // and that record's checksum and length
	check bool   // verify it
	res   VerifyResult
}

// chunker reads input lines in chunks, so that signatures can be checked
// in parallel while memory stays bounded by the chunk.
type chunker struct {
	br     *bufio.Reader
	acc    []byte
	lineNo int
	done   bool
	lines  []inLine
}

const (
	chunkLines = 256
	chunkBytes = 4 << 20 // plus at most one line
)

func newChunker(r io.Reader) *chunker {
	return &chunker{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next chunk, empty at the end. It is valid until the
// next call.
func (c *chunker) next() ([]inLine, error) {
	clear(c.lines) // drop references to the last chunk's receipts
	c.lines = c.lines[:0]
	held := 0
	for !c.done && len(c.lines) < chunkLines && held < chunkBytes {
		data, n, _, tooLong, rerr := readLine(c.br, &c.acc, maxImportLine)
		if n == 0 {
			c.done = true
			if rerr != nil && rerr != io.EOF {
				return nil, fmt.Errorf("read: %w", rerr)
			}
			break
		}
		c.lineNo++
		ln := inLine{no: c.lineNo, n: n}
		if tooLong {
			ln.perr = fmt.Errorf("%w: line of %d bytes exceeds the limit", ErrTooLarge, n)
			ln.data = bytes.Clone(data[:min(len(data), maxQuarantineBytes)])
		} else if t := trimLine(data); len(t) == 0 {
			ln.blank = true
		} else if ln.rec, ln.perr = Parse(t); ln.perr != nil {
			ln.data = bytes.Clone(t[:min(len(t), maxQuarantineBytes)])
		} else {
			ln.crc = crc32.Checksum(ln.rec.raw, castagnoli)
		}
		held += len(ln.data) + len(ln.rec.raw)
		c.lines = append(c.lines, ln)
		if rerr != nil {
			c.done = true
			if rerr != io.EOF {
				return nil, fmt.Errorf("read: %w", rerr)
			}
		}
	}
	return c.lines, nil
}

// verifyChunk verifies the lines marked check, on all CPUs: signature
// recovery is what bounds the import rate.
func verifyChunk(lines []inLine, trusted []common.Address) {
	var idx []int
	for i := range lines {
		if lines[i].check {
			idx = append(idx, i)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(idx))
	if workers <= 1 {
		for _, i := range idx {
			lines[i].res, _ = Verify(&lines[i].rec, trusted)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(idx) {
					return
				}
				ln := &lines[idx[k]]
				ln.res, _ = Verify(&ln.rec, trusted)
			}
		})
	}
	wg.Wait()
}

type crcLen struct {
	crc uint32
	n   int32
}

type importer struct {
	l        *Log
	route    *Route
	dests    []dest // other agents' logs receiving receipts
	policy   Policy
	rep      *ImportReport
	seen     map[string]crcLen // callIds accepted from this input
	accepted []entry           // spooled; off is the offset in the spool
	to       []int32           // per accepted receipt: -1 this log, else an index in dests
	skipped  int               // accepted after a rejection: not spooled
	rejected []string          // the first few rejection reasons
	spool    *os.File
	spoolW   *bufio.Writer
	spoolOff int64
	q        *quarantineWriter
}

func (im *importer) cleanup() {
	if im.spool != nil {
		im.spool.Close()
		os.Remove(im.spool.Name())
	}
	if im.q != nil {
		im.q.close()
	}
}

// lookup marks the chunk's receipts that are already in the log, and
// those to verify.
func (im *importer) lookup(lines []inLine) {
	l := im.l
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range lines {
		ln := &lines[i]
		if ln.blank || ln.perr != nil {
			continue
		}
		if _, ok := im.seen[ln.rec.CallID]; ok {
			continue // a duplicate, whatever it verifies as
		}
		if idx, ok := l.index[ln.rec.CallID]; ok {
			e := l.entries[idx]
			ln.inLog, ln.logCL = true, crcLen{e.crc, e.n}
			continue
		}
		ln.check = true
	}
}

// line handles one input line, in input order.
func (im *importer) line(ln *inLine) error {
	switch {
	case ln.blank:
		im.rep.Blank++
		return nil
	case ln.perr != nil:
		return im.untrusted(ln, StatusMalformed, ln.perr.Error(), common.Address{})
	}
	rec := &ln.rec
	cl := crcLen{ln.crc, int32(len(rec.raw))}
	if prev, ok := im.seen[rec.CallID]; ok {
		im.duplicate(ln.no, rec.CallID, prev != cl)
		return nil
	}
	if ln.inLog {
		im.duplicate(ln.no, rec.CallID, ln.logCL != cl)
		return nil
	}
	if ln.res.Status != StatusTrusted {
		return im.untrusted(ln, ln.res.Status, ln.res.Reason, ln.res.Signer)
	}
	to, why := im.foreign(rec.TokenID)
	if why != "" {
		return im.untrusted(ln, StatusForeignToken, why, ln.res.Signer)
	}
	return im.accept(ln, to)
}

func (im *importer) problem(lineNo int, callID string, st Status, reason string, signer common.Address, a Action) {
	if len(im.rep.Problems) == MaxProblems {
		im.rep.ProblemsOmitted++
		return
	}
	p := LineResult{Line: lineNo, CallID: clip(callID), Status: st, Reason: clip(reason), Action: a}
	if signer != (common.Address{}) {
		p.Signer = signer.Hex()
	}
	im.rep.Problems = append(im.rep.Problems, p)
}

func (im *importer) duplicate(lineNo int, callID string, conflict bool) {
	im.rep.Duplicates++
	if conflict {
		im.rep.Conflicts++
		im.problem(lineNo, callID, 0, "callId already present with different bytes; the first one is kept", common.Address{}, ActionDuplicate)
	}
}

// untrusted applies the policy to a line that is not a trusted receipt.
func (im *importer) untrusted(ln *inLine, st Status, reason string, signer common.Address) error {
	callID := ""
	if ln.perr == nil {
		callID = ln.rec.CallID
	}
	if im.policy == PolicyReject {
		im.rep.Rejected++
		im.problem(ln.no, callID, st, reason, signer, ActionRejected)
		if len(im.rejected) < 5 {
			im.rejected = append(im.rejected, fmt.Sprintf("line %d: %s", ln.no, clip(reason)))
		}
		return nil
	}
	if im.q == nil {
		q, err := im.l.openQuarantine()
		if err != nil {
			return err
		}
		im.q = q
	}
	qe := quarantined{source: "import", line: ln.no, reason: reason, status: st, length: ln.n}
	if ln.perr == nil {
		qe.rec = ln.rec.raw
	} else {
		qe.data = ln.data
	}
	written, err := im.q.add(qe, false)
	if err != nil {
		return err
	}
	if !written {
		im.rep.Dropped++
		im.problem(ln.no, callID, st, reason, signer, ActionDropped)
		return nil
	}
	im.rep.Quarantined++
	im.rep.QuarantineFile = im.q.path
	im.problem(ln.no, callID, st, reason, signer, ActionQuarantined)
	return nil
}

// accept spools a trusted receipt for the final append to this log (to
// -1) or to im.dests[to] (or, once the import is rejected, only counts
// it).
func (im *importer) accept(ln *inLine, to int) error {
	rec := &ln.rec
	n := int32(len(rec.raw))
	im.seen[rec.CallID] = crcLen{ln.crc, n}
	if im.rep.Rejected > 0 {
		im.skipped++
		return nil
	}
	if im.spool == nil {
		f, err := os.CreateTemp(filepath.Dir(im.l.path), ".receipts-import-*")
		if err != nil {
			return fmt.Errorf("receipts: import spool: %w", err)
		}
		im.spool, im.spoolW = f, bufio.NewWriterSize(f, 256<<10)
	}
	if _, err := im.spoolW.Write(rec.raw); err != nil {
		return fmt.Errorf("receipts: import spool: %w", err)
	}
	im.accepted = append(im.accepted, entry{callID: rec.CallID, ts: rec.TS, off: im.spoolOff, n: n, crc: ln.crc, token: rec.TokenID})
	im.to = append(im.to, int32(to))
	if to >= 0 {
		im.rep.Routed++
	}
	im.spoolOff += int64(n)
	return nil
}

// commit appends the spooled receipts in reverse input order as one batch
// per log: this one's, then each other agent's.
func (im *importer) commit() error {
	if len(im.accepted) == 0 {
		return nil
	}
	if err := im.spoolW.Flush(); err != nil {
		return fmt.Errorf("receipts: import spool: %w", err)
	}
	added, dups, err := im.appendTo(im.l, -1)
	if err != nil {
		return err
	}
	im.rep.Imported = added
	im.rep.Duplicates += dups
	for i, d := range im.dests {
		added, dups, err := im.appendTo(d.log, i)
		if err != nil {
			return fmt.Errorf("hand receipts of token %s to agent %s: %w", d.token, d.agent, err)
		}
		im.rep.Forwarded = append(im.rep.Forwarded, Forwarded{Agent: d.agent, TokenID: d.token, Imported: added, Duplicates: dups})
	}
	return nil
}

// appendTo appends the spooled receipts bound for l (to: -1 for the
// import's own log, else a dest) as one batch, skipping those already in
// it; it returns how many it added and skipped.
func (im *importer) appendTo(l *Log, to int) (added, dups int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, 0, err
	}
	b := l.newBatch()
	rr := &recordReader{f: im.spool}
	for i := len(im.accepted) - 1; i >= 0; i-- {
		if int(im.to[i]) != to {
			continue
		}
		a := &im.accepted[i]
		if _, dup := l.index[a.callID]; dup || b.has(a.callID) { // appended since we checked, or another agent's
			dups++
			continue
		}
		buf, err := rr.read(a.off, int(a.n))
		if err != nil {
			return 0, 0, fmt.Errorf("receipts: import spool: %w", err)
		}
		if crc32.Checksum(buf, castagnoli) != a.crc {
			return 0, 0, errors.New("receipts: import spool: checksum mismatch")
		}
		if err := b.add(buf, a.callID, a.ts, a.token); err != nil {
			return 0, 0, err
		}
	}
	added, err = b.commit()
	return added, dups, err
}

func (im *importer) rejection() error {
	more := ""
	if im.rep.Rejected > len(im.rejected) {
		more = fmt.Sprintf("; and %d more", im.rep.Rejected-len(im.rejected))
	}
	return fmt.Errorf("%w: %d of %d lines are not receipts signed by a trusted operator (policy reject), log unchanged: %s%s",
		ErrRejected, im.rep.Rejected, im.rep.Lines, strings.Join(im.rejected, "; "), more)
}
