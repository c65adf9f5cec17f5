package bundlelock

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewLockLayout(t *testing.T) {
	l := &Lock{}
	if !l.Record("0xabc", 1700000000000) {
		t.Fatal("Record on an empty lock reported no change")
	}
	want := "{\n  \"bundleHash\": \"0xabc\",\n  \"version\": 1,\n  \"lastUpdated\": 1700000000000\n}"
	if got := string(l.Marshal()); got != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", got, want)
	}
	if got := string((&Lock{}).Marshal()); got != "{}" {
		t.Fatalf("empty lock = %q", got)
	}
}

func TestRoundTripPreservesUnknownKeysAndOrder(t *testing.T) {
	in := `{"zeta":{"nested":[1,2,{"a":null}],"empty":{},"list":[]},"version":4,"bundleHash":"0x01","note":"<tag> & é","lastUpdated":5}`
	l, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	l.SetBundleHash("0x02")
	l.SetBlobID("blobA")
	want := `{
  "zeta": {
    "nested": [
      1,
      2,
      {
        "a": null
      }
    ],
    "empty": {},
    "list": []
  },
  "version": 4,
  "bundleHash": "0x02",
  "note": "<tag> & é",
  "lastUpdated": 5,
  "walrusSnapshotBlobId": "blobA"
}`
	if got := string(l.Marshal()); got != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", got, want)
	}
	again, err := Parse(l.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Marshal(), l.Marshal()) {
		t.Fatal("parse(marshal(l)) is not a fixed point")
	}
}

func TestRecordAndUploaded(t *testing.T) {
	l := &Lock{}
	l.Record("0xa", 1)
	if l.Record("0xa", 2) {
		t.Error("same hash reported as a change")
	}
	if l.Version() != 1 || l.LastUpdated() != 2 {
		t.Errorf("version %d lastUpdated %d", l.Version(), l.LastUpdated())
	}
	if !l.Record("0xb", 3) || l.Version() != 2 || l.BundleHash() != "0xb" {
		t.Errorf("after change: version %d hash %s", l.Version(), l.BundleHash())
	}
	l.Uploaded(LineageEntry{BlobID: "b1", BundleHash: "0xa", CreatedAt: 1, Size: 10, EndEpoch: 5})
	l.Uploaded(LineageEntry{BlobID: "b2", BundleHash: "0xb", CreatedAt: 3, Size: 11, EndEpoch: 6})
	l.Uploaded(LineageEntry{BlobID: "b2", BundleHash: "0xb", CreatedAt: 4, Size: 11, EndEpoch: 7})
	lin := l.Lineage()
	if len(lin) != 2 || lin[0].BlobID != "b2" || lin[0].EndEpoch != 7 || lin[1].BlobID != "b1" {
		t.Fatalf("lineage = %+v", lin)
	}
	if l.BlobID() != "b2" {
		t.Errorf("blob id = %q", l.BlobID())
	}
	many := make([]LineageEntry, MaxLineage+10)
	for i := range many {
		many[i] = LineageEntry{BlobID: "x"}
	}
	l.SetLineage(many)
	if n := len(l.Lineage()); n != MaxLineage {
		t.Errorf("lineage not capped: %d", n)
	}
}

func TestParseErrors(t *testing.T) {
	tests := map[string]string{
		"not json":          `nope`,
		"array":             `[1]`,
		"trailing data":     `{"a":1} {}`,
		"truncated":         `{"a":`,
		"hash not string":   `{"bundleHash":1}`,
		"version not int":   `{"version":"1"}`,
		"version fraction":  `{"version":1.5}`,
		"lineage not array": `{"lineage":{}}`,
		"lineage no blob":   `{"lineage":[{"bundleHash":"0x"}]}`,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(in)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) = %v, want ErrMalformed", in, err)
			}
		})
	}
}

func TestWriteAndRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, FileName)
	if _, err := Read(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing lock: %v", err)
	}
	l := &Lock{}
	l.Record("0x1", 7)
	if err := Write(p, l); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, l.Marshal()) || bytes.HasSuffix(got, []byte("\n")) {
		t.Fatalf("file = %q", got)
	}
	back, err := Read(p)
	if err != nil || back.BundleHash() != "0x1" {
		t.Fatalf("Read = %v, %v", back, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
}

// TestMatchesJavaScript checks the rewrite against what the reference
// runtime does: JSON.parse, assign fields, JSON.stringify(obj, null, 2).
func TestMatchesJavaScript(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required for the interop test (apt-get install nodejs)")
	}
	inputs := []string{
		`{"bundleHash":"0xdeadbeef","version":3,"lastUpdated":1}`,
		`{"custom":{"deep":[1,[2,[]],{}],"s":"a\"b\\c"},"version":1,"extra":true,"n":null}`,
		`{"lineage":[{"blobId":"x","bundleHash":"0x1","createdAt":1,"size":2,"endEpoch":3}],"bundleHash":"0x0"}`,
		`{"unicode":"héllo \u2603 😀 \u0041\/\u001f\t\u2028","tags":["<a>","&"]}`,
		`{"nums":[1.5e3,1e21,1e-6,9.99e-7,1e-7,1.2e-7,0.1,-0,123456789012345678901234,1E400,-2.5E-10,100,1e20],"x":1}`,
		`{"dup":{"a":1,"b":2,"a":3},"version":2,"version":5}`,
		`{}`,
	}
	script := `const fs=require('fs');const o=JSON.parse(fs.readFileSync(0,'utf8'));` +
		`o.bundleHash='0xfeed';o.lastUpdated=1700000000123;o.walrusSnapshotBlobId='Blob_-ID';` +
		`process.stdout.write(JSON.stringify(o,null,2));`
	for _, in := range inputs {
		cmd := exec.Command(node, "-e", script)
		cmd.Stdin = strings.NewReader(in)
		want, err := cmd.Output()
		if err != nil {
			t.Fatalf("node: %v", err)
		}
		l, err := Parse([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		l.SetBundleHash("0xfeed")
		l.SetLastUpdated(1700000000123)
		l.SetBlobID("Blob_-ID")
		if got := l.Marshal(); !bytes.Equal(got, want) {
			t.Errorf("input %s:\ngo:\n%s\njs:\n%s", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"bundleHash":"0x1","version":1,"lastUpdated":2}`))
	f.Add([]byte(`{"lineage":[{"blobId":"a","bundleHash":"b","createdAt":1,"size":2,"endEpoch":3}]}`))
	f.Add([]byte(`{"a":{"b":[{}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Parse(b)
		if err != nil {
			return
		}
		out := l.Marshal()
		l2, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse of marshalled lock failed: %v\n%s", err, out)
		}
		if !bytes.Equal(l2.Marshal(), out) {
			t.Fatalf("marshal is not a fixed point:\n%s\n%s", out, l2.Marshal())
		}
		_ = l.Lineage()
		l.Record("0xff", 1)
		l.Uploaded(LineageEntry{BlobID: "z"})
		if _, err := Parse(l.Marshal()); err != nil {
			t.Fatalf("modified lock does not parse: %v", err)
		}
	})
}
