package localwalrus

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/zeebo/blake3"
	"golang.org/x/crypto/blake2b"
)

// TestBlobIDDerivation pins the simulated blob id to the package doc's
// formula, and the content digest to BLAKE3's published vectors.
func TestBlobIDDerivation(t *testing.T) {
	for in, want := range map[string]string{
		"":    "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
		"abc": "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85",
	} {
		if got := blake3.Sum256([]byte(in)); hex.EncodeToString(got[:]) != want {
			t.Fatalf("BLAKE3(%q) = %x, want %s", in, got, want)
		}
	}
	for _, content := range [][]byte{nil, []byte("walrus"), make([]byte, 3<<20)} {
		inner := blake3.Sum256(content)
		msg := append([]byte("localwalrus/blob-id/v3\x00\x01"), binary.LittleEndian.AppendUint64(nil, uint64(len(content)))...)
		outer := blake2b.Sum256(append(msg, inner[:]...))
		want := base64.RawURLEncoding.EncodeToString(outer[:])
		if got := BlobID(content); got != want {
			t.Errorf("BlobID(%d bytes) = %s, want %s", len(content), got, want)
		}
	}
}
