package walrus

import (
	"encoding/base64"
	"fmt"
)

// BlobIDLen is the length of a blob id's text form: 32 bytes in URL-safe
// base64 without padding.
const BlobIDLen = 43

var blobIDEncoding = base64.RawURLEncoding.Strict()

// ValidateBlobID checks that id is a Walrus blob id: 43 characters of
// URL-safe base64 (no padding) encoding 32 bytes. Ids are case-sensitive and
// must be passed on exactly as given.
func ValidateBlobID(id string) error {
	if len(id) != BlobIDLen {
		return fmt.Errorf("%w: %q has %d characters, want %d", ErrInvalidBlobID, sanitize(id, 64), len(id), BlobIDLen)
	}
	b, err := blobIDEncoding.DecodeString(id)
	if err != nil || len(b) != 32 {
		return fmt.Errorf("%w: %q is not URL-safe base64 of 32 bytes", ErrInvalidBlobID, sanitize(id, 64))
	}
	return nil
}
