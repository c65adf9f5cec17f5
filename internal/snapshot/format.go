package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/repo"
)

// formatPrefixLen is how many leading bytes of a blob tell its format.
const formatPrefixLen = 8

// DetectFormat names the format of a snapshot blob from its first bytes:
// `01 00 00 00` is v1 (docs/design.md §5), "HRMS" 0x02 is v2, "HRMS" 0x03 a
// v3 pack (docs/format-v3.md §6) and a first byte 0 a Seal
// EncryptedObject (its BCS version; seal.go checks the rest). Anything
// else matches cipher.ErrUnknownFormat.
func DetectFormat(prefix []byte) (Format, error) {
	switch {
	case len(prefix) >= 1 && prefix[0] == 0:
		return FormatSeal, nil
	case len(prefix) >= 4 && bytes.Equal(prefix[:4], []byte{1, 0, 0, 0}):
		return FormatV1, nil
	case len(prefix) >= 5 && string(prefix[:4]) == repo.Magic && prefix[4] == 0x02:
		return FormatV2, nil
	case len(prefix) >= 5 && string(prefix[:4]) == repo.Magic && prefix[4] == repo.Version:
		return FormatV3, nil
	case len(prefix) >= 5 && string(prefix[:4]) == repo.Magic:
		return "", fmt.Errorf("%w: hermesd blob version %d is not known to this hermesd", cipher.ErrUnsupportedVersion, prefix[4])
	}
	return "", fmt.Errorf("%w: the blob does not start like a hermesd snapshot", cipher.ErrUnknownFormat)
}

// BlobFormat reads the first bytes of blobID (one closed range read) and
// says which format it is. blobID may be a head reference: its id is
// read (its digest is checked only by what reads the head).
func (p *Pipeline) BlobFormat(ctx context.Context, blobID string) (Format, error) {
	blobID = headref.ID(blobID)
	var b bytes.Buffer
	total, err := p.Store.ReadRange(ctx, blobID, 0, formatPrefixLen, &b)
	if err != nil && total > 0 && total < formatPrefixLen {
		// Shorter than any snapshot: the range cannot be served.
		return "", fmt.Errorf("%w: blob %s is %d bytes long", cipher.ErrUnknownFormat, blobID, total)
	}
	if err != nil {
		return "", fmt.Errorf("read blob %s: %w", blobID, err)
	}
	if b.Len() != formatPrefixLen {
		return "", fmt.Errorf("read blob %s: %d bytes of its first %d", blobID, b.Len(), formatPrefixLen)
	}
	return DetectFormat(b.Bytes())
}

// ErrNotV3 means an operation that needs format v3 (diffs, partial
// restores, checks of every object) was asked of a v1 or v2 snapshot.
var ErrNotV3 = errors.New("not a v3 snapshot")
