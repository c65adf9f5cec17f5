package receipts

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/hermesd/hermesd/internal/atomicfile"
)

// Opening a log: reading it back, cutting a torn final write, and
// repairing (or refusing) damage in the middle. Lines taken out of the log
// go to the quarantine file.

// CorruptError reports a damaged record in the log: one that is followed by
// intact records, so it is not a torn final write but lost or altered data.
type CorruptError struct {
	Path   string
	Line   int   // 1-based line number in the file (the header is line 1); 0 if unknown
	Offset int64 // byte offset of the line
	Reason string
	More   int // further damaged lines after this one
}

func (e *CorruptError) Error() string {
	var s string
	if e.Line > 0 {
		s = fmt.Sprintf("receipts: %s:%d: corrupt record at byte %d: %s", e.Path, e.Line, e.Offset, e.Reason)
	} else {
		s = fmt.Sprintf("receipts: %s: corrupt record at byte %d: %s", e.Path, e.Offset, e.Reason)
	}
	if e.More > 0 {
		s += fmt.Sprintf(" (and %d more damaged line(s))", e.More)
	}
	return s + "; reopen with repair to move damaged lines to the quarantine file"
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// badLine is a line that is not an intact record.
type badLine struct {
	line     int
	off, n   int64
	reason   string
	complete bool // ended with a newline
}

// load reads the whole file and builds the index.
func (l *Log) load(repair bool) error {
	l.entries, l.index, l.sorted = nil, make(map[string]int32), nil
	st, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("receipts: stat log: %w", err)
	}
	size := st.Size()
	hdrLen := int64(len(logHeader))
	head := make([]byte, min(size, 4096))
	if _, err := l.f.ReadAt(head, 0); err != nil && err != io.EOF {
		return fmt.Errorf("receipts: read log: %w", err)
	}
	if size < hdrLen || string(head[:hdrLen]) != logHeader {
		if size > 4096 || !tornHeader(head) {
			return fmt.Errorf("%w: %s", ErrNotLog, l.path)
		}
		// A new file whose creation was cut short: start it again.
		if size > 0 {
			l.recovery.TruncatedBytes += size
			l.logger.Warn("receipt log: torn header rewritten", "path", l.path, "bytes", size)
		}
		if l.readOnly {
			return nil // an empty log; size 0 stops any write
		}
		if err := l.f.Truncate(0); err != nil {
			return fmt.Errorf("receipts: reset log: %w", err)
		}
		if _, err := l.f.WriteAt([]byte(logHeader), 0); err != nil {
			return fmt.Errorf("receipts: write log header: %w", err)
		}
		if err := l.sync(); err != nil {
			return fmt.Errorf("receipts: sync log: %w", err)
		}
		if err := l.syncDir(); err != nil {
			return fmt.Errorf("receipts: %w", err)
		}
		l.size = hdrLen
		return nil
	}

	br := bufio.NewReaderSize(io.NewSectionReader(l.f, hdrLen, size-hdrLen), int(min(256<<10, max(4096, size-hdrLen))))
	var acc []byte
	var pending, corrupt []badLine
	tokens := map[string]string{} // one copy of each token id: an agent's receipts share a few
	off, lastGoodEnd, lineNo := hdrLen, hdrLen, 1
	for {
		data, n, complete, tooLong, rerr := readLine(br, &acc, MaxReceiptSize+frameOverhead)
		if n == 0 {
			if rerr != nil && rerr != io.EOF {
				return fmt.Errorf("receipts: read log: %w", rerr)
			}
			break
		}
		lineNo++
		var reason string
		var e entry
		switch {
		case tooLong:
			reason = "record longer than the limit"
		case !complete:
			reason = "incomplete record (no newline)"
		default:
			e, reason = decodeRecord(data, off)
		}
		if reason == "" {
			corrupt, pending = append(corrupt, pending...), pending[:0]
			if _, dup := l.index[e.callID]; dup {
				l.recovery.DuplicateLines = append(l.recovery.DuplicateLines, lineNo)
				l.logger.Warn("receipt log: duplicate callId ignored", "path", l.path, "line", lineNo, "callId", e.callID)
			} else {
				if t, ok := tokens[e.token]; ok {
					e.token = t
				} else if len(tokens) < 1024 {
					tokens[e.token] = e.token
				}
				l.index[e.callID] = int32(len(l.entries))
				l.entries = append(l.entries, e)
			}
			lastGoodEnd = off + n
		} else {
			pending = append(pending, badLine{line: lineNo, off: off, n: n, reason: reason, complete: complete})
		}
		off += n
		if rerr != nil && rerr != io.EOF {
			return fmt.Errorf("receipts: read log: %w", rerr)
		}
	}
	l.size = off

	if len(corrupt) > 0 {
		if !repair {
			c := corrupt[0]
			return &CorruptError{Path: l.path, Line: c.line, Offset: c.off, Reason: c.reason, More: len(corrupt) - 1}
		}
		return l.repair(corrupt, pending, lastGoodEnd)
	}
	if len(pending) > 0 {
		return l.cutTail(pending, lastGoodEnd)
	}
	return nil
}

// tornHeader reports whether b is a proper prefix of the header followed
// only by NUL bytes (a crash while the file was being created).
func tornHeader(b []byte) bool {
	i := 0
	for i < len(b) && i < len(logHeader) && b[i] == logHeader[i] {
		i++
	}
	if i == len(logHeader) {
		return false
	}
	for _, c := range b[i:] {
		if c != 0 {
			return false
		}
	}
	return true
}

// decodeRecord checks one framed line: "<crc32c hex> <compact json>\n".
func decodeRecord(line []byte, off int64) (entry, string) {
	if len(line) < frameOverhead+2 || line[8] != ' ' {
		return entry{}, "bad framing"
	}
	var crcb [4]byte
	if _, err := hex.Decode(crcb[:], line[:8]); err != nil {
		return entry{}, "bad checksum field"
	}
	crc := uint32(crcb[0])<<24 | uint32(crcb[1])<<16 | uint32(crcb[2])<<8 | uint32(crcb[3])
	js := line[9 : len(line)-1]
	if crc32.Checksum(js, castagnoli) != crc {
		return entry{}, "checksum mismatch"
	}
	r, err := Parse(js)
	if err != nil {
		return entry{}, err.Error()
	}
	if !bytes.Equal(r.raw, js) {
		return entry{}, "record is not compact JSON"
	}
	return entry{callID: r.CallID, ts: r.TS, off: off + 9, n: int32(len(js)), crc: crc, token: r.TokenID}, ""
}

// cutTail removes a torn final write. Complete lines in it go to the
// quarantine file first: a torn write rarely leaves a newline-terminated
// line, bit rot in the last record does, and that record was acknowledged.
func (l *Log) cutTail(tail []badLine, end int64) error {
	cut := l.size - end
	for _, b := range tail {
		l.recovery.TornLines = append(l.recovery.TornLines, b.line)
	}
	l.recovery.TruncatedBytes += cut
	if l.readOnly {
		// Possibly a batch being written right now by the log's owner.
		l.size = end
		return nil
	}
	if err := l.quarantineLines(tail, func(b badLine) bool { return b.complete }); err != nil {
		return err
	}
	l.logger.Warn("receipt log: torn final write removed", "path", l.path,
		"bytes", cut, "first_line", tail[0].line, "reason", tail[0].reason)
	if err := l.f.Truncate(end); err != nil {
		return fmt.Errorf("receipts: truncate torn tail: %w", err)
	}
	if err := l.sync(); err != nil {
		return fmt.Errorf("receipts: sync log: %w", err)
	}
	l.size = end
	return nil
}

// repair quarantines damaged lines and the torn tail, rewrites the log
// without them, and loads it again.
func (l *Log) repair(corrupt, tail []badLine, end int64) error {
	if err := l.quarantineLines(corrupt, func(badLine) bool { return true }); err != nil {
		return err
	}
	if err := l.quarantineLines(tail, func(b badLine) bool { return b.complete }); err != nil {
		return err
	}
	af, err := atomicfile.Create(l.path, 0o600)
	if err != nil {
		return fmt.Errorf("receipts: repair: %w", err)
	}
	defer af.Abort()
	w := bufio.NewWriterSize(af, 1<<20)
	w.WriteString(logHeader)
	pos := int64(len(logHeader))
	for _, c := range corrupt {
		if _, err := io.Copy(w, io.NewSectionReader(l.f, pos, c.off-pos)); err != nil {
			return fmt.Errorf("receipts: repair: %w", err)
		}
		pos = c.off + c.n
	}
	if _, err := io.Copy(w, io.NewSectionReader(l.f, pos, end-pos)); err != nil {
		return fmt.Errorf("receipts: repair: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("receipts: repair: %w", err)
	}
	if err := af.Commit(); err != nil {
		return fmt.Errorf("receipts: repair: %w", err)
	}
	for _, c := range corrupt {
		l.recovery.Quarantined = append(l.recovery.Quarantined, c.line)
	}
	for _, b := range tail {
		l.recovery.TornLines = append(l.recovery.TornLines, b.line)
	}
	l.recovery.TruncatedBytes += l.size - end
	l.logger.Warn("receipt log: damaged records moved to quarantine", "path", l.path,
		"lines", len(corrupt), "quarantine", l.QuarantinePath())
	f, err := openNoFollow(l.path, os.O_RDWR, 0, ErrLogFile)
	if err != nil {
		return fmt.Errorf("receipts: reopen repaired log: %w", err)
	}
	l.f.Close()
	l.f = f
	dups := l.recovery.DuplicateLines
	l.recovery.DuplicateLines = nil
	err = l.load(false)
	l.recovery.DuplicateLines = dups // line numbers of the original file
	return err
}

// quarantineLines copies the selected lines of the log file to the
// quarantine file, one at a time. They ignore the quarantine's limits:
// they were acknowledged receipts, and the log's own size bounds them.
func (l *Log) quarantineLines(lines []badLine, sel func(badLine) bool) error {
	var qw *quarantineWriter
	var buf []byte
	for _, b := range lines {
		if !sel(b) {
			continue
		}
		if qw == nil {
			var err error
			if qw, err = l.openQuarantine(); err != nil {
				return err
			}
		}
		if n := int(min(b.n, maxQuarantineBytes)); cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:min(b.n, maxQuarantineBytes)]
		if _, err := l.f.ReadAt(buf, b.off); err != nil && err != io.EOF {
			qw.close()
			return fmt.Errorf("receipts: read damaged line: %w", err)
		}
		q := quarantined{source: "log", file: l.path, line: b.line, reason: b.reason,
			data: bytes.TrimSuffix(buf, []byte("\n")), length: b.n}
		if _, err := qw.add(q, true); err != nil {
			qw.close()
			return err
		}
	}
	if qw == nil {
		return nil
	}
	return qw.close()
}
