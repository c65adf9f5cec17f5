package receipts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
)

// junkLines is n lines that are not trusted receipts, of every kind.
func junkLines(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		b.Write(junkLine(i))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func junkLine(i int) []byte {
	switch i % 4 {
	case 0:
		return fmt.Appendf(nil, `{"callId":"junk-%d","ts":1}`, i) // an unsigned receipt
	case 1:
		return fmt.Appendf(nil, "junk line %d %s", i, strings.Repeat("x", 60))
	case 2:
		return fmt.Appendf(nil, `{"callId":"torn-%d","ts":17`, i)
	default:
		return fmt.Appendf(nil, "\xff\xfe\x00%d\x01\x02 not utf-8", i)
	}
}

func quarantineLines(t *testing.T, l *Log) []QuarantineRecord {
	t.Helper()
	var recs []QuarantineRecord
	if err := l.IterateQuarantine(func(r QuarantineRecord) bool { recs = append(recs, r); return true }); err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestQuarantineCountLimit(t *testing.T) {
	key := testKey("operator")
	trusted := []common.Address{addrOf(key)}
	lim := QuarantineLimits{MaxBytes: 1 << 20, MaxCount: 5}
	l := openTestLog(t, Options{Quarantine: lim})
	in := append(junkLines(20), signedReceipt(t, key, "good", 1, "").Bytes()...)
	rep, err := l.Import(context.Background(), bytes.NewReader(in), PolicyQuarantine, trusted)
	checkCounts(t, rep)
	// The trusted line is imported although the quarantine is full.
	if err != nil || rep.Quarantined != 5 || rep.Dropped != 15 || rep.Imported != 1 || !l.Has("good") {
		t.Fatalf("report %+v, %v", rep, err)
	}
	for i, p := range rep.Problems {
		want := ActionQuarantined
		if i >= 5 {
			want = ActionDropped
		}
		if p.Line != i+1 || p.Action != want {
			t.Fatalf("problem %d: %+v", i, p)
		}
	}
	info, err := l.Quarantine()
	if err != nil || info.Count != 5 || info.Path != l.QuarantinePath() || info.MaxCount != 5 || !info.Full() {
		t.Fatalf("info %+v, %v", info, err)
	}
	if st, _ := os.Stat(info.Path); st.Size() != info.Bytes {
		t.Fatalf("bytes %d, file %d", info.Bytes, st.Size())
	}
	// The count is learnt at open: a reopened log drops at once.
	path := l.Path()
	l.Close()
	l2, err := OpenLog(path, Options{Quarantine: lim})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.qCount != 5 || l2.qBytes != info.Bytes {
		t.Fatalf("learnt %d records, %d bytes at open", l2.qCount, l2.qBytes)
	}
	rep, err = l2.Import(context.Background(), bytes.NewReader(junkLines(3)), PolicyQuarantine, trusted)
	if err != nil || rep.Dropped != 3 || rep.Quarantined != 0 || rep.QuarantineFile != "" {
		t.Fatalf("after reopen: %+v, %v", rep, err)
	}
	if got := len(quarantineLines(t, l2)); got != 5 {
		t.Fatalf("%d records", got)
	}
}

func TestQuarantineByteLimit(t *testing.T) {
	for _, max := range []int64{1, 200, 2000, 20000} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			l := openTestLog(t, Options{Quarantine: QuarantineLimits{MaxBytes: max}})
			in := junkLines(300)
			rep, err := l.Import(context.Background(), bytes.NewReader(in), PolicyQuarantine, nil)
			checkCounts(t, rep)
			if err != nil || rep.Dropped == 0 || rep.Quarantined+rep.Dropped != 300 {
				t.Fatalf("report %+v, %v", rep, err)
			}
			st, err := os.Stat(l.QuarantinePath())
			if max < 100 {
				// Not one record fits: the file is created but stays empty.
				if err != nil || st.Size() != 0 || rep.Quarantined != 0 {
					t.Fatalf("quarantine %v, %+v", err, rep)
				}
				return
			}
			if err != nil || st.Size() > max || rep.Quarantined == 0 {
				t.Fatalf("quarantine of %d bytes, limit %d (%+v)", st.Size(), max, rep)
			}
			// It is full: the next record would not have fitted.
			if max-st.Size() > 200 {
				t.Fatalf("stopped at %d of %d bytes", st.Size(), max)
			}
			if got := len(quarantineLines(t, l)); got != rep.Quarantined {
				t.Fatalf("%d records, report says %d", got, rep.Quarantined)
			}
		})
	}
}

func TestQuarantineLimitsOption(t *testing.T) {
	l := openTestLog(t, Options{})
	if info, err := l.Quarantine(); err != nil || info.MaxBytes != DefaultQuarantineMaxBytes || info.MaxCount != DefaultQuarantineMaxCount ||
		info.Count != 0 || info.Bytes != 0 || info.Full() {
		t.Fatalf("defaults: %+v, %v", info, err)
	}
	if DefaultQuarantineMaxBytes != 16<<20 || DefaultQuarantineMaxCount != 10000 {
		t.Fatal("defaults changed")
	}
	for _, bad := range []QuarantineLimits{{MaxBytes: -1}, {MaxCount: -1}} {
		if _, err := OpenLog(filepath.Join(t.TempDir(), "r.log"), Options{Quarantine: bad}); err == nil {
			t.Fatalf("%+v accepted", bad)
		}
	}
}

// A symbolic link planted at the quarantine path must not make hermesd
// append to the file it points to.
func TestQuarantineSymlink(t *testing.T) {
	key := testKey("operator")
	trusted := []common.Address{addrOf(key)}
	dir := t.TempDir()
	target := filepath.Join(dir, "precious")
	if err := os.WriteFile(target, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := openTestLog(t, Options{})
	if err := os.Symlink(target, l.QuarantinePath()); err != nil {
		t.Skip("no symlinks:", err)
	}
	in := append(junkLines(3), signedReceipt(t, key, "good", 1, "").Bytes()...)
	_, err := l.Import(context.Background(), bytes.NewReader(in), PolicyQuarantine, trusted)
	if !errors.Is(err, ErrQuarantineFile) {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious\n" {
		t.Fatalf("target written: %q", b)
	}
	if l.Len() != 0 {
		t.Fatal("a failed import changed the log")
	}
	if _, err := l.Quarantine(); !errors.Is(err, ErrQuarantineFile) {
		t.Fatalf("Quarantine: %v", err)
	}
	if err := l.IterateQuarantine(func(QuarantineRecord) bool { return true }); !errors.Is(err, ErrQuarantineFile) {
		t.Fatalf("IterateQuarantine: %v", err)
	}
	// Reopening does not follow it either, and purging removes the link.
	path := l.Path()
	l.Close()
	l, err = OpenLog(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n, err := l.PurgeQuarantine(); n != 0 || err != nil {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious\n" {
		t.Fatalf("target changed by purge: %q", b)
	}
	rep, err := l.Import(context.Background(), bytes.NewReader(in), PolicyQuarantine, trusted)
	if err != nil || rep.Quarantined != 3 || rep.Imported != 1 {
		t.Fatalf("after purge: %+v, %v", rep, err)
	}
	st, err := os.Lstat(l.QuarantinePath())
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Fatalf("quarantine file %v, %v", st.Mode(), err)
	}
}

func TestQuarantineNotAFile(t *testing.T) {
	l := openTestLog(t, Options{})
	if err := os.Mkdir(l.QuarantinePath(), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Import(context.Background(), bytes.NewReader(junkLines(1)), PolicyQuarantine, nil); err == nil {
		t.Fatal("imported into a directory")
	}
	if _, err := l.Quarantine(); !errors.Is(err, ErrQuarantineFile) {
		t.Fatalf("Quarantine: %v", err)
	}
}

func TestQuarantineListAndPurge(t *testing.T) {
	l := openTestLog(t, Options{})
	rep, err := l.Import(context.Background(), bytes.NewReader(junkLines(8)), PolicyQuarantine, nil)
	if err != nil || rep.Quarantined != 8 {
		t.Fatalf("%+v, %v", rep, err)
	}
	recs := quarantineLines(t, l)
	if len(recs) != 8 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs {
		if r.Line != i+1 || r.Source != "import" || r.Reason == "" || r.Time == 0 || r.Length == 0 {
			t.Fatalf("record %d: %+v", i, r)
		}
		switch i % 4 {
		case 0:
			if r.Status != "missing-fields" || string(r.Receipt) != string(junkLine(i)) {
				t.Fatalf("record %d: %+v", i, r)
			}
		case 1, 2:
			if r.Status != "malformed" || r.Text == nil || *r.Text != string(junkLine(i)) {
				t.Fatalf("record %d: %+v", i, r)
			}
		case 3:
			if r.Base64 == nil || !bytes.Equal(r.Base64, junkLine(i)) {
				t.Fatalf("record %d: %+v", i, r)
			}
		}
	}
	// Stops when fn says so.
	n := 0
	l.IterateQuarantine(func(QuarantineRecord) bool { n++; return n < 3 })
	if n != 3 {
		t.Fatalf("visited %d", n)
	}
	// A read-only log lists it while the writable one is open.
	ro, err := OpenLog(l.Path(), Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if info, err := ro.Quarantine(); err != nil || info.Count != 8 {
		t.Fatalf("read-only info %+v, %v", info, err)
	}
	if got := quarantineLines(t, ro); len(got) != 8 || got[7].Line != 8 {
		t.Fatalf("read-only list: %d", len(got))
	}
	if _, err := ro.PurgeQuarantine(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only purge: %v", err)
	}

	removed, err := l.PurgeQuarantine()
	if err != nil || removed != 8 {
		t.Fatalf("purge = %d, %v", removed, err)
	}
	if _, err := os.Stat(l.QuarantinePath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("purge left the file")
	}
	if info, err := l.Quarantine(); err != nil || info.Count != 0 || info.Bytes != 0 {
		t.Fatalf("after purge %+v, %v", info, err)
	}
	if n, err := l.PurgeQuarantine(); n != 0 || err != nil {
		t.Fatalf("second purge %d, %v", n, err)
	}
	if got := quarantineLines(t, ro); len(got) != 0 {
		t.Fatal("purged records still listed")
	}
	// The limit counts from zero again.
	if rep, err := l.Import(context.Background(), bytes.NewReader(junkLines(2)), PolicyQuarantine, nil); err != nil || rep.Quarantined != 2 {
		t.Fatalf("after purge: %+v, %v", rep, err)
	}
	l.Close()
	if _, err := l.Quarantine(); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	if _, err := l.PurgeQuarantine(); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed purge: %v", err)
	}
}

// A crash mid-record leaves a partial line; the next record starts on a
// line of its own, and listing reports the fragment as damaged.
func TestQuarantineTornLine(t *testing.T) {
	l := openTestLog(t, Options{})
	good := `{"time":1,"source":"import","line":1,"reason":"r","length":3}` + "\n"
	os.WriteFile(l.QuarantinePath(), []byte(good+`{"time":2,"sou`), 0o600)
	// Not listed while it may still be being written.
	if got := quarantineLines(t, l); len(got) != 1 || got[0].Reason != "r" {
		t.Fatalf("list %+v", got)
	}
	if _, err := l.Import(context.Background(), bytes.NewReader(junkLines(1)), PolicyQuarantine, nil); err != nil {
		t.Fatal(err)
	}
	got := quarantineLines(t, l)
	if len(got) != 3 || got[1].Source != "quarantine" || got[1].Line != 2 || got[1].Status != "malformed" || got[2].Source != "import" {
		t.Fatalf("list %+v", got)
	}
	if info, _ := l.Quarantine(); info.Count != 3 {
		t.Fatalf("count %d", info.Count)
	}
	// An over-long line is reported without holding it.
	os.WriteFile(l.QuarantinePath(), append(bytes.Repeat([]byte("x"), maxQuarantineRecord+10), '\n'), 0o600)
	got = quarantineLines(t, l)
	if len(got) != 1 || !got[0].Truncated || got[0].Length != maxQuarantineRecord+11 {
		t.Fatalf("long line %+v", got)
	}
}

// Damaged log records go to the quarantine even when it is full: they
// were acknowledged.
func TestQuarantineLogRecordsIgnoreLimits(t *testing.T) {
	recs := sampleReceipts(t, 3)
	data, _ := buildLog(t, recs)
	data[len(logHeader)+30] ^= 1
	path := filepath.Join(t.TempDir(), "receipts.log")
	os.WriteFile(path, data, 0o600)
	os.WriteFile(QuarantinePath(path), []byte(strings.Repeat("{}\n", 3)), 0o600)
	l, err := OpenLog(path, Options{Repair: true, Quarantine: QuarantineLimits{MaxCount: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if info, _ := l.Quarantine(); info.Count != 4 {
		t.Fatalf("count %d", info.Count)
	}
	if got := quarantineLines(t, l); got[3].Source != "log" || got[3].Line != 2 {
		t.Fatalf("%+v", got[3])
	}
}

func TestImportReportBounded(t *testing.T) {
	l := openTestLog(t, Options{})
	rep, err := l.Import(context.Background(), bytes.NewReader(junkLines(1000)), PolicyReject, nil)
	checkCounts(t, rep)
	if !errors.Is(err, ErrRejected) || rep.Rejected != 1000 || len(rep.Problems) != MaxProblems || rep.ProblemsOmitted != 1000-MaxProblems {
		t.Fatalf("report: %d problems, %d omitted, %v", len(rep.Problems), rep.ProblemsOmitted, err)
	}
	for i, p := range rep.Problems {
		if p.Line != i+1 {
			t.Fatalf("problem %d is line %d", i, p.Line)
		}
	}
	if msg := err.Error(); !strings.Contains(msg, "line 5:") || strings.Contains(msg, "line 6:") || !strings.Contains(msg, "and 995 more") {
		t.Fatalf("err = %v", err)
	}
	// Fields the input chooses are cut.
	long := `{"callId":"` + strings.Repeat("é", 5000) + `","ts":1}`
	rep, _ = l.Import(context.Background(), strings.NewReader(long), PolicyQuarantine, nil)
	if p := rep.Problems[0]; len(p.CallID) > maxFieldBytes || !utf8.ValidString(p.CallID) || !strings.HasSuffix(p.CallID, "...") {
		t.Fatalf("callId of %d bytes", len(p.CallID))
	}
	if got := clip(strings.Repeat("a", maxFieldBytes)); len(got) != maxFieldBytes || strings.HasSuffix(got, "...") {
		t.Fatal("clip cut a string within the limit")
	}
}

// junkReader streams size bytes of junk lines, with an over-long line now
// and then, and samples the heap every MiB it hands out.
type junkReader struct {
	left, sinceSample int64
	i                 int
	cur               []byte
	peak              uint64
}

func (j *junkReader) Read(p []byte) (int, error) {
	if j.left <= 0 {
		return 0, io.EOF
	}
	if len(j.cur) == 0 {
		if j.i%50_000 == 49_999 {
			j.cur = bytes.Repeat([]byte("{\"callId\":\"x\",\"pad\":\"aaaaaaaaaaaaaaaa"), 60_000) // 2.2 MiB, no newline
		} else {
			j.cur = append(junkLine(j.i), '\n')
		}
		j.i++
	}
	n := copy(p[:min(int64(len(p)), j.left)], j.cur)
	j.cur, j.left = j.cur[n:], j.left-int64(n)
	if j.sinceSample += int64(n); j.sinceSample >= 1<<20 {
		j.sinceSample = 0
		j.sample()
	}
	return n, nil
}

func (j *junkReader) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	j.peak = max(j.peak, ms.HeapInuse)
}

// importJunk imports size bytes of junk and one trusted receipt, and
// returns the peak heap growth and the bytes allocated.
func importJunk(t testing.TB, size int64) (growth, alloc uint64, rep ImportReport) {
	key := testKey("operator")
	l := openTestLog(t, Options{noSync: true})
	j := &junkReader{left: size}
	in := io.MultiReader(j, strings.NewReader("\n"+signedReceipt(t, key, "good", 1, "").String()))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	j.peak = before.HeapInuse
	rep, err := l.Import(context.Background(), in, PolicyQuarantine, []common.Address{addrOf(key)})
	j.sample()
	runtime.ReadMemStats(&after)
	if err != nil || rep.Imported != 1 || !l.Has("good") {
		t.Fatalf("import: %+v, %v", rep, err)
	}
	st, err := os.Stat(l.QuarantinePath())
	if err != nil || st.Size() > DefaultQuarantineMaxBytes {
		t.Fatalf("quarantine file of %d bytes", st.Size())
	}
	return j.peak - before.HeapInuse, after.TotalAlloc - before.TotalAlloc, rep
}

// An 8 MiB body of junk lines once took 3.3 GB of RSS, a 646 MB
// quarantine file and a 674 MB report. Now memory, the quarantine and the
// report stay bounded whatever the size.
func TestImportJunkBounded(t *testing.T) {
	for _, size := range []int64{junkSmallBody, junkBigBody} {
		t.Run(fmt.Sprintf("%dMiB", size>>20), func(t *testing.T) {
			growth, alloc, rep := importJunk(t, size)
			checkCounts(t, rep)
			t.Logf("%d MiB of junk, %d lines: heap in use grew %.1f MiB at most, %.0f MiB allocated in all; %d quarantined, %d dropped",
				size>>20, rep.Lines, float64(growth)/(1<<20), float64(alloc)/(1<<20), rep.Quarantined, rep.Dropped)
			if growth > 32<<20 {
				t.Fatalf("heap grew by %d MiB", growth>>20)
			}
			if len(rep.Problems) != MaxProblems || rep.ProblemsOmitted != rep.Quarantined+rep.Dropped-MaxProblems || rep.Dropped == 0 {
				t.Fatalf("report %+v", rep)
			}
		})
	}
}

func TestVerifyLines(t *testing.T) {
	data, op := importFixture(t)
	var got []LineResult
	tally, err := VerifyLines(context.Background(), bytes.NewReader(data), []common.Address{op}, func(r LineResult) { got = append(got, r) })
	want := Tally{Lines: 13, Blank: 2, Receipts: 9, Trusted: 4, Unknown: 1, Failed: 6, Malformed: 2}
	if err != nil || tally != want {
		t.Fatalf("tally %+v, want %+v (%v)", tally, want, err)
	}
	wantStatus := map[int]Status{1: StatusTrusted, 3: StatusTrusted, 4: StatusUnknownSigner, 5: StatusUnsigned, 6: StatusMalformed,
		8: StatusTrusted, 9: StatusMissingFields, 10: StatusBadSignature, 11: StatusMalformed, 12: StatusMissingFields, 13: StatusTrusted}
	if len(got) != len(wantStatus) {
		t.Fatalf("%d results", len(got))
	}
	for i, r := range got {
		if i > 0 && r.Line <= got[i-1].Line {
			t.Fatal("results out of order")
		}
		if wantStatus[r.Line] != r.Status || r.Action != "" {
			t.Fatalf("line %d: %+v", r.Line, r)
		}
		if (r.Status == StatusTrusted) != (r.Reason == "") {
			t.Fatalf("line %d reason %q", r.Line, r.Reason)
		}
	}
	if got[0].Signer != op.Hex() || got[0].CallID != "good-1" || got[2].Signer != addrOf(testKey("stranger")).Hex() {
		t.Fatalf("signers %+v %+v", got[0], got[2])
	}
	// Without a callback, and with nothing trusted.
	tally, err = VerifyLines(context.Background(), bytes.NewReader(data), nil, nil)
	if err != nil || tally.Trusted != 0 || tally.Unknown != 5 {
		t.Fatalf("untrusted tally %+v, %v", tally, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := VerifyLines(ctx, bytes.NewReader(data), nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// receipts.ndjson must import in the reference runtime, whose importer
// throws on a receipt without tokenId: Export leaves those out.
func TestExportOnlyWithTokenID(t *testing.T) {
	l := openTestLog(t, Options{})
	with := sampleReceipts(t, 2)
	without := mustParse(t, []byte(`{"callId":"no-token","ts":1700000005}`))
	if n, err := l.Append(with[0], without, with[1]); n != 3 || err != nil {
		t.Fatalf("append %d, %v", n, err)
	}
	if got, want := string(exportBytes(t, l)), with[1].String()+"\n"+with[0].String(); got != want {
		t.Fatalf("export:\n%s", got)
	}
	if l.Len() != 3 || len(receiptBytes(t, l)) != 3 {
		t.Fatal("the log must keep the receipt without tokenId")
	}
	only := openTestLog(t, Options{})
	only.Append(without)
	if b := exportBytes(t, only); len(b) != 0 {
		t.Fatalf("export %q", b)
	}
	// The index remembers tokenId across a reopen.
	path := l.Path()
	l.Close()
	l2, err := OpenLog(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := string(exportBytes(t, l2)); strings.Contains(got, "no-token") || strings.Count(got, "\n") != 1 {
		t.Fatalf("export after reopen:\n%s", got)
	}
}
