package walrus_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/walrus"
)

// liar is an aggregator that answers every blob read with other bytes
// (a genuine, older blob, say), whatever id is asked for; ranges honestly
// cut from them.
func liar(t *testing.T, other []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := other
		if rg := r.Header.Get("Range"); rg != "" {
			a, b, _ := strings.Cut(strings.TrimPrefix(rg, "bytes="), "-")
			first, _ := strconv.Atoi(a)
			last, _ := strconv.Atoi(b)
			w.Header().Set("Content-Range", "bytes "+a+"-"+b+"/"+strconv.Itoa(len(other)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(other[first : last+1])
			return
		}
		w.Header().Set("ETag", strings.TrimPrefix(r.URL.Path, "/v1/blobs/"))
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReadChecksBlobID: bytes that are not the blob the id names never
// reach the caller, whichever read asks; another aggregator that has the
// blob is tried.
func TestReadChecksBlobID(t *testing.T) {
	s := startServer(t, localwalrus.Config{Shards: testShards})
	honest := newClient(t, s, walrus.Config{Shards: testShards})
	newer := bytes.Repeat([]byte("the newer head "), 300)
	older := bytes.Repeat([]byte("the older head "), 300) // same size
	res, err := honest.Store(t.Context(), walrus.BytesBody(newer))
	if err != nil {
		t.Fatal(err)
	}
	if res.BlobID != testBlobID(t, newer) {
		t.Fatalf("stored as %s, its id is %s", res.BlobID, testBlobID(t, newer))
	}
	lie := liar(t, older)
	lying := newClient(t, nil, walrus.Config{Aggregators: []string{lie.URL}, Shards: testShards})
	dir := t.TempDir()

	var buf bytes.Buffer
	_, err = lying.Read(t.Context(), res.BlobID, &buf)
	if !errors.Is(err, walrus.ErrBlobID) || buf.Len() != 0 || !strings.Contains(err.Error(), testBlobID(t, older)) {
		t.Fatalf("Read from a liar: %v, %d bytes handed over", err, buf.Len())
	}
	path := filepath.Join(dir, "blob")
	if _, err := lying.ReadToFile(t.Context(), res.BlobID, path); !errors.Is(err, walrus.ErrBlobID) {
		t.Fatalf("ReadToFile from a liar: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadToFile left %s behind: %v", path, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("ReadToFile left %d files", len(ents))
	}
	if _, err := lying.Verify(t.Context(), res.BlobID, [32]byte{}, int64(len(newer))); !errors.Is(err, walrus.ErrBlobID) {
		t.Fatalf("Verify against a liar: %v", err)
	}
	// A range that is the whole blob is checked; a part cannot be.
	buf.Reset()
	if _, err := lying.ReadRange(t.Context(), res.BlobID, 0, int64(len(older)), &buf); !errors.Is(err, walrus.ErrBlobID) || buf.Len() != 0 {
		t.Fatalf("whole-blob range from a liar: %v, %d bytes", err, buf.Len())
	}
	buf.Reset()
	if _, err := lying.ReadRange(t.Context(), res.BlobID, 0, 10, &buf); err != nil || buf.String() != string(older[:10]) {
		t.Fatalf("a part of the blob: %v %q", err, buf.String())
	}

	// The liar first, then an aggregator that has the blob: the read
	// moves on and returns the blob.
	both := newClient(t, nil, walrus.Config{Aggregators: []string{lie.URL, s.URL()}, Shards: testShards})
	buf.Reset()
	rr, err := both.Read(t.Context(), res.BlobID, &buf)
	if err != nil || !bytes.Equal(buf.Bytes(), newer) || rr.Aggregator != s.URL() {
		t.Fatalf("liar then honest: %v, %d bytes from %s", err, buf.Len(), rr.Aggregator)
	}
	if _, err := both.ReadToFile(t.Context(), res.BlobID, path); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, newer) {
		t.Fatal("ReadToFile after a liar: other bytes")
	}

	// A client over another shard count computes other ids: every read
	// fails, loudly, rather than pass other bytes.
	wrong := newClient(t, s, walrus.Config{Shards: 1000})
	if _, err := wrong.Read(t.Context(), res.BlobID, &buf); !errors.Is(err, walrus.ErrBlobID) || !strings.Contains(err.Error(), "over 1000 shards") {
		t.Fatalf("a client over 1000 shards reading a 100-shard blob: %v", err)
	}
	if _, err := walrus.New(walrus.Config{Aggregators: []string{s.URL()}, Shards: 3}); !errors.Is(err, walrus.ErrConfig) {
		t.Fatalf("3 shards: %v", err)
	}
}

// TestPatchReadsUnchecked: a quilt patch cannot be checked alone (its id
// commits to the whole quilt): it is read as served.
func TestPatchReadsUnchecked(t *testing.T) {
	s := startServer(t, localwalrus.Config{Shards: testShards})
	c := newClient(t, s, walrus.Config{Shards: testShards})
	q, err := c.StoreQuilt(t.Context(), []walrus.QuiltPart{{Identifier: "p000", Body: walrus.BytesBody([]byte("a patch"))}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := c.ReadPatch(t.Context(), q.Patches[0].PatchID, &buf); err != nil || buf.String() != "a patch" {
		t.Fatalf("patch read: %v %q", err, buf.String())
	}
}

// TestReadBackStreamsUnchecked: ReadBack hands the bytes served to a
// caller that compares them with what it stored, unchecked against the
// id: the caller's comparison is the check.
func TestReadBackStreamsUnchecked(t *testing.T) {
	s := startServer(t, localwalrus.Config{Shards: testShards})
	honest := newClient(t, s, walrus.Config{Shards: testShards})
	stored := bytes.Repeat([]byte("the stored pack "), 300)
	res, err := honest.Store(t.Context(), walrus.BytesBody(stored))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := honest.ReadBack(t.Context(), res.BlobID, &buf, walrus.WithExpectedSize(int64(len(stored)))); err != nil || !bytes.Equal(buf.Bytes(), stored) {
		t.Fatalf("ReadBack: %v, %d bytes", err, buf.Len())
	}
	other := bytes.Repeat([]byte("another old pk "), 320)
	lying := newClient(t, nil, walrus.Config{Aggregators: []string{liar(t, other).URL}, Shards: testShards})
	buf.Reset()
	if _, err := lying.ReadBack(t.Context(), res.BlobID, &buf); err != nil || !bytes.Equal(buf.Bytes(), other) {
		t.Fatalf("ReadBack from a liar: %v, %d bytes (want the liar's, for the caller to refuse)", err, buf.Len())
	}
	if _, err := lying.ReadBack(t.Context(), "not a blob id", &buf); !errors.Is(err, walrus.ErrInvalidBlobID) {
		t.Fatalf("ReadBack of a bad id: %v", err)
	}
}
