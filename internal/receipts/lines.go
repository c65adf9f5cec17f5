package receipts

// Reading input line by line within a bound, for the log, the quarantine
// file and imported ndjson.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// readLine reads one line of at most max bytes. data is the line with its
// newline, valid until the next call; n counts every byte consumed,
// including those of an over-long line, of which data holds only the
// first max bytes.
func readLine(br *bufio.Reader, acc *[]byte, max int) (data []byte, n int64, complete, tooLong bool, err error) {
	*acc = (*acc)[:0]
	for {
		frag, e := br.ReadSlice('\n')
		n += int64(len(frag))
		if e == nil && len(*acc) == 0 && !tooLong && len(frag) <= max {
			return frag, n, true, false, nil // the common case: no copy
		}
		if room := max - len(*acc); room > 0 {
			*acc = append(*acc, frag[:min(room, len(frag))]...)
		}
		if n > int64(max) {
			tooLong = true
		}
		switch e {
		case nil:
			return *acc, n, true, tooLong, nil
		case bufio.ErrBufferFull:
			continue
		default:
			return *acc, n, false, tooLong, e
		}
	}
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
