package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
			ok, space := validJSON(trimmed, nil)
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
	f.Add(fixture, uint8(2))
	f.Add([]byte("\n\n{\"callId\":\"a\",\"ts\":1}\r\n{\"callId\":\"a\",\"ts\":2}\n{\"callId\":\"b\",\"ts\":1"), uint8(1))
	f.Add([]byte{}, uint8(0))
	trusted := []common.Address{addrOf(testKey("operator"))}
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
		l, err := OpenLog(path, Options{noSync: true})
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
		policy := Policy(p % 3)
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
		if rep.Flagged > rep.Imported || rep.Conflicts > rep.Duplicates {
			t.Fatalf("report %+v", rep)
		}
		if err != nil {
			if policy != PolicyReject || rep.Rejected == 0 || a.Len() != 0 {
				t.Fatalf("err = %v with report %+v", err, rep)
			}
			return
		}
		if a.Len() != rep.Imported {
			t.Fatalf("log has %d, report says %d imported", a.Len(), rep.Imported)
		}
		// Whatever was imported survives export → import → export.
		var e1 bytes.Buffer
		if err := a.Export(context.Background(), &e1); err != nil {
			t.Fatal(err)
		}
		b := open(t)
		rep2, err := b.Import(context.Background(), bytes.NewReader(e1.Bytes()), PolicyKeep, trusted)
		if err != nil || rep2.Imported != rep.Imported {
			t.Fatalf("re-import: %+v, %v", rep2, err)
		}
		var e2 bytes.Buffer
		b.Export(context.Background(), &e2)
		if !bytes.Equal(e1.Bytes(), e2.Bytes()) {
			t.Fatalf("export → import → export differs:\n%q\n%q", e1.Bytes(), e2.Bytes())
		}
	})
}
