package agent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walrus"
)

// ErrInvalidPointer means an ENS record names no snapshot hermesd can
// read: its text is neither a blob id nor a QuiltV1 patch id. The record
// is refused (a restore fails, exit 3), never followed, and never taken
// for "no record", which would start the agent fresh.
var ErrInvalidPointer = errors.New("the ENS record is not a blob id or a quilt patch id")

// quiltV1PatchID is the length of a QuiltV1 patch id in bytes: the
// quilt's blob id, the version (1) and two u16 column numbers
// (docs/format-v3.md §13).
const quiltV1PatchID = 32 + 1 + 2 + 2

// ValidatePointer checks that v, an ENS record's text, is a snapshot
// reference: a Walrus blob id, or a patch id of a QuiltV1 quilt, in
// canonical URL-safe base64. Anything else (too long, truncated, another
// quilt version, another encoding of the same bytes) wraps
// ErrInvalidPointer before any aggregator is asked.
func ValidatePointer(v string) error {
	if !walrus.IsPatchID(v) {
		if err := walrus.ValidateBlobID(v); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidPointer, err)
		}
		return nil
	}
	if err := walrus.ValidatePatchID(v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPointer, err)
	}
	b, _ := base64.RawURLEncoding.Strict().DecodeString(v)
	switch {
	case len(b) != quiltV1PatchID:
		return fmt.Errorf("%w: a patch id of %d bytes (QuiltV1's are %d)", ErrInvalidPointer, len(b), quiltV1PatchID)
	case b[32] != 1:
		return fmt.Errorf("%w: a patch id of quilt version %d (hermesd reads QuiltV1)", ErrInvalidPointer, b[32])
	}
	return nil
}

// Where Latest found an agent's newest snapshot.
const (
	SourceENS     = "ens"
	SourcePending = "local state (unpublished)"
	SourceLocal   = "local state"
)

// Latest decides which snapshot is an agent's newest: the one its ENS
// record names; when the name has no record (or the agent has none), the
// verified snapshot still waiting for its pointer (state Pending), else
// the last one in the local state; "" when there is none. It is the one
// answer for every reader of "the agent's snapshot": the agent's own
// restore, `hermesd restore`, log, diff and verify.
//
// The record wins over a pending snapshot, with one exception: a pending
// snapshot built on the very value the record holds (Pending.Expected ==
// the record, or the record is the value last published) is that record's
// successor, verified and only waiting for its pointer (pointer_interval,
// a chain outage, a gateway that does not show a value written on an L2
// yet); restoring the record instead would lose the changes in between. A record someone else moved
// is for the publisher's rollback and hold rules to settle, not for a
// restore to override. A record is enough even where the state directory
// is missing or unreadable: local's error then leaves the record's
// answer standing. p is nil for an agent without a chain client.
//
// Callers that check a publication (the drill's ENS stage, transfer
// export's read-back, the publisher's checks) read the record itself:
// they ask what the chain says, not which snapshot is newest.
func Latest(ctx context.Context, p Pointer, name string, local func() (*state.AgentState, error)) (blob, source string, err error) {
	if name != "" && p != nil {
		v, ok, err := p.Read(ctx, name)
		switch {
		case err != nil:
			return "", "", fmt.Errorf("read ENS pointer of %s: %w", name, err)
		case ok:
			if st, err := local(); err == nil && st != nil && st.Pending != nil && st.Pending.Value != v &&
				(st.Pending.Expected == v || st.Published == v) {
				return st.Pending.Value, SourcePending, nil
			}
			if err := ValidatePointer(v); err != nil {
				return "", "", fmt.Errorf("ENS pointer of %s: %w", name, err)
			}
			return v, SourceENS, nil
		}
		// No record: a fresh agent, unless the local state knows a
		// snapshot (published nowhere yet).
	}
	st, err := local()
	if err != nil {
		return "", "", err
	}
	switch {
	case st.Pending != nil:
		return st.Pending.Value, SourcePending, nil
	case st.Last != nil:
		return st.Last.BlobID, SourceLocal, nil
	}
	return "", "", nil
}
