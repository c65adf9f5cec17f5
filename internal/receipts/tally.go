package receipts

import (
	"context"
	"fmt"
	"io"

	"github.com/ethereum/go-ethereum/common"
)

// Tally counts what VerifyLines found:
// Lines = Blank + Receipts + Malformed, Receipts = Trusted + Unknown +
// (Failed - Malformed).
type Tally struct {
	Lines     int `json:"lines"`
	Blank     int `json:"blank"`
	Receipts  int `json:"receipts"` // lines that parse as receipts
	Trusted   int `json:"trusted"`
	Unknown   int `json:"unknownSigner"` // valid signature, signer not trusted
	Failed    int `json:"failed"`        // everything else, Malformed included
	Malformed int `json:"malformed"`     // lines that are not receipts
}

// VerifyLines reads ndjson the way Import does and verifies every line
// against trusted, without a log and without side effects. each, if not
// nil, receives the result of every non-blank line in order (Action ""),
// so results stream and memory stays bounded whatever the input.
func VerifyLines(ctx context.Context, r io.Reader, trusted []common.Address, each func(LineResult)) (Tally, error) {
	var t Tally
	c := newChunker(r)
	for {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		lines, err := c.next()
		if err != nil {
			return t, fmt.Errorf("receipts: verify: %w", err)
		}
		if len(lines) == 0 {
			return t, nil
		}
		for i := range lines {
			lines[i].check = !lines[i].blank && lines[i].perr == nil
		}
		verifyChunk(lines, trusted)
		for i := range lines {
			ln := &lines[i]
			t.Lines++
			if ln.blank {
				t.Blank++
				continue
			}
			res := LineResult{Line: ln.no}
			if ln.perr != nil {
				res.Status, res.Reason = StatusMalformed, clip(ln.perr.Error())
				t.Malformed++
				t.Failed++
			} else {
				t.Receipts++
				res.CallID, res.Status, res.Reason = clip(ln.rec.CallID), ln.res.Status, clip(ln.res.Reason)
				if ln.res.Signer != (common.Address{}) {
					res.Signer = ln.res.Signer.Hex()
				}
				switch ln.res.Status {
				case StatusTrusted:
					t.Trusted++
				case StatusUnknownSigner:
					t.Unknown++
				default:
					t.Failed++
				}
			}
			if each != nil {
				each(res)
			}
		}
	}
}
