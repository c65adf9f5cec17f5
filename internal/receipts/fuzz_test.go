package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"callId":"x","ts":1}`))
	f.Add([]byte(" {\"callId\" : \"a\\u0041\",\n\"ts\":0, \"tokenId\": 3}\r\n"))
	f.Add(runtimeReceipt(runtimeParams{TokenID: 3, CallID: "call-1", Seq: 1, TS: 1700000000}))
	f.Add([]byte(`{"callId":"x","ts":1,"callId":"y"}`))
	f.Add([]byte(`{"callId":"x","ts":1e3}`))
	f.Add([]byte(`[1,2,{"a":-0.5e+7}]`))
	trusted := []common.Address{addrOf(testKey("operator"))}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := Parse(in)
		trimmed := bytes.TrimSpace(in)
		// The hand-written validator agrees with encoding/json on every
		// valid UTF-8 input, and knows when compaction is a no-op.
		if utf8.Valid(trimmed) {
			ok, space := validJSON(trimmed)
			if ok != json.Valid(trimmed) {
				t.Fatalf("validJSON = %v, json.Valid = %v", ok, !ok)
			}
			if ok && !space {
				var c bytes.Buffer
				json.Compact(&c, trimmed)
				if !bytes.Equal(c.Bytes(), trimmed) {
					t.Fatal("validJSON saw no whitespace, but Compact changed the input")
				}
			}
		}
		if err != nil {
			if r.CallID != "" || r.raw != nil {
				t.Fatal("failed Parse returned a receipt")
			}
			return
		}
		b := r.Bytes()
		if !json.Valid(b) || b[0] != '{' || r.CallID == "" || r.TS < 0 {
			t.Fatalf("accepted %q as %q", in, b)
		}
		var c bytes.Buffer
		json.Compact(&c, b)
		if !bytes.Equal(c.Bytes(), b) {
			t.Fatal("stored bytes are not compact")
		}
		if !bytes.Equal(b, c.Bytes()) || (!bytes.ContainsAny(trimmed, " \t\r\n") && !bytes.Equal(b, trimmed)) {
			t.Fatal("compact input was not kept byte for byte")
		}
		r2, err := Parse(b)
		if err != nil || r2.DigestFields() != r.DigestFields() || r2.AgentID != r.AgentID ||
			r2.ParentBlobID != r.ParentBlobID || r2.SchemaVersion != r.SchemaVersion || r2.String() != r.String() {
			t.Fatalf("reparse differs: %v", err)
		}
		// The fields agree with encoding/json's reading of the object.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var callID string
		if json.Unmarshal(m["callId"], &callID); callID != r.CallID {
			t.Fatalf("callId %q, encoding/json says %q", r.CallID, callID)
		}
		res, verr := Verify(&r, trusted)
		if (verr == nil) != (res.Status == StatusTrusted) || res.Status == 0 {
			t.Fatalf("Verify = %+v, %v", res, verr)
		}
	})
}

func FuzzImport(f *testing.F) {
	fixture, _ := importFixture(f)
	f.Add(fixture, uint8(0))
	f.Add(fixture, uint8(1))
	f.Add([]byte("\n\n{\"callId\":\"a\",\"ts\":1}\r\n{\"callId\":\"a\",\"ts\":2}\n{\"callId\":\"b\",\"ts\":1"), uint8(1))
	f.Add([]byte{}, uint8(0))
	f.Add(junkLines(12), uint8(0))
	trusted := []common.Address{addrOf(testKey("operator"))}
	// Small limits, so that inputs reach the full quarantine.
	lim := QuarantineLimits{MaxBytes: 4096, MaxCount: 6}
	// One directory for all runs, in memory when the machine has a tmpfs:
	// file creation on ext4 was the fuzzer's bottleneck.
	dir := f.TempDir()
	if d, err := os.MkdirTemp("/dev/shm", "receipts-fuzz-"); err == nil {
		dir = d
		f.Cleanup(func() { os.RemoveAll(d) })
	}
	var runs atomic.Int64
	open := func(t *testing.T) *Log {
		path := filepath.Join(dir, fmt.Sprintf("run%d.log", runs.Add(1)))
		l, err := OpenLog(path, Options{noSync: true, Quarantine: lim})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			l.Close()
			os.Remove(path)
			os.Remove(QuarantinePath(path))
		})
		return l
	}
	f.Fuzz(func(t *testing.T, in []byte, p uint8) {
		policy := Policy(p % 2)
		a := open(t)
		rep, err := a.Import(context.Background(), bytes.NewReader(in), policy, trusted)
		checkCounts(t, rep)
		lines := bytes.Count(in, []byte("\n"))
		if len(in) > 0 && in[len(in)-1] != '\n' {
			lines++
		}
		if rep.Lines != lines {
			t.Fatalf("Lines = %d, input has %d", rep.Lines, lines)
		}
		if rep.Conflicts > rep.Duplicates || len(rep.Problems)+rep.ProblemsOmitted != rep.Quarantined+rep.Dropped+rep.Rejected+rep.Conflicts {
			t.Fatalf("report %+v", rep)
		}
		info, qerr := a.Quarantine()
		if qerr != nil || info.Count != rep.Quarantined || info.Count > lim.MaxCount || info.Bytes > lim.MaxBytes {
			t.Fatalf("quarantine %+v, %v; report %+v", info, qerr, rep)
		}
		if err != nil {
			if policy != PolicyReject || rep.Rejected == 0 || a.Len() != 0 || info.Count != 0 {
				t.Fatalf("err = %v with report %+v", err, rep)
			}
			return
		}
		if a.Len() != rep.Imported {
			t.Fatalf("log has %d, report says %d imported", a.Len(), rep.Imported)
		}
		// Only trusted receipts are in the log.
		a.Iterate(func(r Receipt) bool {
			if res, _ := Verify(&r, trusted); res.Status != StatusTrusted {
				t.Fatalf("untrusted receipt in the log: %+v", res)
			}
			return true
		})
		// Whatever was exported survives export → import → export.
		var e1 bytes.Buffer
		if err := a.Export(context.Background(), &e1); err != nil {
			t.Fatal(err)
		}
		exported := 0
		if e1.Len() > 0 {
			exported = bytes.Count(e1.Bytes(), []byte("\n")) + 1
		}
		b := open(t)
		rep2, err := b.Import(context.Background(), bytes.NewReader(e1.Bytes()), PolicyReject, trusted)
		if err != nil || rep2.Imported != exported {
			t.Fatalf("re-import: %+v, %v", rep2, err)
		}
		var e2 bytes.Buffer
		b.Export(context.Background(), &e2)
		if !bytes.Equal(e1.Bytes(), e2.Bytes()) {
			t.Fatalf("export → import → export differs:\n%q\n%q", e1.Bytes(), e2.Bytes())
		}
	})
}

// FuzzQuarantineFile lists a damaged quarantine file: every complete line
// is one record, damaged ones reported as such.
func FuzzQuarantineFile(f *testing.F) {
	f.Add([]byte(`{"time":1,"source":"import","line":1,"reason":"r","length":3,"text":"abc"}` + "\n"))
	f.Add([]byte(`{"time":1,"source":"log","line":2,"reason":"r","receipt":{"callId":"x","ts":1},"length":30}` + "\n{\"time\":2,\"sou"))
	f.Add([]byte("\n\n{}\n[1]\n\"x\"\n{\"base64\":\"!!\"}\n"))
	f.Add([]byte{0xff, '\n', 0})
	dir := f.TempDir()
	var runs atomic.Int64
	f.Fuzz(func(t *testing.T, in []byte) {
		path := filepath.Join(dir, fmt.Sprintf("run%d.log", runs.Add(1)))
		if err := os.WriteFile(QuarantinePath(path), in, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := OpenLog(path, Options{noSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			l.Close()
			os.Remove(path)
			os.Remove(QuarantinePath(path))
		}()
		n := 0
		if err := l.IterateQuarantine(func(r QuarantineRecord) bool {
			n++
			if r.Source == "quarantine" && (r.Line != n || r.Reason == "") {
				t.Fatalf("damaged record %+v", r)
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		info, err := l.Quarantine()
		if err != nil || info.Count != n || info.Count != bytes.Count(in, []byte("\n")) || info.Bytes != int64(len(in)) {
			t.Fatalf("info %+v (%v), listed %d", info, err, n)
		}
		// Appending after damage keeps every earlier line a line.
		if _, err := l.Import(context.Background(), strings.NewReader("junk"), PolicyQuarantine, nil); err != nil {
			t.Fatal(err)
		}
		m := 0
		var last QuarantineRecord
		l.IterateQuarantine(func(r QuarantineRecord) bool { m++; last = r; return true })
		torn := len(in) > 0 && in[len(in)-1] != '\n'
		if want := n + 1; torn && m != want+1 || !torn && m != want || last.Source != "import" {
			t.Fatalf("after append: %d records, last %+v", m, last)
		}
	})
}
