package receipts

import (
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hermesd/hermesd/internal/atomicfile"
)

// logHeader is the first line of every log file.
const logHeader = "hermesd receipts log v1\n"

// frameOverhead is what a record line adds to the JSON: 8 hex digits of
// CRC-32C, a space, and the newline.
const frameOverhead = 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	// ErrCorrupt is matched by a *CorruptError.
	ErrCorrupt = errors.New("receipts: corrupt log")
	// ErrNotLog means the file exists but is not a receipts log.
	ErrNotLog = errors.New("receipts: not a hermesd receipts log")
	// ErrClosed is returned by a closed Log.
	ErrClosed = errors.New("receipts: log closed")
	// ErrNoBytes means a Receipt was not made by Parse or NewSnapshotReceipt.
	ErrNoBytes = errors.New("receipts: receipt has no bytes (build receipts with Parse)")
	// ErrReadOnly is returned by writes to a log opened with ReadOnly.
	ErrReadOnly = errors.New("receipts: log opened read-only")
)

// Options configure OpenLog.
type Options struct {
	// Logger receives warnings about recovery at open; nil discards them.
	Logger *slog.Logger
	// Repair moves damaged records in the middle of the log to the
	// quarantine file and rewrites the log without them, instead of
	// failing with a *CorruptError.
	Repair bool
	// ReadOnly opens an existing log without changing anything, for
	// inspecting a log another process may be appending to: damage after
	// the last intact record is skipped (Recovery says what a writable open
	// would cut), Append, Import and PurgeQuarantine fail with ErrReadOnly,
	// Repair is ignored.
	ReadOnly bool
	// Quarantine bounds the quarantine file; zero fields take the defaults.
	Quarantine QuarantineLimits

	noSync bool // tests only: skip fsync where only the bytes written matter
}

// Recovery describes what OpenLog had to fix.
type Recovery struct {
	// TruncatedBytes were cut from the end: a torn final write (a partial
	// record, garbage or NUL bytes) or a torn header of a new file. With
	// ReadOnly they are only skipped; the file is unchanged.
	TruncatedBytes int64 `json:"truncatedBytes,omitempty"`
	// TornLines are the line numbers of the removed tail.
	TornLines []int `json:"tornLines,omitempty"`
	// Quarantined are line numbers copied to the quarantine file: damaged
	// lines removed by Repair, and complete lines of a torn tail (which a
	// torn write cannot tell apart from a damaged last record).
	Quarantined []int `json:"quarantined,omitempty"`
	// DuplicateLines are intact records whose callId an earlier record
	// already has; they are ignored.
	DuplicateLines []int `json:"duplicateLines,omitempty"`
}

// Log is one agent's durable, append-only receipt log. It is safe for
// concurrent use. Only the index (callId, ts, position) is held in memory;
// receipt bytes are read back from the file when listed or exported.
type Log struct {
	path     string
	logger   *slog.Logger
	recovery Recovery
	noSync   bool
	readOnly bool
	qlim     QuarantineLimits

	importMu sync.Mutex // one Import (or PurgeQuarantine) at a time

	mu      sync.Mutex
	f       *os.File
	size    int64
	entries []entry // in append order; elements never change once added
	index   map[string]int32
	sorted  []int32 // newest-first order of entries; nil when stale
	err     error   // sticky: the file's tail is in an unknown state

	qmu    sync.Mutex
	qBytes int64 // size of the quarantine file
	qCount int   // records in it; -1 until counted (a file over the limit)
}

type entry struct {
	callID string
	ts     int64
	off    int64 // offset of the JSON in the file
	n      int32 // length of the JSON
	crc    uint32
	token  string // the receipt's tokenId, exactly as written; "" when it has none
}

// LogPath is where an agent's receipt log lives in the state directory:
// <stateDir>/agents/<agentID>/receipts.log. agentID must already be
// validated (see CheckAgentID).
func LogPath(stateDir, agentID string) string {
	return filepath.Join(stateDir, "agents", agentID, "receipts.log")
}

// CheckAgentID rejects ids that cannot be a single path element.
func CheckAgentID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\\\x00") {
		return fmt.Errorf("receipts: agent id %q is not a valid directory name", id)
	}
	return nil
}

// QuarantinePath is the quarantine file beside a log.
func QuarantinePath(logPath string) string { return logPath + ".quarantine" }

// OpenLog opens or creates the log at path (and its directory). A torn
// final write is truncated away and reported in Recovery; a damaged record
// before intact ones is a *CorruptError unless opts.Repair is set.
func OpenLog(path string, opts Options) (*Log, error) {
	qlim, err := opts.Quarantine.withDefaults()
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var f *os.File
	if opts.ReadOnly {
		f, err = openNoFollow(path, os.O_RDONLY, 0, ErrLogFile)
	} else {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("receipts: create log dir: %w", err)
		}
		f, err = openNoFollow(path, os.O_RDWR|os.O_CREATE, 0o600, ErrLogFile)
	}
	if err != nil {
		return nil, fmt.Errorf("receipts: open log: %w", err)
	}
	if st, serr := f.Stat(); serr != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s", ErrLogFile, path)
	}
	l := &Log{path: path, logger: logger, f: f, noSync: opts.noSync, readOnly: opts.ReadOnly, qlim: qlim}
	// Before load: repairing the log may add to the quarantine.
	l.initQuarantine()
	if err := l.load(opts.Repair && !opts.ReadOnly); err != nil {
		l.f.Close()
		return nil, err
	}
	return l, nil
}

func (l *Log) sync() error {
	if l.noSync {
		return nil
	}
	return l.f.Sync()
}

func (l *Log) syncDir() error {
	if l.noSync {
		return nil
	}
	return atomicfile.SyncDir(filepath.Dir(l.path))
}

// Path is the log file's path.
func (l *Log) Path() string { return l.path }

// QuarantinePath is where unverifiable or damaged receipts of this log go.
func (l *Log) QuarantinePath() string { return QuarantinePath(l.path) }

// Recovery reports what OpenLog fixed.
func (l *Log) Recovery() Recovery { return l.recovery }

// Close closes the log. Later calls fail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return ErrClosed
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Len is the number of receipts in the log.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Has reports whether a receipt with callID is in the log.
func (l *Log) Has(callID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.index[callID]
	return ok
}

// Get returns the receipt with callID.
func (l *Log) Get(callID string) (Receipt, bool, error) {
	l.mu.Lock()
	i, ok := l.index[callID]
	var e entry
	if ok {
		e = l.entries[i]
	}
	f := l.f
	l.mu.Unlock()
	if !ok {
		return Receipt{}, false, nil
	}
	if f == nil {
		return Receipt{}, false, ErrClosed
	}
	b, err := l.readRecord(&recordReader{f: f}, e)
	if err != nil {
		return Receipt{}, false, err
	}
	r, err := Parse(b)
	return r, err == nil, err
}

// Append adds receipts that are not yet in the log (by callId, also within
// the batch) with one write and one fsync, and returns how many it added.
// On error nothing of the batch is in the log. Append does not verify: it
// is for receipts the caller signed itself (NewSnapshotReceipt); receipts
// from anywhere else go through Import.
func (l *Log) Append(recs ...Receipt) (added int, err error) {
	for i := range recs {
		if len(recs[i].raw) == 0 || recs[i].CallID == "" {
			return 0, ErrNoBytes
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	b := l.newBatch()
	for i := range recs {
		r := &recs[i]
		if _, dup := l.index[r.CallID]; dup || b.has(r.CallID) {
			continue
		}
		if err := b.add(r.raw, r.CallID, r.TS, r.TokenID); err != nil {
			return 0, err
		}
	}
	return b.commit()
}

func (l *Log) usableLocked() error {
	if l.f == nil {
		return ErrClosed
	}
	if l.readOnly {
		return ErrReadOnly
	}
	return l.err
}

// batch accumulates framed records and writes them in large chunks at the
// end of the file; commit makes them durable with one fsync and only then
// adds them to the index.
type batch struct {
	l     *Log
	start int64 // file size before the batch
	off   int64 // where the buffered bytes go
	buf   []byte
	added []entry
	seen  map[string]struct{}
}

const batchChunk = 1 << 20

func (l *Log) newBatch() *batch {
	return &batch{l: l, start: l.size, off: l.size}
}

func (b *batch) has(callID string) bool {
	_, ok := b.seen[callID]
	return ok
}

func (b *batch) add(raw []byte, callID string, ts int64, token string) error {
	if b.seen == nil {
		b.seen = make(map[string]struct{})
	}
	b.seen[callID] = struct{}{}
	crc := crc32.Checksum(raw, castagnoli)
	frameOff := b.off + int64(len(b.buf))
	b.buf = appendFrame(b.buf, crc, raw)
	b.added = append(b.added, entry{callID: callID, ts: ts, off: frameOff + 9, n: int32(len(raw)), crc: crc, token: token})
	if len(b.buf) >= batchChunk {
		return b.flush()
	}
	return nil
}

func appendFrame(buf []byte, crc uint32, raw []byte) []byte {
	const hexd = "0123456789abcdef"
	for s := 28; s >= 0; s -= 4 {
		buf = append(buf, hexd[crc>>uint(s)&0xf])
	}
	buf = append(buf, ' ')
	buf = append(buf, raw...)
	return append(buf, '\n')
}

func (b *batch) flush() error {
	if len(b.buf) == 0 {
		return nil
	}
	if _, err := b.l.f.WriteAt(b.buf, b.off); err != nil {
		return b.abort(fmt.Errorf("receipts: append: %w", err), false)
	}
	b.off += int64(len(b.buf))
	b.buf = b.buf[:0]
	return nil
}

func (b *batch) commit() (int, error) {
	if len(b.added) == 0 {
		return 0, nil
	}
	if err := b.flush(); err != nil {
		return 0, err
	}
	if err := b.l.sync(); err != nil {
		return 0, b.abort(fmt.Errorf("receipts: sync log: %w", err), true)
	}
	l := b.l
	l.size = b.off
	base := int32(len(l.entries))
	for i, e := range b.added {
		l.index[e.callID] = base + int32(i)
	}
	l.entries = append(l.entries, b.added...)
	l.sorted = nil
	return len(b.added), nil
}

// abort cuts the batch's bytes off again. After a failed fsync the page
// cache no longer says what is on disk, so the log refuses further use and
// must be reopened (which re-reads and checks the file).
func (b *batch) abort(err error, poison bool) error {
	if terr := b.l.f.Truncate(b.start); terr != nil {
		poison = true
	}
	if poison {
		b.l.err = fmt.Errorf("receipts: log unusable after failed write, reopen it: %w", err)
	}
	return err
}

// view returns the newest-first order and the entries it indexes. Both are
// immutable: appends build new slices.
func (l *Log) view() ([]int32, []entry, *os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil, nil, nil, ErrClosed
	}
	if l.sorted == nil {
		l.sorted = newestFirst(l.entries)
	}
	return l.sorted, l.entries, l.f, nil
}

// newestFirst orders entries by ts descending; among equal ts, the later
// append comes first.
func newestFirst(entries []entry) []int32 {
	order := make([]int32, len(entries))
	for i := range order {
		order[i] = int32(len(entries) - 1 - i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		return cmp.Compare(entries[b].ts, entries[a].ts)
	})
	return order
}

// readRecord reads an entry's JSON through rr and checks it against its
// checksum. The result is valid until the next read.
func (l *Log) readRecord(rr *recordReader, e entry) ([]byte, error) {
	b, err := rr.read(e.off, int(e.n))
	if err != nil {
		if errors.Is(err, os.ErrClosed) {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("receipts: read record: %w", err)
	}
	if crc32.Checksum(b, castagnoli) != e.crc {
		return nil, &CorruptError{Path: l.path, Offset: e.off - 9, Reason: "checksum mismatch (the file changed after it was opened)"}
	}
	return b, nil
}

// readWindow is how much recordReader reads ahead.
const readWindow = 1 << 20

// nearGap is how far apart two reads may be and still count as a walk:
// records in the log are separated by their framing.
const nearGap = 64

// recordReader serves reads of byte ranges. A read right after (or right
// before) the previous one starts a walk, and walks read a whole window at
// once, so going through records in file order or in reverse (newest first
// is usually reverse append order) costs one pread per window instead of
// one per record. Scattered reads fetch just the record.
type recordReader struct {
	f     io.ReaderAt
	win   []byte
	start int64 // file offset of win[0]
	n     int   // valid bytes in win
}

func (rr *recordReader) read(off int64, n int) ([]byte, error) {
	end := off + int64(n)
	wend := rr.start + int64(rr.n)
	if off >= rr.start && end <= wend {
		return rr.win[off-rr.start : end-rr.start], nil
	}
	ws, size := off, n // a scattered read
	switch {
	case n >= readWindow || rr.n == 0:
	case off >= wend && off-wend <= nearGap: // walking forward
		size = readWindow
	case end <= rr.start && rr.start-end <= nearGap: // walking backward
		ws = max(0, end-readWindow)
		size = int(end - ws)
	}
	if cap(rr.win) < size {
		rr.win = make([]byte, max(size, min(readWindow, 4*n)))
	}
	m, err := rr.f.ReadAt(rr.win[:size], ws)
	rr.start, rr.n = ws, m
	if end > ws+int64(m) {
		rr.n = 0
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return rr.win[off-ws : end-ws], nil
}

// Iterate calls fn with each receipt, newest first (ts descending; equal ts:
// later append first), until fn returns false. Appends made while it runs
// are not visited. fn may call other methods of the log.
func (l *Log) Iterate(fn func(Receipt) bool) error {
	order, entries, f, err := l.view()
	if err != nil {
		return err
	}
	rr := &recordReader{f: f}
	for _, i := range order {
		b, err := l.readRecord(rr, entries[i])
		if err != nil {
			return err
		}
		r, err := Parse(b)
		if err != nil {
			return fmt.Errorf("receipts: stored record %s: %w", entries[i].callID, err)
		}
		if !fn(r) {
			return nil
		}
	}
	return nil
}

// All returns every receipt, newest first.
func (l *Log) All() ([]Receipt, error) {
	var out []Receipt
	err := l.Iterate(func(r Receipt) bool {
		out = append(out, r)
		return true
	})
	return out, err
}
