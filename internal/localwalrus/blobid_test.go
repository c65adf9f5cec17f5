package localwalrus

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"os"
	"testing"

	"github.com/hermesd/hermesd/internal/redstuff"
)

// TestBlobIDs: the server's ids are Walrus's own over its shard count
// (BlobID: at 1000 shards), one golden vector pinned.
func TestBlobIDs(t *testing.T) {
	if got := BlobID(nil); got != "3GPQL3HZNnFhN_F7l5Aa-X1VOtAKwIsg9zuWk8R81v4" {
		t.Fatalf("BlobID(empty) = %s, walrus-core's is 3GPQL3HZNnFhN_F7l5Aa-X1VOtAKwIsg9zuWk8R81v4", got)
	}
	for _, shards := range []int{0, 10} {
		s := start(t, Config{Shards: shards})
		content := []byte("walrus")
		id := decodeStore(t, put(t, s, "", content)).NewlyCreated.BlobObject.BlobID
		want, err := redstuff.Sum(content, map[int]int{0: 1000, 10: 10}[shards])
		if err != nil {
			t.Fatal(err)
		}
		if id != want.String() {
			t.Fatalf("%d shards: id %s, want %s", shards, id, want)
		}
		// Stored again: the same id, from the cache.
		if again := decodeStore(t, put(t, s, "force=true", content)).NewlyCreated.BlobObject.BlobID; again != id {
			t.Fatalf("stored again: %s, then %s", id, again)
		}
	}
	if _, err := New(Config{Dir: t.TempDir(), Shards: 3}); err == nil {
		t.Fatal("3 shards accepted: RS2 needs 4")
	}
}

// TestLegacyQuilt: a quilt stored by an earlier version, in its own
// layout under a simulated id, still serves its patches.
func TestLegacyQuilt(t *testing.T) {
	s := start(t, Config{})
	const col = 334 * 2
	blob := make([]byte, 667*col)
	idx := []byte{1, 0, 0, 0, 0}
	idx = binary.LittleEndian.AppendUint16(idx, 1)
	idx = binary.LittleEndian.AppendUint16(idx, 1)
	idx = binary.LittleEndian.AppendUint16(idx, 2)
	idx = binary.LittleEndian.AppendUint64(idx, 5)
	idx = binary.LittleEndian.AppendUint32(idx, 3)
	idx = append(idx, "old"...)
	idx = binary.LittleEndian.AppendUint32(idx, 0)
	binary.LittleEndian.PutUint32(idx[1:], uint32(len(idx)-5))
	copy(blob, idx)
	copy(blob[col:], "hello")
	f, err := s.store.newUpload()
	if err != nil {
		t.Fatal(err)
	}
	f.Write(blob)
	f.Close()
	var id [32]byte
	copy(id[:], bytes.Repeat([]byte{7}, 32))
	if _, err := s.store.commit(f.Name(), id, encodeBlobID(id), int64(len(blob)), 0, s.Epoch(), putParams{epochs: 5}); err != nil {
		t.Fatal(err)
	}
	m, _ := s.store.loadMeta(hex.EncodeToString(id[:]))
	if m.Shards != 0 {
		t.Fatal("a legacy blob has no shard count")
	}
	pid := encodePatchID(id, 1, 2)
	if r := do(t, http.MethodGet, s.URL()+"/v1/blobs/by-quilt-patch-id/"+pid, nil); r.status != http.StatusOK || string(r.body) != "hello" ||
		r.header.Get("X-Quilt-Patch-Identifier") != "old" {
		t.Fatalf("legacy patch: %d %q", r.status, r.body)
	}
	if got, err := s.ReadStored(pid); err != nil || string(got) != "hello" {
		t.Fatalf("ReadStored: %q %v", got, err)
	}
	os.Remove(f.Name())
}
