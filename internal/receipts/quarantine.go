package receipts

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/hermesd/hermesd/internal/atomicfile"
)

// maxQuarantineBytes bounds how much of one line the quarantine keeps; a
// longer line is cut and marked truncated.
const maxQuarantineBytes = MaxReceiptSize + 4096

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

// quarantineRecord is one line of the quarantine file (JSON): what was set
// aside, from where, and why. A receipt that parsed is kept verbatim under
// "receipt"; other lines under "text" (valid UTF-8) or "base64".
type quarantineRecord struct {
	Time      int64           `json:"time"`
	Source    string          `json:"source"`
	File      string          `json:"file,omitempty"`
	Line      int             `json:"line"`
	Status    string          `json:"status,omitempty"`
	Reason    string          `json:"reason"`
	Receipt   json.RawMessage `json:"receipt,omitempty"`
	Text      *string         `json:"text,omitempty"`
	Base64    []byte          `json:"base64,omitempty"`
	Length    int64           `json:"length"`
	Truncated bool            `json:"truncated,omitempty"`
}

// quarantineWriter appends records to a quarantine file; close fsyncs.
type quarantineWriter struct {
	path    string
	f       *os.File
	w       *bufio.Writer
	enc     *json.Encoder
	created bool
	noSync  bool
	n       int
}

func openQuarantine(path string, noSync bool) (*quarantineWriter, error) {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("receipts: open quarantine: %w", err)
	}
	w := bufio.NewWriterSize(f, 256<<10)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // keep receipt bytes as they are
	return &quarantineWriter{path: path, f: f, w: w, enc: enc, created: errors.Is(statErr, os.ErrNotExist), noSync: noSync}, nil
}

func (q *quarantineWriter) add(e quarantined) error {
	rec := quarantineRecord{
		Time: time.Now().Unix(), Source: e.source, File: e.file, Line: e.line,
		Reason: e.reason, Length: e.length,
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
	if err := q.enc.Encode(&rec); err != nil {
		return fmt.Errorf("receipts: write quarantine: %w", err)
	}
	q.n++
	return nil
}

func (q *quarantineWriter) close() error {
	err := q.w.Flush()
	if err == nil && !q.noSync {
		err = q.f.Sync()
	}
	if cerr := q.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && q.created && !q.noSync {
		err = atomicfile.SyncDir(filepath.Dir(q.path))
	}
	if err != nil {
		return fmt.Errorf("receipts: write quarantine: %w", err)
	}
	return nil
}
