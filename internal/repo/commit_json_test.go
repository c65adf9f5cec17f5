package repo

import (
	"bytes"
	"testing"
)

// An empty lock or receipts file is referenced with "chunks":[], as the
// format says, never null; and it decodes back to an empty file.
func TestEmptyFileRefEncoding(t *testing.T) {
	c, err := DecodeCommit([]byte(vecCommit))
	if err != nil {
		t.Fatal(err)
	}
	c.Receipts = &FileRef{Mode: 0o644, SHA256: ID(emptySHA256)}
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"receipts":{"mode":420,"size":0,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","chunks":[]}`)) {
		t.Fatalf("commit %s", b)
	}
	d, err := DecodeCommit(b)
	if err != nil || d.Receipts == nil || d.Receipts.Size != 0 || len(d.Receipts.Chunks) != 0 {
		t.Fatalf("decoded %+v, %v", d, err)
	}
}

// A pack entry has four members; commits written before 2026-11-26 carry a
// fifth, "sha256", which is accepted when well-formed and dropped (it is
// not written again). Anything else is refused.
func TestPackEntryLegacyDigest(t *testing.T) {
	commit := func(entry string) []byte {
		return []byte(`{"format":"hermesd/v3","identity":"a.eth","keyId":"0011223344556677","root":"` + vecRootID +
			`","parent":"","parentFormat":"","time":1,"bundleHash":"` + vecBundle + `","lockVersion":1,"files":0,"bytes":0,"added":0,"lock":null,"receipts":null,"packs":[` + entry + `]}`)
	}
	const base = `"blobId":"A","size":100,"endEpoch":7,"indexLength":36`
	for _, tc := range []struct {
		name, entry string
		ok          bool
	}{
		{"current", `{` + base + `}`, true},
		{"legacy digest", `{` + base + `,"sha256":"` + vecNotesID + `"}`, true},
		{"legacy digest malformed", `{` + base + `,"sha256":"00"}`, false},
		{"unknown member", `{` + base + `,"extra":1}`, false},
		{"index length missing", `{"blobId":"A","size":100,"endEpoch":7}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DecodeCommit(commit(tc.entry))
			if !tc.ok {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Packs[0] != (PackRef{BlobID: "A", Size: 100, EndEpoch: 7, IndexLength: 36}) {
				t.Fatalf("entry %+v", c.Packs[0])
			}
			b, err := c.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(`"packs":[{`+base+`}]}`)) {
				t.Fatalf("re-encoded %s", b)
			}
		})
	}
}
