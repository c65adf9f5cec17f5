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
	"strings"

	"github.com/ethereum/go-ethereum/common"
)

// Policy decides what Import does with a line that does not verify
// (unsigned, bad signature, missing digest fields, bad hermesd binding, or
// not a receipt at all). A valid signature by an unknown signer is not
// unverifiable: it is imported under every policy and flagged, because
// dropping it would also drop it from every later snapshot of the brain.
type Policy int

const (
	// PolicyQuarantine (the default) writes unverifiable lines to the
	// quarantine file beside the log and does not import them.
	PolicyQuarantine Policy = iota
	// PolicyKeep imports unverifiable receipts, flagged in the report.
	// Lines that are not receipts cannot be kept; they are quarantined.
	PolicyKeep
	// PolicyReject aborts the whole import, leaving the log unchanged,
	// if any line is unverifiable.
	PolicyReject
)

// ParsePolicy parses "keep", "quarantine" or "reject".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "quarantine":
		return PolicyQuarantine, nil
	case "keep":
		return PolicyKeep, nil
	case "reject":
		return PolicyReject, nil
	}
	return 0, fmt.Errorf("receipts: policy %q is not one of keep, quarantine, reject", s)
}

func (p Policy) String() string {
	switch p {
	case PolicyQuarantine:
		return "quarantine"
	case PolicyKeep:
		return "keep"
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
	ActionRejected    Action = "rejected"
	ActionSkipped     Action = "skipped" // acceptable, but the import was rejected
)

// LineResult describes one input line that was not a clean import.
type LineResult struct {
	Line   int    `json:"line"`             // 1-based
	CallID string `json:"callId,omitempty"` // "" when the line is not a receipt
	Status Status `json:"status,omitempty"` // 0 for a conflicting duplicate
	Reason string `json:"reason,omitempty"`
	Action Action `json:"action"`
}

// ImportReport accounts for every line of the input:
// Lines = Blank + Imported + Duplicates + Quarantined + Rejected + Skipped.
type ImportReport struct {
	Lines       int `json:"lines"`
	Blank       int `json:"blank"`
	Imported    int `json:"imported"`
	Flagged     int `json:"flagged"`    // imported although not signed by a trusted operator
	Duplicates  int `json:"duplicates"` // callId already in the log or earlier in the input
	Conflicts   int `json:"conflicts"`  // duplicates whose bytes differ (CRC-32C or length)
	Quarantined int `json:"quarantined"`
	Rejected    int `json:"rejected"`
	Skipped     int `json:"skipped"` // acceptable lines not imported because the import was rejected
	// Problems lists, in line order, every line that was flagged,
	// quarantined, rejected, skipped while flagged, or a conflicting
	// duplicate.
	Problems []LineResult `json:"problems,omitempty"`
	// QuarantineFile is where quarantined lines went ("" if none).
	QuarantineFile string `json:"quarantineFile,omitempty"`
}

// maxImportLine bounds one input line before trimming; past it the line is
// malformed (and only its start is quarantined).
const maxImportLine = MaxReceiptSize + 4096

// spooled is an accepted input line waiting in the spool file.
type spooled struct {
	entry
	flagged bool
	problem int // index in Problems, or -1
}

// Import reads receipts (ndjson: one compact JSON receipt per line, so a
// single receipt is a one-line input) and adds the new ones
// to the log. Each line is parsed and verified against trusted; blank lines
// are counted and skipped; unverifiable lines follow policy; duplicates (by
// callId) are counted. Nothing is dropped without a count and, unless it is
// a plain duplicate, a line number in Problems. There are no network side
// effects.
//
// Accepted receipts are appended as one batch (one fsync) in reverse input
// order, so that among equal ts the first line of the input is the newest:
// importing an exported receipts.ndjson into an empty log and exporting
// again reproduces it byte for byte. The batch is spooled to a temporary
// file beside the log first, so memory stays bounded by the index.
func (l *Log) Import(ctx context.Context, r io.Reader, policy Policy, trusted []common.Address) (ImportReport, error) {
	l.importMu.Lock()
	defer l.importMu.Unlock()
	var rep ImportReport
	if policy < PolicyQuarantine || policy > PolicyReject {
		return rep, fmt.Errorf("receipts: import: unknown %v", policy)
	}
	l.mu.Lock()
	err := l.usableLocked()
	l.mu.Unlock()
	if err != nil {
		return rep, err
	}

	im := &importer{l: l, policy: policy, rep: &rep, seen: make(map[string]crcLen)}
	defer im.cleanup()
	br := bufio.NewReaderSize(r, 64<<10)
	var acc []byte
	for {
		data, n, _, tooLong, rerr := readLine(br, &acc, maxImportLine)
		if n == 0 {
			if rerr != nil && rerr != io.EOF {
				return rep, fmt.Errorf("receipts: import: read: %w", rerr)
			}
			break
		}
		rep.Lines++
		if rep.Lines&255 == 0 {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
		}
		if err := im.line(rep.Lines, data, n, tooLong, trusted); err != nil {
			return rep, err
		}
		if rerr != nil && rerr != io.EOF {
			return rep, fmt.Errorf("receipts: import: read: %w", rerr)
		}
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if im.q != nil {
		err := im.q.close()
		im.q = nil
		if err != nil {
			return rep, err
		}
	}
	if policy == PolicyReject && rep.Rejected > 0 {
		rep.Skipped = len(im.accepted)
		for _, a := range im.accepted {
			if a.problem >= 0 {
				rep.Problems[a.problem].Action = ActionSkipped
			}
		}
		return rep, im.rejection()
	}
	return rep, im.commit()
}

type crcLen struct {
	crc uint32
	n   int32
}

type importer struct {
	l        *Log
	policy   Policy
	rep      *ImportReport
	seen     map[string]crcLen // callIds accepted from this input
	accepted []spooled
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

// line handles one input line.
func (im *importer) line(lineNo int, data []byte, n int64, tooLong bool, trusted []common.Address) error {
	rep := im.rep
	var rec Receipt
	var perr error
	if tooLong {
		perr = fmt.Errorf("%w: line of %d bytes exceeds the limit", ErrTooLarge, n)
	} else {
		data = trimLine(data)
		if len(data) == 0 {
			rep.Blank++
			return nil
		}
		rec, perr = Parse(data)
	}
	if perr != nil {
		return im.unverifiable(lineNo, nil, data, n, StatusMalformed, perr.Error())
	}

	crc := crc32.Checksum(rec.raw, castagnoli)
	cl := crcLen{crc, int32(len(rec.raw))}
	if prev, ok := im.seen[rec.CallID]; ok {
		im.duplicate(lineNo, rec.CallID, prev != cl)
		return nil
	}
	im.l.mu.Lock()
	idx, inLog := im.l.index[rec.CallID]
	var prev crcLen
	if inLog {
		e := im.l.entries[idx]
		prev = crcLen{e.crc, e.n}
	}
	im.l.mu.Unlock()
	if inLog {
		im.duplicate(lineNo, rec.CallID, prev != cl)
		return nil
	}

	res, _ := Verify(&rec, trusted)
	switch res.Status {
	case StatusTrusted:
		return im.accept(rec, crc, false, -1)
	case StatusUnknownSigner:
		p := im.problem(lineNo, rec.CallID, res.Status, res.Reason, ActionImported)
		return im.accept(rec, crc, true, p)
	}
	return im.unverifiable(lineNo, &rec, data, n, res.Status, res.Reason)
}

// ScanLines calls fn for each line of r the way Import reads it: the
// 1-based line number and the line without its newline and surrounding
// white space (blank lines included, as empty slices). A line longer than
// the import limit is passed as nil with an error matching ErrTooLarge.
// line is valid only during the call. An error from fn stops the scan and
// is returned.
func ScanLines(r io.Reader, fn func(n int, line []byte, err error) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var acc []byte
	for n := 1; ; n++ {
		data, size, _, tooLong, rerr := readLine(br, &acc, maxImportLine)
		if size == 0 {
			if rerr != nil && rerr != io.EOF {
				return fmt.Errorf("receipts: read: %w", rerr)
			}
			return nil
		}
		var err error
		if tooLong {
			data, err = nil, fmt.Errorf("%w: line of %d bytes exceeds the limit", ErrTooLarge, size)
		} else {
			data = trimLine(data)
		}
		if err := fn(n, data, err); err != nil {
			return err
		}
		if rerr != nil && rerr != io.EOF {
			return fmt.Errorf("receipts: read: %w", rerr)
		}
	}
}

// trimLine removes what JavaScript's String.prototype.trim removes at the
// ends that matters here: Unicode white space and a byte-order mark.
func trimLine(b []byte) []byte {
	for {
		t := bytes.TrimSpace(b)
		t = bytes.TrimPrefix(t, []byte("\uFEFF"))
		t = bytes.TrimSuffix(t, []byte("\uFEFF"))
		if len(t) == len(b) {
			return t
		}
		b = t
	}
}

func (im *importer) problem(lineNo int, callID string, st Status, reason string, a Action) int {
	im.rep.Problems = append(im.rep.Problems, LineResult{Line: lineNo, CallID: callID, Status: st, Reason: reason, Action: a})
	return len(im.rep.Problems) - 1
}

func (im *importer) duplicate(lineNo int, callID string, conflict bool) {
	im.rep.Duplicates++
	if conflict {
		im.rep.Conflicts++
		im.problem(lineNo, callID, 0, "callId already present with different bytes; the first one is kept", ActionDuplicate)
	}
}

// unverifiable applies the policy to a line that did not verify. rec is nil
// when the line is not a receipt.
func (im *importer) unverifiable(lineNo int, rec *Receipt, data []byte, n int64, st Status, reason string) error {
	callID := ""
	if rec != nil {
		callID = rec.CallID
	}
	switch {
	case im.policy == PolicyReject:
		im.rep.Rejected++
		im.problem(lineNo, callID, st, reason, ActionRejected)
		return nil
	case im.policy == PolicyKeep && rec != nil:
		p := im.problem(lineNo, callID, st, reason, ActionImported)
		return im.accept(*rec, crc32.Checksum(rec.raw, castagnoli), true, p)
	}
	im.rep.Quarantined++
	im.problem(lineNo, callID, st, reason, ActionQuarantined)
	if im.q == nil {
		q, err := openQuarantine(im.l.QuarantinePath(), im.l.noSync)
		if err != nil {
			return err
		}
		im.q = q
		im.rep.QuarantineFile = q.path
	}
	qe := quarantined{source: "import", line: lineNo, reason: reason, status: st, length: n}
	if rec != nil {
		qe.rec = rec.raw
	} else {
		qe.data = data
	}
	return im.q.add(qe)
}

// accept spools a receipt for the final append.
func (im *importer) accept(rec Receipt, crc uint32, flagged bool, problem int) error {
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
	n := int32(len(rec.raw))
	im.seen[rec.CallID] = crcLen{crc, n}
	im.accepted = append(im.accepted, spooled{
		entry:   entry{callID: rec.CallID, ts: rec.TS, off: im.spoolOff, n: n, crc: crc},
		flagged: flagged, problem: problem,
	})
	im.spoolOff += int64(n)
	return nil
}

// commit appends the spooled receipts in reverse input order as one batch.
func (im *importer) commit() error {
	if len(im.accepted) == 0 {
		return nil
	}
	if err := im.spoolW.Flush(); err != nil {
		return fmt.Errorf("receipts: import spool: %w", err)
	}
	l := im.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	b := l.newBatch()
	rr := &recordReader{f: im.spool}
	var added []*spooled
	for i := len(im.accepted) - 1; i >= 0; i-- {
		a := &im.accepted[i]
		if _, dup := l.index[a.callID]; dup { // appended since we checked
			im.rep.Duplicates++
			if a.problem >= 0 {
				im.rep.Problems[a.problem].Action = ActionDuplicate
			}
			continue
		}
		buf, err := rr.read(a.off, int(a.n))
		if err != nil {
			return fmt.Errorf("receipts: import spool: %w", err)
		}
		if crc32.Checksum(buf, castagnoli) != a.crc {
			return errors.New("receipts: import spool: checksum mismatch")
		}
		if err := b.add(buf, a.callID, a.ts); err != nil {
			return err
		}
		added = append(added, a)
	}
	if _, err := b.commit(); err != nil {
		return err
	}
	for _, a := range added {
		im.rep.Imported++
		if a.flagged {
			im.rep.Flagged++
		}
	}
	return nil
}

func (im *importer) rejection() error {
	var first []string
	for _, p := range im.rep.Problems {
		if p.Action == ActionRejected {
			first = append(first, fmt.Sprintf("line %d: %s", p.Line, p.Reason))
			if len(first) == 5 {
				break
			}
		}
	}
	more := ""
	if im.rep.Rejected > len(first) {
		more = fmt.Sprintf("; and %d more", im.rep.Rejected-len(first))
	}
	return fmt.Errorf("%w: %d of %d lines do not verify (policy reject), log unchanged: %s%s",
		ErrRejected, im.rep.Rejected, im.rep.Lines, strings.Join(first, "; "), more)
}
