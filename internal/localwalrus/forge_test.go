package localwalrus

import (
	"bytes"
	"net/http"
	"testing"
)

// TestForge: a forged id answers another blob's bytes — whole, in ranges
// bounded by the forged length, and as a quilt patch — under headers that
// name the id asked for, until the forgery ends; nothing stored changes.
func TestForge(t *testing.T) {
	s := start(t, Config{})
	older, newer := []byte("the older head, genuine"), []byte("the newer head, which the pointer names")
	oldID := decodeStore(t, put(t, s, "", older)).NewlyCreated.BlobObject.BlobID
	newID := decodeStore(t, put(t, s, "", newer)).NewlyCreated.BlobObject.BlobID
	sr, qa := decodeQuilt(t, putQuiltReq(t, s, "", []quiltPart{{"p", []byte("a patch's bytes")}}, ""))
	patch := qa.StoredQuiltBlobs[0].QuiltPatchID
	quilt := sr.NewlyCreated.BlobObject.BlobID

	s.Forge(newID, older)
	s.Forge(patch, older)
	r := do(t, http.MethodGet, s.URL()+"/v1/blobs/"+newID, nil)
	if r.status != 200 || !bytes.Equal(r.body, older) || r.header.Get("ETag") != newID {
		t.Fatalf("forged whole read: %d %q ETag %q", r.status, r.body, r.header.Get("ETag"))
	}
	r = do(t, http.MethodGet, s.URL()+"/v1/blobs/"+newID, nil, "Range", "bytes=4-8")
	if r.status != 206 || string(r.body) != "older" || r.header.Get("Content-Range") != "bytes 4-8/23" {
		t.Fatalf("forged range: %d %q %q", r.status, r.body, r.header.Get("Content-Range"))
	}
	if r = do(t, http.MethodGet, s.URL()+"/v1/blobs/"+newID, nil, "Range", "bytes=20-30"); r.status != 416 {
		t.Fatalf("a range past the forged bytes: %d", r.status)
	}
	r = do(t, http.MethodGet, s.URL()+"/v1/blobs/by-quilt-patch-id/"+patch, nil)
	if r.status != 200 || !bytes.Equal(r.body, older) || r.header.Get("ETag") != quilt {
		t.Fatalf("forged patch: %d %q ETag %q", r.status, r.body, r.header.Get("ETag"))
	}
	if r = do(t, http.MethodGet, s.URL()+"/v1/blobs/"+oldID, nil); !bytes.Equal(r.body, older) {
		t.Fatalf("the older blob itself: %q", r.body)
	}

	s.Forge(newID, nil)
	s.Forge(patch, nil)
	if r = do(t, http.MethodGet, s.URL()+"/v1/blobs/"+newID, nil); !bytes.Equal(r.body, newer) {
		t.Fatalf("after the forgery: %q", r.body)
	}
	if r = do(t, http.MethodGet, s.URL()+"/v1/blobs/by-quilt-patch-id/"+patch, nil); string(r.body) != "a patch's bytes" {
		t.Fatalf("patch after the forgery: %q", r.body)
	}
}
