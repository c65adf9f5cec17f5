package receipts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/hermesd/hermesd/internal/atomicfile"
)

// Defaults of QuarantineLimits.
const (
	DefaultQuarantineMaxBytes = 16 << 20
	DefaultQuarantineMaxCount = 10_000
)

// QuarantineLimits bound a log's quarantine file. Once it holds MaxCount
// records, or the next record would take it past MaxBytes, Import writes no
// more: further lines are counted in ImportReport.Dropped. Damaged records
// of the log itself are written regardless (they were acknowledged, and
// the log's own size bounds them). Zero fields take the defaults.
type QuarantineLimits struct {
	MaxBytes int64 `json:"maxBytes"`
	MaxCount int   `json:"maxCount"`
}

func (q QuarantineLimits) withDefaults() (QuarantineLimits, error) {
	if q.MaxBytes < 0 || q.MaxCount < 0 {
		return q, fmt.Errorf("receipts: quarantine limits must not be negative (%d bytes, %d records)", q.MaxBytes, q.MaxCount)
	}
	if q.MaxBytes == 0 {
		q.MaxBytes = DefaultQuarantineMaxBytes
	}
	if q.MaxCount == 0 {
		q.MaxCount = DefaultQuarantineMaxCount
	}
	return q, nil
}

// ErrQuarantineFile means the quarantine path is a symbolic link or not a
// regular file; hermesd neither writes through it nor reads it.
var ErrQuarantineFile = errors.New("receipts: quarantine path is not a regular file")

// ErrLogFile means the log path is a symbolic link or not a regular file:
// hermesd never follows a link planted in its state directory.
var ErrLogFile = errors.New("receipts: log path is not a regular file")

// maxQuarantineBytes bounds how much of one line the quarantine keeps; a
// longer line is cut and marked truncated.
const maxQuarantineBytes = MaxReceiptSize + 4096

// maxQuarantineRecord bounds one encoded record (one line of the file). A
// receipt is kept verbatim (at most MaxReceiptSize); other data as text,
// or as base64 (4/3 of maxQuarantineBytes) when escaping would make the
// text longer than this; reasons are clipped to maxFieldBytes.
const maxQuarantineRecord = 3 << 19

// QuarantineRecord is one line of the quarantine file (JSON): what was set
// aside, from where, and why. A receipt that parsed is kept verbatim under
// Receipt; other lines under Text (valid UTF-8) or Base64.
//
// IterateQuarantine reports a line of the file that does not decode as a
// record with Source "quarantine", Line its line number in the quarantine
// file and Reason saying what is wrong.
type QuarantineRecord struct {
	Time      int64           `json:"time"`   // unix seconds
	Source    string          `json:"source"` // "import" or "log"
	File      string          `json:"file,omitempty"`
	Line      int             `json:"line"`
	Status    string          `json:"status,omitempty"`
	Reason    string          `json:"reason"`
	Receipt   json.RawMessage `json:"receipt,omitempty"`
	Text      *string         `json:"text,omitempty"`
	Base64    []byte          `json:"base64,omitempty"`
	Length    int64           `json:"length"` // the line's full length
	Truncated bool            `json:"truncated,omitempty"`
}

// QuarantineInfo describes a log's quarantine file.
type QuarantineInfo struct {
	Path     string `json:"path"`
	Count    int    `json:"count"` // complete records
	Bytes    int64  `json:"bytes"`
	MaxBytes int64  `json:"maxBytes"`
	MaxCount int    `json:"maxCount"`
}

// Full reports whether Import would drop the next line.
func (q QuarantineInfo) Full() bool { return q.Count >= q.MaxCount || q.Bytes >= q.MaxBytes }

// quarantined is one line set aside.
type quarantined struct {
	source string // "import" or "log"
	file   string
	line   int
	reason string
	status Status
	rec    []byte // a parsed receipt's compact JSON, when there is one
	data   []byte // otherwise the raw line (possibly cut)
	length int64  // the line's full length
}

// openQuarantineFile opens the quarantine file with O_NOFOLLOW and checks
// that it is a regular file.
func openQuarantineFile(path string, flag int, perm os.FileMode) (*os.File, int64, error) {
	f, err := openNoFollow(path, flag, perm, ErrQuarantineFile)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%w: %s is a %v", ErrQuarantineFile, path, st.Mode().Type())
	}
	return f, st.Size(), nil
}

// countLines counts newline-terminated lines, streaming.
func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 64<<10)
	n := 0
	for {
		m, err := r.Read(buf)
		n += bytes.Count(buf[:m], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// initQuarantine learns the quarantine file's size, and its record count
// when it is within the byte limit (a larger file is full whatever its
// count), so that imports need not read it.
func (l *Log) initQuarantine() {
	if l.readOnly {
		return // Quarantine counts afresh on every call
	}
	f, size, err := openQuarantineFile(l.QuarantinePath(), os.O_RDONLY, 0)
	if err != nil {
		return // missing; anything else fails when a write opens it
	}
	defer f.Close()
	l.qBytes, l.qCount = size, -1
	if size <= l.qlim.MaxBytes {
		if n, err := countLines(f); err == nil {
			l.qCount = n
		}
	}
}

// quarantineWriter appends records to a log's quarantine file within its
// limits; close fsyncs.
type quarantineWriter struct {
	l       *Log
	path    string
	f       *os.File
	w       *bufio.Writer
	buf     bytes.Buffer
	enc     *json.Encoder
	created bool
	torn    bool // the file ends in a partial line: end it before writing
	bytes   int64
	count   int // -1: unknown, and over the byte limit
}

func (l *Log) openQuarantine() (*quarantineWriter, error) {
	path := l.QuarantinePath()
	_, lerr := os.Lstat(path)
	f, size, err := openQuarantineFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("receipts: open quarantine: %w", err)
	}
	q := &quarantineWriter{l: l, path: path, f: f, created: errors.Is(lerr, fs.ErrNotExist), bytes: size}
	if size > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], size-1); err != nil {
			f.Close()
			return nil, fmt.Errorf("receipts: read quarantine: %w", err)
		}
		q.torn = last[0] != '\n'
	}
	// The file is the truth for its size; the count was learnt at open
	// (or is unknown for an oversized file) and is kept up to date here.
	l.qmu.Lock()
	switch {
	case size == 0:
		l.qCount = 0 // purged or removed behind our back
	case l.qCount < 0 && size <= l.qlim.MaxBytes:
		if n, err := countLines(io.NewSectionReader(f, 0, size)); err == nil {
			l.qCount = n
		}
	}
	l.qBytes = size
	q.count = l.qCount
	l.qmu.Unlock()
	q.w = bufio.NewWriterSize(f, 64<<10)
	q.enc = json.NewEncoder(&q.buf)
	q.enc.SetEscapeHTML(false) // keep receipt bytes as they are
	return q, nil
}

func (q *quarantineWriter) full() bool {
	lim := q.l.qlim
	return q.bytes >= lim.MaxBytes || q.count < 0 || q.count >= lim.MaxCount
}

// add writes e unless the file is full or e would take it past MaxBytes;
// force ignores the limits. It reports whether e was written.
func (q *quarantineWriter) add(e quarantined, force bool) (bool, error) {
	if !force && q.full() {
		return false, nil
	}
	rec := QuarantineRecord{
		Time: time.Now().Unix(), Source: e.source, File: e.file, Line: e.line,
		Reason: clip(e.reason), Length: e.length,
	}
	if e.status != 0 {
		rec.Status = e.status.String()
	}
	switch {
	case e.rec != nil:
		rec.Receipt = e.rec
	case utf8.Valid(e.data):
		s := string(e.data)
		rec.Text = &s
	default:
		rec.Base64 = e.data
	}
	rec.Truncated = e.rec == nil && int64(len(e.data)) < e.length && e.length > maxQuarantineBytes
	q.buf.Reset()
	if err := q.enc.Encode(&rec); err != nil {
		return false, fmt.Errorf("receipts: write quarantine: %w", err)
	}
	if q.buf.Len() > maxQuarantineRecord && rec.Text != nil {
		// Control characters escape to six bytes each: base64 is bounded.
		rec.Text, rec.Base64 = nil, e.data
		q.buf.Reset()
		if err := q.enc.Encode(&rec); err != nil {
			return false, fmt.Errorf("receipts: write quarantine: %w", err)
		}
	}
	n := int64(q.buf.Len())
	if q.torn {
		n++
	}
	if !force && q.bytes+n > q.l.qlim.MaxBytes {
		return false, nil
	}
	if q.torn {
		// The partial line stays, as a line of its own that
		// IterateQuarantine reports as damaged.
		q.w.WriteByte('\n')
		q.torn = false
		if q.count >= 0 {
			q.count++
		}
	}
	if _, err := q.w.Write(q.buf.Bytes()); err != nil {
		return false, fmt.Errorf("receipts: write quarantine: %w", err)
	}
	q.bytes += n
	if q.count >= 0 {
		q.count++
	}
	q.l.qmu.Lock()
	q.l.qBytes, q.l.qCount = q.bytes, q.count
	q.l.qmu.Unlock()
	return true, nil
}

func (q *quarantineWriter) close() error {
	err := q.w.Flush()
	if err == nil && !q.l.noSync {
		err = q.f.Sync()
	}
	if cerr := q.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && q.created && !q.l.noSync {
		err = atomicfile.SyncDir(filepath.Dir(q.path))
	}
	if err != nil {
		return fmt.Errorf("receipts: write quarantine: %w", err)
	}
	return nil
}

func (l *Log) checkOpen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return ErrClosed
	}
	return nil
}

// Quarantine describes the quarantine file: its path, size and number of
// records (counted afresh, so it is right for a read-only log too, while
// the log's owner writes). A missing file is an empty quarantine.
func (l *Log) Quarantine() (QuarantineInfo, error) {
	info := QuarantineInfo{Path: l.QuarantinePath(), MaxBytes: l.qlim.MaxBytes, MaxCount: l.qlim.MaxCount}
	if err := l.checkOpen(); err != nil {
		return info, err
	}
	f, size, err := openQuarantineFile(info.Path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return info, nil
	}
	if err != nil {
		return info, fmt.Errorf("receipts: quarantine: %w", err)
	}
	defer f.Close()
	n, err := countLines(io.NewSectionReader(f, 0, size))
	if err != nil {
		return info, fmt.Errorf("receipts: quarantine: %w", err)
	}
	info.Count, info.Bytes = n, size
	return info, nil
}

// IterateQuarantine calls fn with each record of the quarantine file,
// oldest first, until fn returns false. A partial last line (a record
// being written, or torn by a crash) is not visited. Each line is read
// within a bound, so a damaged file costs at most one record's memory.
func (l *Log) IterateQuarantine(fn func(QuarantineRecord) bool) error {
	if err := l.checkOpen(); err != nil {
		return err
	}
	f, _, err := openQuarantineFile(l.QuarantinePath(), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("receipts: quarantine: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	var acc []byte
	for lineNo := 1; ; lineNo++ {
		data, n, complete, tooLong, rerr := readLine(br, &acc, maxQuarantineRecord+1)
		if n == 0 || !complete {
			if rerr != nil && rerr != io.EOF {
				return fmt.Errorf("receipts: read quarantine: %w", rerr)
			}
			return nil
		}
		var rec QuarantineRecord
		if tooLong {
			rec = damagedRecord(lineNo, n, "record longer than the limit")
			rec.Truncated = true
		} else if err := json.Unmarshal(data, &rec); err != nil {
			rec = damagedRecord(lineNo, n, "unreadable record: "+err.Error())
		}
		if !fn(rec) {
			return nil
		}
	}
}

func damagedRecord(line int, n int64, reason string) QuarantineRecord {
	return QuarantineRecord{Source: "quarantine", Line: line, Status: StatusMalformed.String(), Reason: clip(reason), Length: n}
}

// PurgeQuarantine removes the quarantine file (one atomic unlink; a later
// quarantined line starts a new file) and returns how many records it
// held. A symbolic link or other non-file at the path is removed too,
// without touching what it points to. It waits for a running Import.
func (l *Log) PurgeQuarantine() (removed int, err error) {
	l.importMu.Lock()
	defer l.importMu.Unlock()
	if err := l.checkOpen(); err != nil {
		return 0, err
	}
	if l.readOnly {
		return 0, ErrReadOnly
	}
	path := l.QuarantinePath()
	f, size, err := openQuarantineFile(path, os.O_RDONLY, 0)
	switch {
	case err == nil:
		removed, err = countLines(io.NewSectionReader(f, 0, size))
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("receipts: purge quarantine: %w", err)
		}
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case !errors.Is(err, ErrQuarantineFile):
		return 0, fmt.Errorf("receipts: purge quarantine: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("receipts: purge quarantine: %w", err)
	}
	if err := l.syncDir(); err != nil {
		return 0, fmt.Errorf("receipts: purge quarantine: %w", err)
	}
	l.qmu.Lock()
	l.qBytes, l.qCount = 0, 0
	l.qmu.Unlock()
	return removed, nil
}

// maxFieldBytes bounds a reason or callId copied into a report or a
// quarantine record: hostile input chooses both.
const maxFieldBytes = 256

// clip cuts s to maxFieldBytes at a UTF-8 boundary and marks the cut.
func clip(s string) string {
	if len(s) <= maxFieldBytes {
		return s
	}
	i := maxFieldBytes - 3
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}
