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
