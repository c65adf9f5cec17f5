package bundlelock

import (
	"testing"
)

const (
	tBlob  = "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk"
	tOther = "E7_nNXvFU_3qZVu3OH1yycRG7LZlyn1-UxEDCDDqGGU"
	tRef   = tBlob + ".ki98_bqU5C0tD7_76ECF-7T1WmYMxikQmWR7-GtCiTo"
)

// TestHeadReference: a v3 head's reference keeps the plain id in
// walrusSnapshotBlobId, which the reference runtime reads and writes, and
// the whole reference in hermesd's walrusSnapshotHead; BlobID gives the
// reference back only while both name the same blob, so a runtime that
// moved walrusSnapshotBlobId on (knowing nothing of the other key) is
// never paired with a stale digest. A plain id removes the digest.
func TestHeadReference(t *testing.T) {
	l := &Lock{}
	l.Record("0x01", 1)
	l.Uploaded(LineageEntry{BlobID: tRef, BundleHash: "0x01", CreatedAt: 1, Size: 10, EndEpoch: 5})
	want := `{
  "bundleHash": "0x01",
  "version": 1,
  "lastUpdated": 1,
  "walrusSnapshotBlobId": "` + tBlob + `",
  "walrusSnapshotHead": "` + tRef + `",
  "lineage": [
    {
      "blobId": "` + tRef + `",
      "bundleHash": "0x01",
      "createdAt": 1,
      "size": 10,
      "endEpoch": 5
    }
  ]
}`
	if got := string(l.Marshal()); got != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", got, want)
	}
	if got := l.BlobID(); got != tRef {
		t.Fatalf("BlobID = %q", got)
	}

	// The reference runtime uploads and records its own blob: the lock
	// names that one, bare.
	rt, err := Parse(l.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.SetRaw(KeyBlobID, []byte(`"`+tOther+`"`)); err != nil {
		t.Fatal(err)
	}
	if got := rt.BlobID(); got != tOther {
		t.Fatalf("after the runtime's upload BlobID = %q, want %q", got, tOther)
	}
	// A damaged walrusSnapshotHead counts for nothing.
	for _, bad := range []string{`"` + tBlob + `.xyz"`, `"` + tBlob + `"`, `""`} {
		d, _ := Parse(l.Marshal())
		if err := d.SetRaw(KeyHead, []byte(bad)); err != nil {
			t.Fatal(err)
		}
		if got := d.BlobID(); got != tBlob {
			t.Errorf("walrusSnapshotHead %s: BlobID = %q, want %q", bad, got, tBlob)
		}
	}
	// Not a string: the lock is malformed.
	if _, err := Parse([]byte(`{"walrusSnapshotHead": 3}`)); err == nil {
		t.Fatal("a walrusSnapshotHead of 3 parsed")
	}

	// A v1/v2 snapshot after it: a plain id, and no digest left over.
	l.Uploaded(LineageEntry{BlobID: tOther, BundleHash: "0x02"})
	if _, ok := l.Raw(KeyHead); ok || l.BlobID() != tOther {
		t.Fatalf("after a plain upload: BlobID %q, walrusSnapshotHead present %v", l.BlobID(), ok)
	}
	if es := l.Lineage(); len(es) != 2 || es[0].BlobID != tOther || es[1].BlobID != tRef {
		t.Fatalf("lineage %+v", es)
	}

	// The same head named bare, then with its digest (a restore learns
	// it): one lineage entry, the bound one.
	b := &Lock{}
	b.Uploaded(LineageEntry{BlobID: tBlob})
	b.Uploaded(LineageEntry{BlobID: tRef})
	if es := b.Lineage(); len(es) != 1 || es[0].BlobID != tRef || b.BlobID() != tRef {
		t.Fatalf("lineage %+v, BlobID %q", es, b.BlobID())
	}
}
