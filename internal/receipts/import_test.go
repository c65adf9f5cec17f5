package receipts

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

func checkCounts(t testing.TB, rep ImportReport) {
	t.Helper()
	if sum := rep.Blank + rep.Imported + rep.Duplicates + rep.Quarantined + rep.Dropped + rep.Rejected + rep.Skipped; sum != rep.Lines {
		t.Fatalf("counts do not add up to %d lines: %+v", rep.Lines, rep)
	}
	if rep.Flagged != 0 || len(rep.Problems) > MaxProblems {
		t.Fatalf("flagged %d, %d problems", rep.Flagged, len(rep.Problems))
	}
}

func exportBytes(t testing.TB, l *Log) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := l.Export(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writeNDJSON writes a receipts.ndjson of n runtime-shaped receipts, newest
// first, with runs of equal ts. Every 10,000th receipt is really signed by
// signer; 1% carry a copy of one real signature over different fields (so
// they recover to some unrelated address); the rest the runtime's "0x".
func writeNDJSON(t testing.TB, w io.Writer, n int, signer *ecdsa.PrivateKey) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	ts := int64(1700000000 + n)
	borrowed := ""
	for i := range n {
		if rng.IntN(3) != 0 { // about a third of neighbours share a ts
			ts -= int64(1 + rng.IntN(90))
		}
		p := runtimeParams{TokenID: 1 + i%3, CallID: fmt.Sprintf("%08x-3b8a-4c55-9f0e-%012x", rng.Uint32(), i), Seq: i, TS: ts}
		switch {
		case i%10000 == 0:
			p.Key = signer
		case i%100 == 1:
			p.Signature = borrowed
		}
		raw := runtimeReceipt(p)
		if i == 0 {
			borrowed = mustParse(t, raw).Signature
		}
		if i > 0 {
			w.Write([]byte{'\n'})
		}
		w.Write(raw)
	}
}

func genNDJSON(t testing.TB, n int, signer *ecdsa.PrivateKey) []byte {
	var b bytes.Buffer
	writeNDJSON(t, &b, n, signer)
	return b.Bytes()
}

// sameExport reports whether the log's export equals the file at path,
// comparing as it streams.
func sameExport(t testing.TB, l *Log, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cw := &compareWriter{r: bufio.NewReaderSize(f, 1<<20)}
	if err := l.Export(context.Background(), cw); err != nil && !errors.Is(err, errDiffers) {
		t.Fatal(err)
	}
	_, err = cw.r.ReadByte()
	return !cw.differs && err == io.EOF
}

var errDiffers = errors.New("differs")

type compareWriter struct {
	r       *bufio.Reader
	buf     []byte
	differs bool
}

func (c *compareWriter) Write(p []byte) (int, error) {
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	b := c.buf[:len(p)]
	if _, err := io.ReadFull(c.r, b); err != nil || !bytes.Equal(b, p) {
		c.differs = true
		return 0, errDiffers
	}
	return len(p), nil
}

// What this checks: framing, ordering and byte identity at scale, for
// runtime-shaped receipts appended in shuffled order with many equal ts.
// Every receipt is really signed by the trusted operator (only those enter
// a log through Import); they are signed on every CPU, a batch at a time.
func TestExportImport100k(t *testing.T) {
	const batch = 1000
	n := roundTripN
	key := testKey("operator")
	trusted := []common.Address{addrOf(key)}
	rng := rand.New(rand.NewPCG(5, 6))
	// fsync is skipped: durability is tested elsewhere, and flushing 200 MB
	// through this machine's disk would dominate the run.
	a := openTestLog(t, Options{noSync: true})
	ts := int64(1700000000)
	params := make([]runtimeParams, batch)
	raws := make([][]byte, batch)
	recs := make([]Receipt, batch)
	for start := 0; start < n; start += batch {
		for k := range params {
			i := start + k
			if rng.IntN(3) == 0 { // two thirds of neighbours share a ts
				ts += int64(1 + rng.IntN(90))
			}
			params[k] = runtimeParams{TokenID: 1 + i%3, CallID: fmt.Sprintf("%08x-3b8a-4c55-9f0e-%012x", rng.Uint32(), i), Seq: i, TS: ts, Key: key}
		}
		parallelReceipts(raws, func(k int) []byte { return runtimeReceipt(params[k]) })
		for k, raw := range raws {
			recs[k] = mustParse(t, raw)
		}
		rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
		if added, err := a.Append(recs...); added != batch || err != nil {
			t.Fatalf("Append = %d, %v", added, err)
		}
	}

	nd := filepath.Join(t.TempDir(), NDJSONName)
	f, err := os.Create(nd)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := a.Export(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	f.Seek(0, io.SeekStart)
	b := openTestLog(t, Options{noSync: true})
	rep, err := b.Import(context.Background(), bufio.NewReader(f), PolicyReject, trusted)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, rep)
	if rep.Lines != n || rep.Imported != n || len(rep.Problems) != 0 || rep.Blank != 0 || b.Len() != n {
		t.Fatalf("report: lines %d imported %d problems %d", rep.Lines, rep.Imported, len(rep.Problems))
	}
	if !sameExport(t, b, nd) {
		t.Fatal("export → import → export changed receipts.ndjson")
	}
	if st.Size() < int64(n)*1500 {
		t.Fatalf("export is only %d bytes", st.Size())
	}
	// Control: the comparison does notice a difference.
	b.Append(signedReceipt(t, key, "one-more", 1, ""))
	if sameExport(t, b, nd) {
		t.Fatal("sameExport missed an extra receipt")
	}
}

// An export of a log built by appends in arbitrary order, with ties,
// survives import into an empty log byte for byte; a reopened log exports
// the same.
func TestExportImportArbitraryAppendOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	key := testKey("operator")
	trusted := []common.Address{addrOf(key)}
	a := openTestLog(t, Options{noSync: true})
	var batch []Receipt
	for i := range 1000 {
		ts := int64(1700000000 + rng.IntN(50)) // many ties
		batch = append(batch, signedReceipt(t, key, fmt.Sprintf("c%d", i), ts, fmt.Sprintf(`,"n":%d`, rng.IntN(9))))
		if len(batch) == 1+rng.IntN(7) {
			a.Append(batch...)
			batch = batch[:0]
		}
	}
	a.Append(batch...)
	first := exportBytes(t, a)
	lines := strings.Split(string(first), "\n")
	if len(lines) != 1000 {
		t.Fatalf("%d lines", len(lines))
	}
	b := openTestLog(t, Options{noSync: true})
	if rep, err := b.Import(context.Background(), bytes.NewReader(first), PolicyReject, trusted); err != nil || rep.Imported != 1000 {
		t.Fatalf("import: %+v, %v", rep, err)
	}
	if !bytes.Equal(exportBytes(t, b), first) {
		t.Fatal("export → import → export differs")
	}
	// Re-import is idempotent: every line a duplicate.
	rep, err := b.Import(context.Background(), bytes.NewReader(first), PolicyReject, trusted)
	if err != nil || rep.Duplicates != 1000 || rep.Imported != 0 || rep.Conflicts != 0 || b.Len() != 1000 {
		t.Fatalf("re-import: %+v, %v", rep, err)
	}
	path := a.Path()
	a.Close()
	a2, err := OpenLog(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	if !bytes.Equal(exportBytes(t, a2), first) {
		t.Fatal("reopened log exports differently")
	}
}

func TestExportEmptyAndFormat(t *testing.T) {
	l := openTestLog(t, Options{})
	path := filepath.Join(t.TempDir(), NDJSONName)
	os.WriteFile(path, []byte("stale"), 0o600)
	if err := l.ExportFile(context.Background(), path, "3"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || len(b) != 0 {
		t.Fatalf("empty export = %q, %v", b, err)
	}
	rs := sampleReceipts(t, 3)
	l.Append(rs...)
	l.ExportFile(context.Background(), path, "3")
	b, _ := os.ReadFile(path)
	want := rs[2].String() + "\n" + rs[1].String() + "\n" + rs[0].String()
	if string(b) != want {
		t.Fatalf("export:\n%s", b)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temp files left: %v", entries)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.ExportFile(ctx, path, "3"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled export: %v", err)
	}
	if b2, _ := os.ReadFile(path); !bytes.Equal(b2, b) {
		t.Fatal("a cancelled export replaced the file")
	}
}

// importFixture returns an ndjson whose lines exercise every outcome.
func importFixture(t testing.TB) (data []byte, operator common.Address) {
	key := testKey("operator")
	stranger := testKey("stranger")
	snap, err := NewSnapshotReceipt(snapshotInfo(1), key)
	if err != nil {
		t.Fatal(err)
	}
	badSig := runtimeReceipt(runtimeParams{TokenID: 3, CallID: "bad-sig", Seq: 5, TS: 1700000050, Key: key})
	badSig = append(badSig[:len(badSig)-4:len(badSig)-4], `1d"}`...) // v = 29
	lines := []string{
		/* 1 */ string(runtimeReceipt(runtimeParams{TokenID: 3, CallID: "good-1", Seq: 1, TS: 1700000090, Key: key})),
		/* 2 */ "",
		/* 3 */ snap.String(),
		/* 4 */ string(runtimeReceipt(runtimeParams{TokenID: 3, CallID: "stranger-1", Seq: 2, TS: 1700000080, Key: stranger})),
		/* 5 */ string(runtimeReceipt(runtimeParams{TokenID: 3, CallID: "unsigned-1", Seq: 3, TS: 1700000070})),
		/* 6 */ `{"callId":"torn","ts":17000`,
		/* 7 */ "   \r",
		/* 8 */ string(runtimeReceipt(runtimeParams{TokenID: 3, CallID: "good-1", Seq: 1, TS: 1700000090, Key: key})), // duplicate
		/* 9 */ `{"schemaVersion":"stratum/receipt/v1","tokenId":1,"subscriber":"0xabc","callId":"v1-old","outputHash":"0x1","ts":1600000000,"signature":"0x"}`,
		/* 10 */ string(badSig),
		/* 11 */ "\xff\xfe not utf-8",
		/* 12 */ `{"callId":"good-1","ts":1}`, // conflicting duplicate
		/* 13 */ "  " + string(runtimeReceipt(runtimeParams{TokenID: 3, CallID: "good-2", Seq: 9, TS: 1700000010, Key: key})) + " \r",
	}
	return []byte(strings.Join(lines, "\n")), addrOf(key)
}

func TestImportPolicies(t *testing.T) {
	data, op := importFixture(t)
	trusted := []common.Address{op}
	stranger := addrOf(testKey("stranger")).Hex()
	type want struct {
		imported, quarantined, rejected, skipped int
		inLog                                    []string
		actions                                  map[int]Action
	}
	cases := map[Policy]want{
		// Only the operator's receipts enter the log; a valid signature
		// by a stranger (line 4) is quarantined like the rest.
		PolicyQuarantine: {
			imported: 3, quarantined: 6,
			inLog:   []string{"good-1", "good-2"},
			actions: map[int]Action{4: ActionQuarantined, 5: ActionQuarantined, 6: ActionQuarantined, 9: ActionQuarantined, 10: ActionQuarantined, 11: ActionQuarantined, 12: ActionDuplicate},
		},
		PolicyReject: {
			rejected: 6, skipped: 3,
			actions: map[int]Action{4: ActionRejected, 5: ActionRejected, 6: ActionRejected, 9: ActionRejected, 10: ActionRejected, 11: ActionRejected, 12: ActionDuplicate},
		},
	}
	for policy, w := range cases {
		t.Run(policy.String(), func(t *testing.T) {
			l := openTestLog(t, Options{})
			rep, err := l.Import(context.Background(), bytes.NewReader(data), policy, trusted)
			checkCounts(t, rep)
			if policy == PolicyReject {
				if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "line 4:") || !strings.Contains(err.Error(), "line 10:") ||
					!strings.Contains(err.Error(), "and 1 more") {
					t.Fatalf("err = %v", err)
				}
				if l.Len() != 0 {
					t.Fatal("rejected import changed the log")
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if rep.Lines != 13 || rep.Blank != 2 || rep.Duplicates != 2 || rep.Conflicts != 1 ||
				rep.Imported != w.imported || rep.Quarantined != w.quarantined || rep.Dropped != 0 ||
				rep.Rejected != w.rejected || rep.Skipped != w.skipped || rep.ProblemsOmitted != 0 {
				t.Fatalf("report %+v", rep)
			}
			got := map[int]Action{}
			for _, p := range rep.Problems {
				got[p.Line] = p.Action
				if p.Action != ActionDuplicate && p.Status == StatusTrusted {
					t.Fatalf("trusted line %d listed as a problem", p.Line)
				}
				if p.Line == 4 && (p.Status != StatusUnknownSigner || p.Signer != stranger || p.CallID != "stranger-1") {
					t.Fatalf("line 4: %+v", p)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(w.actions) {
				t.Fatalf("actions %v, want %v", got, w.actions)
			}
			for _, id := range w.inLog {
				if !l.Has(id) {
					t.Errorf("%s not imported", id)
				}
			}
			if len(w.inLog) > 0 && l.Len() != len(w.inLog)+1 { // + the snapshot receipt
				t.Fatalf("log has %d receipts", l.Len())
			}
			for _, id := range []string{"stranger-1", "unsigned-1", "v1-old", "bad-sig"} {
				if l.Has(id) {
					t.Errorf("untrusted %s entered the log", id)
				}
			}
			// The quarantine file holds exactly the quarantined lines.
			var qlines []int
			err = l.IterateQuarantine(func(e QuarantineRecord) bool {
				if e.Source != "import" || e.Reason == "" {
					t.Fatalf("entry %+v", e)
				}
				if e.Line == 4 && (e.Status != "unknown-signer" || !bytes.Contains(e.Receipt, []byte(`"callId":"stranger-1"`))) {
					t.Fatalf("line 4 entry %+v", e)
				}
				if e.Line == 5 && (e.Status != "unsigned" || !bytes.Contains(e.Receipt, []byte(`"callId":"unsigned-1"`))) {
					t.Fatalf("line 5 entry %+v", e)
				}
				if e.Line == 11 && e.Base64 == nil {
					t.Fatalf("non-UTF-8 line not kept as base64: %+v", e)
				}
				qlines = append(qlines, e.Line)
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(qlines) != w.quarantined || (w.quarantined > 0 && rep.QuarantineFile != l.QuarantinePath()) {
				t.Fatalf("quarantine lines %v (file %q)", qlines, rep.QuarantineFile)
			}
			// No spool files left behind.
			entries, _ := os.ReadDir(filepath.Dir(l.Path()))
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".receipts-import-") {
					t.Fatalf("spool left: %s", e.Name())
				}
			}
		})
	}
}

// The attack: receipts signed by a key nobody trusts, or carrying a
// signature copied from a real receipt, were imported under every policy
// and folded into every later snapshot. Now none enters the log, the
// export stays empty, and the quarantine stops at its limits.
func TestImportForgedReceiptsNeverEnterTheLog(t *testing.T) {
	operator := testKey("operator")
	trusted := []common.Address{addrOf(operator)}
	const n = 300
	donor := mustParse(t, runtimeReceipt(runtimeParams{TokenID: 1, CallID: "donor", TS: 1, Key: operator})).Signature
	raws := make([][]byte, n)
	parallelReceipts(raws, func(i int) []byte {
		p := runtimeParams{TokenID: 3, CallID: fmt.Sprintf("forged-%d", i), Seq: i, TS: 1700000000 + int64(i)}
		if i%2 == 0 {
			p.Key = testKey(fmt.Sprintf("attacker-%d", i%7))
		} else {
			p.Signature = donor // a real signature over other fields
		}
		return runtimeReceipt(p)
	})
	good := runtimeReceipt(runtimeParams{TokenID: 3, CallID: "good", Seq: n, TS: 1700000000, Key: operator})
	in := append(bytes.Join(raws, []byte("\n")), '\n')
	in = append(in, good...)
	lim := QuarantineLimits{MaxBytes: 64 << 10, MaxCount: 1000}

	t.Run("quarantine", func(t *testing.T) {
		l := openTestLog(t, Options{Quarantine: lim})
		rep, err := l.Import(context.Background(), bytes.NewReader(in), PolicyQuarantine, trusted)
		checkCounts(t, rep)
		if err != nil || rep.Imported != 1 || rep.Quarantined+rep.Dropped != n || rep.Dropped == 0 || l.Len() != 1 || !l.Has("good") {
			t.Fatalf("report %+v, log %d, err %v", rep, l.Len(), err)
		}
		if st, err := os.Stat(l.QuarantinePath()); err != nil || st.Size() > lim.MaxBytes {
			t.Fatalf("quarantine file: %v, %v", st.Size(), err)
		}
		if got := exportBytes(t, l); !bytes.Equal(got, good) {
			t.Fatalf("export holds more than the trusted receipt: %d bytes", len(got))
		}
		// A second round adds nothing: the log and the quarantine stay put.
		info1, _ := l.Quarantine()
		rep, err = l.Import(context.Background(), bytes.NewReader(in), PolicyQuarantine, trusted)
		info2, _ := l.Quarantine()
		if err != nil || rep.Dropped != n || rep.Duplicates != 1 || l.Len() != 1 || info1 != info2 {
			t.Fatalf("second import: %+v, %v; quarantine %+v then %+v", rep, err, info1, info2)
		}
	})
	t.Run("reject", func(t *testing.T) {
		l := openTestLog(t, Options{Quarantine: lim})
		rep, err := l.Import(context.Background(), bytes.NewReader(in), PolicyReject, trusted)
		checkCounts(t, rep)
		if !errors.Is(err, ErrRejected) || rep.Rejected != n || rep.Skipped != 1 || l.Len() != 0 {
			t.Fatalf("report %+v, err %v", rep, err)
		}
		if _, err := os.Stat(l.QuarantinePath()); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("reject wrote a quarantine file")
		}
	})
}

func TestImportLineCounting(t *testing.T) {
	r := `{"callId":"x","ts":1}`
	for _, tc := range []struct {
		in          string
		lines, blnk int
	}{
		{"", 0, 0},
		{"\n", 1, 1},
		{r, 1, 0},
		{r + "\n", 1, 0},
		{r + "\n\n", 2, 1},
		{"\n" + r, 2, 1},
		{r + "\r\n" + r, 2, 0},
		{"\uFEFF" + r, 1, 0},
	} {
		l := openTestLog(t, Options{noSync: true})
		rep, err := l.Import(context.Background(), strings.NewReader(tc.in), PolicyQuarantine, nil)
		if err != nil || rep.Lines != tc.lines || rep.Blank != tc.blnk {
			t.Fatalf("%q: %+v, %v", tc.in, rep, err)
		}
		checkCounts(t, rep)
	}
}

func TestImportLongLine(t *testing.T) {
	long := `{"callId":"x","ts":1,"pad":"` + strings.Repeat("a", maxImportLine) + `"}`
	in := long + "\n" + `{"callId":"y","ts":1}`
	l := openTestLog(t, Options{noSync: true})
	rep, err := l.Import(context.Background(), strings.NewReader(in), PolicyQuarantine, nil)
	// y is unsigned, so it is quarantined too.
	if err != nil || rep.Quarantined != 2 || rep.Imported != 0 || rep.Lines != 2 || !strings.Contains(rep.Problems[0].Reason, "exceeds") {
		t.Fatalf("%+v %v", rep, err)
	}
	q, _ := os.ReadFile(l.QuarantinePath())
	var e QuarantineRecord
	json.Unmarshal(q[:bytes.IndexByte(q, '\n')], &e)
	if !e.Truncated || e.Length != int64(len(long)+1) || e.Text == nil || len(*e.Text) != maxImportLine {
		t.Fatalf("long line entry: truncated %v length %d", e.Truncated, e.Length)
	}
	if n := bytes.IndexByte(q, '\n'); n > maxQuarantineRecord {
		t.Fatalf("record of %d bytes", n)
	}
}

func TestImportCancelled(t *testing.T) {
	k := testKey("operator")
	in := genNDJSON(t, 600, k)
	l := openTestLog(t, Options{noSync: true})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Import(ctx, bytes.NewReader(in), PolicyQuarantine, []common.Address{addrOf(k)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if l.Len() != 0 {
		t.Fatal("cancelled import changed the log")
	}
	if _, err := os.Stat(l.QuarantinePath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("cancelled import wrote the quarantine")
	}
	for _, p := range []Policy{Policy(2), Policy(9), Policy(-1)} {
		if _, err := l.Import(context.Background(), bytes.NewReader(in), p, nil); err == nil {
			t.Fatalf("unknown policy %d accepted", p)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	for _, p := range []Policy{PolicyQuarantine, PolicyReject} {
		got, err := ParsePolicy(p.String())
		if err != nil || got != p {
			t.Fatalf("%v: %v %v", p, got, err)
		}
	}
	for _, bad := range []string{"drop", "keep", "", "Quarantine"} {
		if _, err := ParsePolicy(bad); !errors.Is(err, ErrPolicy) {
			t.Fatalf("ParsePolicy(%q) = %v", bad, err)
		}
	}
	_, err := ParsePolicy("keep")
	if msg := err.Error(); !strings.Contains(msg, "removed") || !strings.Contains(msg, "never folded into snapshots") || !strings.Contains(msg, "use quarantine") {
		t.Fatalf("keep: %v", err)
	}
	if Policy(0) != PolicyQuarantine || Policy(0).String() != "quarantine" {
		t.Fatal("zero policy must be the safe default")
	}
}
