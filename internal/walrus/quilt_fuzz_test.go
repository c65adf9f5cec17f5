package walrus

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// FuzzParseQuilt feeds hostile quilt store answers to the check that
// stands between a publisher and a patch id a snapshot would reference:
// whatever it accepts names exactly the patches sent, once each, every
// one of the quilt the answer names.
func FuzzParseQuilt(f *testing.F) {
	quilt := "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk"
	raw, _ := base64.RawURLEncoding.DecodeString(quilt)
	pid := func(start byte) string {
		return base64.RawURLEncoding.EncodeToString(append(bytes.Clone(raw), 1, start, 0, start+1, 0))
	}
	good := `{"blobStoreResult":` + newlyCreatedDocs[:len(newlyCreatedDocs)-1] + `},"storedQuiltBlobs":[{"identifier":"a","quiltPatchId":"` + pid(1) + `"},{"identifier":"b","quiltPatchId":"` + pid(2) + `"}]}`
	f.Add([]byte(good))
	f.Add([]byte(`{"blobStoreResult":` + alreadyEvent + `,"storedQuiltBlobs":[{"identifier":"b","quiltPatchId":"` + pid(2) + `"},{"identifier":"a","quiltPatchId":"` + pid(1) + `"}]}`))
	f.Add([]byte(`{"blobStoreResult":` + alreadyEvent + `,"storedQuiltBlobs":[{"identifier":"a","quiltPatchId":"` + pid(1) + `"},{"identifier":"a","quiltPatchId":"` + pid(1) + `"}]}`))
	f.Add([]byte(`{"storedQuiltBlobs":[]}`))
	// What the publisher answers for a quilt marked invalid, or failed.
	f.Add([]byte(`{"blobStoreResult":` + markedInvalid + `,"storedQuiltBlobs":[]}`))
	f.Add([]byte(`{"blobStoreResult":` + resultErrorOpenAPI + `,"storedQuiltBlobs":[]}`))
	f.Add([]byte(`{"blobStoreResult":` + newlyCreatedOpenAPI[:len(newlyCreatedOpenAPI)-1] + `},"storedQuiltBlobs":[{"identifier":"a","quiltPatchId":"` + pid(1) + `","range":[1,2]},{"identifier":"b","quiltPatchId":"` + pid(2) + `","range":[2,3]}]}`))
	c, err := New(Config{Publishers: []string{"http://127.0.0.1:1"}})
	if err != nil {
		f.Fatal(err)
	}
	parts := []QuiltPart{{Identifier: "a", Body: BytesBody([]byte("x"))}, {Identifier: "b", Body: BytesBody([]byte("yy"))}}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := c.parseQuilt(data, parts, 3)
		if err != nil {
			return
		}
		if len(r.Patches) != len(parts) {
			t.Fatalf("%d patches accepted for %d parts", len(r.Patches), len(parts))
		}
		q, _ := base64.RawURLEncoding.DecodeString(r.BlobID)
		seen := map[string]bool{}
		for i, p := range r.Patches {
			b, err := base64.RawURLEncoding.DecodeString(p.PatchID)
			if p.Identifier != parts[i].Identifier || err != nil || !bytes.Equal(b[:32], q) || seen[p.PatchID] {
				t.Fatalf("accepted patch %d: %+v of quilt %s", i, p, r.BlobID)
			}
			seen[p.PatchID] = true
		}
	})
}
