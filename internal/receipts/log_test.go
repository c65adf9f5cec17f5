package receipts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func frame(raw []byte) []byte { return appendFrame(nil, crc32.Checksum(raw, castagnoli), raw) }

// sampleReceipts returns n runtime-shaped receipts, unsigned, ts ascending.
func sampleReceipts(t testing.TB, n int) []Receipt {
	t.Helper()
	out := make([]Receipt, n)
	for i := range out {
		out[i] = mustParse(t, runtimeReceipt(runtimeParams{TokenID: 3, CallID: fmt.Sprintf("call-%04d", i), Seq: i, TS: 1700000000 + int64(i)}))
	}
	return out
}

func receiptBytes(t testing.TB, l *Log) []string {
	t.Helper()
	all, err := l.All()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(all))
	for i, r := range all {
		out[i] = r.String()
	}
	return out
}

func TestLogAppendDedupReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents", "a1", "receipts.log")
	l, err := OpenLog(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs := sampleReceipts(t, 4)
	if n, err := l.Append(rs[0], rs[1]); n != 2 || err != nil {
		t.Fatalf("Append = %d, %v", n, err)
	}
	if n, err := l.Append(rs[1]); n != 0 || err != nil {
		t.Fatalf("duplicate Append = %d, %v", n, err)
	}
	if n, err := l.Append(rs[2], rs[2], rs[3], rs[0]); n != 2 || err != nil {
		t.Fatalf("batch with duplicates = %d, %v", n, err)
	}
	if n, err := l.Append(); n != 0 || err != nil {
		t.Fatalf("empty Append = %d, %v", n, err)
	}
	if l.Len() != 4 || !l.Has("call-0002") || l.Has("nope") {
		t.Fatalf("Len = %d", l.Len())
	}
	got, ok, err := l.Get("call-0001")
	if err != nil || !ok || got.String() != rs[1].String() {
		t.Fatalf("Get = %v %v", ok, err)
	}
	want := receiptBytes(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// The file is the header and one framed record per line.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if lines[0] != strings.TrimSuffix(logHeader, "\n") || len(lines) != 5 {
		t.Fatalf("file:\n%s", b)
	}
	for i, line := range lines[1:] {
		if line != string(frame(rs[i].Bytes()))[:len(line)] {
			t.Fatalf("line %d = %q", i+2, line)
		}
	}

	l, err = OpenLog(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !slices.Equal(receiptBytes(t, l), want) || l.Len() != 4 {
		t.Fatal("reopened log differs")
	}
	if rec := l.Recovery(); rec.TruncatedBytes != 0 || len(rec.TornLines)+len(rec.Quarantined)+len(rec.DuplicateLines) != 0 {
		t.Fatalf("clean log reported recovery %+v", rec)
	}
	if n, _ := l.Append(rs...); n != 0 {
		t.Fatal("dedup index not rebuilt on open")
	}
}

func TestLogNewestFirst(t *testing.T) {
	l := openTestLog(t, Options{noSync: true})
	mk := func(id string, ts int64) Receipt {
		return mustParse(t, fmt.Appendf(nil, `{"callId":%q,"ts":%d}`, id, ts))
	}
	l.Append(mk("a", 5))
	l.Append(mk("b", 7), mk("c", 5))
	l.Append(mk("d", 9))
	l.Append(mk("e", 7), mk("f", 1), mk("g", 9))
	var ids []string
	l.Iterate(func(r Receipt) bool { ids = append(ids, r.CallID); return true })
	// ts descending; equal ts: later append first.
	if want := []string{"g", "d", "e", "b", "c", "a", "f"}; !slices.Equal(ids, want) {
		t.Fatalf("order %v, want %v", ids, want)
	}
	// Iterate stops when fn returns false.
	n := 0
	l.Iterate(func(Receipt) bool { n++; return n < 2 })
	if n != 2 {
		t.Fatalf("visited %d", n)
	}
	// Same order after reopen.
	path := l.Path()
	l.Close()
	l2, err := OpenLog(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	var ids2 []string
	l2.Iterate(func(r Receipt) bool { ids2 = append(ids2, r.CallID); return true })
	if !slices.Equal(ids, ids2) {
		t.Fatalf("order after reopen %v", ids2)
	}
}

// buildLog writes a log with recs and returns its bytes and the offset at
// which the last record's line starts.
func buildLog(t *testing.T, recs []Receipt) (data []byte, lastStart int) {
	t.Helper()
	data = []byte(logHeader)
	for _, r := range recs {
		lastStart = len(data)
		data = append(data, frame(r.Bytes())...)
	}
	return data, lastStart
}

// checkReopen opens path, expects want (oldest first) and a truncation of
// cut bytes, appends extra, and checks a second open is clean.
func checkReopen(t *testing.T, path string, want []Receipt, cut int64, extra Receipt) {
	t.Helper()
	l, err := OpenLog(path, Options{noSync: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if got := l.Recovery().TruncatedBytes; got != cut {
		t.Fatalf("truncated %d bytes, want %d", got, cut)
	}
	all, err := l.All()
	if err != nil || len(all) != len(want) {
		t.Fatalf("All: %d receipts, %v", len(all), err)
	}
	for i, r := range all {
		if r.String() != want[len(want)-1-i].String() {
			t.Fatalf("receipt %d changed", i)
		}
	}
	if n, err := l.Append(extra); n != 1 || err != nil {
		t.Fatalf("append after recovery: %d, %v", n, err)
	}
	l.Close()
	l, err = OpenLog(path, Options{noSync: true})
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	defer l.Close()
	if l.Len() != len(want)+1 || l.Recovery().TruncatedBytes != 0 || !l.Has(extra.CallID) {
		t.Fatalf("second open: len %d, recovery %+v", l.Len(), l.Recovery())
	}
}

func TestLogTornLastRecordEveryOffset(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "receipts.log")
	snap, err := NewSnapshotReceipt(snapshotInfo(9), testKey("operator"))
	if err != nil {
		t.Fatal(err)
	}
	for _, last := range []Receipt{sampleReceipts(t, 5)[4], snap} {
		recs := append(sampleReceipts(t, 4), last)
		data, lastStart := buildLog(t, recs)
		extra := mustParse(t, []byte(`{"callId":"after-recovery","ts":1800000000}`))
		// Every cut inside the last line, from nothing of it to all but
		// its newline.
		for cut := lastStart; cut < len(data); cut++ {
			// A fresh file each time: rewriting one with O_TRUNC makes
			// ext4 flush it on close (auto_da_alloc), which is slow.
			os.Remove(path)
			if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
				t.Fatal(err)
			}
			checkReopen(t, path, recs[:4], int64(cut-lastStart), extra)
		}
		// The complete file loses nothing.
		os.Remove(path)
		os.WriteFile(path, data, 0o600)
		checkReopen(t, path, recs, 0, extra)
	}
}

func TestLogGarbageTails(t *testing.T) {
	recs := sampleReceipts(t, 5)
	data, lastStart := buildLog(t, recs)
	good := data[:lastStart]
	lastLine := data[lastStart:]
	badCRC := append([]byte(nil), lastLine...)
	badCRC[0] ^= 1
	rot := append([]byte(nil), lastLine...)
	rot[len(rot)/2] ^= 0x20
	cases := []struct {
		name        string
		tail        []byte
		quarantined int // complete lines copied to the quarantine file
	}{
		{"one NUL", []byte{0}, 0},
		{"NUL block", make([]byte, 4096), 0},
		{"partial record then NULs", append(append([]byte(nil), lastLine[:100]...), make([]byte, 3000)...), 0},
		{"record length of NULs", make([]byte, len(lastLine)), 0},
		{"garbage", []byte("\x93\xfe garbage without newline"), 0},
		{"empty line", []byte("\n"), 1},
		{"garbage lines", []byte("junk\nmore junk\n\x00\x00"), 2},
		{"bad checksum", badCRC, 1},
		{"bit rot in last record", rot, 1},
		{"NULs then newline", append(make([]byte, 50), '\n'), 1},
		{"header again", []byte(logHeader), 1},
	}
	extra := mustParse(t, []byte(`{"callId":"after-recovery","ts":1}`))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "receipts.log")
			os.WriteFile(path, append(append([]byte(nil), good...), tc.tail...), 0o600)
			checkReopen(t, path, recs[:4], int64(len(tc.tail)), extra)
			q, _ := os.ReadFile(QuarantinePath(path))
			if n := bytes.Count(q, []byte("\n")); n != tc.quarantined {
				t.Fatalf("quarantined %d lines, want %d:\n%s", n, tc.quarantined, q)
			}
		})
	}
}

func TestLogCorruptMiddle(t *testing.T) {
	recs := sampleReceipts(t, 4)
	data, _ := buildLog(t, recs)
	second := len(logHeader) + len(frame(recs[0].Bytes()))
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		lines  []int
	}{
		{"bit flip", func(b []byte) []byte { b[second+200] ^= 4; return b }, []int{3}},
		{"lost newline", func(b []byte) []byte {
			end := second + len(frame(recs[1].Bytes())) - 1
			b[end] = ' '
			return b
		}, []int{3}},
		{"zeroed block", func(b []byte) []byte {
			clear(b[second : second+64])
			return b
		}, []int{3}},
		{"two damaged", func(b []byte) []byte {
			b[second+10] ^= 1
			b[len(logHeader)+20] ^= 1
			return b
		}, []int{2, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "receipts.log")
			bad := tc.mutate(append([]byte(nil), data...))
			os.WriteFile(path, bad, 0o600)
			_, err := OpenLog(path, Options{})
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.Line != tc.lines[0] || ce.More != len(tc.lines)-1 {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("receipts.log:%d:", tc.lines[0])) {
				t.Fatalf("error does not name the line: %v", err)
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, bad) {
				t.Fatal("a failed open modified the file")
			}

			l, err := OpenLog(path, Options{Repair: true})
			if err != nil {
				t.Fatalf("repair: %v", err)
			}
			if !slices.Equal(l.Recovery().Quarantined, tc.lines) {
				t.Fatalf("quarantined lines %v, want %v", l.Recovery().Quarantined, tc.lines)
			}
			// Only the damaged records are gone.
			want := 4 - len(tc.lines)
			if tc.name == "lost newline" {
				want = 2 // records 2 and 3 merged into one damaged line
			}
			if l.Len() != want || !l.Has("call-0003") {
				t.Fatalf("after repair: %d receipts", l.Len())
			}
			l.Close()
			q, _ := os.ReadFile(QuarantinePath(path))
			sc := bufio.NewScanner(bytes.NewReader(q))
			sc.Buffer(nil, 4<<20)
			var got []int
			for sc.Scan() {
				var e QuarantineRecord
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Fatal(err)
				}
				if e.Source != "log" || e.Reason == "" || (e.Text == nil && e.Base64 == nil) {
					t.Fatalf("quarantine entry %s", sc.Bytes())
				}
				got = append(got, e.Line)
			}
			if !slices.Equal(got, tc.lines) {
				t.Fatalf("quarantine lines %v", got)
			}
			l, err = OpenLog(path, Options{})
			if err != nil || l.Len() != want {
				t.Fatalf("reopen after repair: %v", err)
			}
			l.Close()
		})
	}
}

func TestLogHeader(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"empty":             "",
		"torn header":       logHeader[:7],
		"torn header + NUL": logHeader[:3] + "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
		"only NULs":         "\x00\x00\x00",
	} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(content), 0o600)
		l, err := OpenLog(path, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if l.Len() != 0 || l.Recovery().TruncatedBytes != int64(len(content)) {
			t.Fatalf("%s: len %d, recovery %+v", name, l.Len(), l.Recovery())
		}
		l.Close()
		if b, _ := os.ReadFile(path); string(b) != logHeader {
			t.Fatalf("%s: file %q", name, b)
		}
	}
	for name, content := range map[string]string{
		"other file":  "hello\n",
		"other log":   "hermesd receipts log v9\n",
		"big foreign": strings.Repeat("x", 10000),
	} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(content), 0o600)
		if _, err := OpenLog(path, Options{}); !errors.Is(err, ErrNotLog) {
			t.Fatalf("%s: err = %v", name, err)
		}
		if b, _ := os.ReadFile(path); string(b) != content {
			t.Fatalf("%s: modified", name)
		}
	}
}

func TestLogDuplicateLinesOnOpen(t *testing.T) {
	a := mustParse(t, []byte(`{"callId":"x","ts":1}`))
	b := mustParse(t, []byte(`{"callId":"x","ts":2}`))
	path := filepath.Join(t.TempDir(), "receipts.log")
	os.WriteFile(path, slices.Concat([]byte(logHeader), frame(a.Bytes()), frame(b.Bytes())), 0o600)
	l, err := OpenLog(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Len() != 1 || !slices.Equal(l.Recovery().DuplicateLines, []int{3}) {
		t.Fatalf("len %d, recovery %+v", l.Len(), l.Recovery())
	}
	if got, _, _ := l.Get("x"); got.TS != 1 {
		t.Fatal("the first record must win")
	}
}

func TestLogNonCompactRecordIsDamage(t *testing.T) {
	raw := []byte(`{"callId": "x","ts":1}`) // valid JSON, but not what Append writes
	path := filepath.Join(t.TempDir(), "receipts.log")
	ok := mustParse(t, []byte(`{"callId":"y","ts":1}`))
	os.WriteFile(path, slices.Concat([]byte(logHeader), frame(raw), frame(ok.Bytes())), 0o600)
	if _, err := OpenLog(path, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v", err)
	}
}

func TestLogConcurrent(t *testing.T) {
	l := openTestLog(t, Options{noSync: true})
	var wg sync.WaitGroup
	const writers, each = 4, 50
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := mustParse(t, fmt.Appendf(nil, `{"callId":"w%d-%d","ts":%d}`, w, i, i))
				if _, err := l.Append(r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			if err := l.Export(context.Background(), io.Discard); err != nil {
				t.Error(err)
			}
			l.Iterate(func(Receipt) bool { return true })
		}
	}()
	wg.Wait()
	if l.Len() != writers*each {
		t.Fatalf("Len = %d", l.Len())
	}
	path := l.Path()
	l.Close()
	l2, err := OpenLog(path, Options{})
	if err != nil || l2.Len() != writers*each {
		t.Fatalf("reopen: %v", err)
	}
	l2.Close()
}

func TestLogClosedAndMisuse(t *testing.T) {
	l := openTestLog(t, Options{})
	if _, err := l.Append(Receipt{CallID: "hand-made"}); !errors.Is(err, ErrNoBytes) {
		t.Fatalf("hand-made receipt: %v", err)
	}
	l.Close()
	r := mustParse(t, []byte(`{"callId":"x","ts":1}`))
	if _, err := l.Append(r); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := l.Export(context.Background(), io.Discard); !errors.Is(err, ErrClosed) {
		t.Fatalf("Export after Close: %v", err)
	}
	if _, err := l.Import(context.Background(), strings.NewReader(""), PolicyQuarantine, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Import after Close: %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

func TestLogPaths(t *testing.T) {
	if got := LogPath("/var/lib/hermesd", "auditor"); got != "/var/lib/hermesd/agents/auditor/receipts.log" {
		t.Fatal(got)
	}
	if QuarantinePath("/x/receipts.log") != "/x/receipts.log.quarantine" {
		t.Fatal("quarantine path")
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "a\x00"} {
		if CheckAgentID(bad) == nil {
			t.Errorf("CheckAgentID(%q) accepted", bad)
		}
	}
	if CheckAgentID("auditor-1") != nil {
		t.Error("valid id rejected")
	}
}

func TestLogReadOnly(t *testing.T) {
	recs := sampleReceipts(t, 3)
	data, lastStart := buildLog(t, recs)
	dir := t.TempDir()
	if _, err := OpenLog(filepath.Join(dir, "missing.log"), Options{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing log: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.log")); !os.IsNotExist(err) {
		t.Fatal("read-only open created the file")
	}

	// A write in progress (a partial last record) is skipped, not cut.
	path := filepath.Join(dir, "receipts.log")
	inProgress := data[:lastStart+50]
	os.WriteFile(path, inProgress, 0o600)
	l, err := OpenLog(path, Options{ReadOnly: true, Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != 2 || l.Recovery().TruncatedBytes != 50 {
		t.Fatalf("len %d, recovery %+v", l.Len(), l.Recovery())
	}
	if _, err := l.Append(recs[2]); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Append: %v", err)
	}
	if _, err := l.Import(context.Background(), strings.NewReader(recs[2].String()), PolicyQuarantine, nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Import: %v", err)
	}
	if got := receiptBytes(t, l); len(got) != 2 || got[0] != recs[1].String() {
		t.Fatal("read-only log lists the wrong receipts")
	}
	l.Close()
	if b, _ := os.ReadFile(path); !bytes.Equal(b, inProgress) {
		t.Fatal("read-only open changed the file")
	}
	if _, err := os.Stat(QuarantinePath(path)); !os.IsNotExist(err) {
		t.Fatal("read-only open wrote a quarantine file")
	}

	// Damage in the middle is reported, never repaired.
	bad := append([]byte(nil), data...)
	bad[len(logHeader)+30] ^= 1
	os.WriteFile(path, bad, 0o600)
	if _, err := OpenLog(path, Options{ReadOnly: true, Repair: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, bad) {
		t.Fatal("read-only open repaired the file")
	}
	// A torn header reads as an empty log.
	os.WriteFile(path, []byte(logHeader[:5]), 0o600)
	if l, err := OpenLog(path, Options{ReadOnly: true}); err != nil || l.Len() != 0 {
		t.Fatalf("torn header: %v", err)
	} else {
		l.Close()
	}
}

func TestScanLines(t *testing.T) {
	long := strings.Repeat("x", maxImportLine+1)
	in := " a \r\n\n" + long + "\n\uFEFFb"
	type got struct {
		n    int
		line string
		err  bool
	}
	var lines []got
	err := ScanLines(strings.NewReader(in), func(n int, line []byte, err error) error {
		lines = append(lines, got{n, string(line), err != nil})
		return nil
	})
	want := []got{{1, "a", false}, {2, "", false}, {3, "", true}, {4, "b", false}}
	if err != nil || fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Fatalf("lines %v, %v", lines, err)
	}
	stop := errors.New("stop")
	if err := ScanLines(strings.NewReader("a\nb"), func(int, []byte, error) error { return stop }); err != stop {
		t.Fatalf("fn error not returned: %v", err)
	}
}
