package localwalrus

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"testing"

	"golang.org/x/crypto/blake2b"
)

// TestBlobIDDerivation pins the simulated blob id to the package doc's
// formula, computed here in one piece rather than streamed.
func TestBlobIDDerivation(t *testing.T) {
	for _, content := range [][]byte{nil, []byte("walrus"), make([]byte, 3<<20)} {
		inner := sha256.Sum256(content)
		msg := append([]byte("localwalrus/blob-id/v2\x00\x01"), binary.LittleEndian.AppendUint64(nil, uint64(len(content)))...)
		outer := blake2b.Sum256(append(msg, inner[:]...))
		want := base64.RawURLEncoding.EncodeToString(outer[:])
		if got := BlobID(content); got != want {
			t.Errorf("BlobID(%d bytes) = %s, want %s", len(content), got, want)
		}
	}
}
