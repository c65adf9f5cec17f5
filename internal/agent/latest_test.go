package agent

import (
	"errors"
	"testing"

	"github.com/hermesd/hermesd/internal/state"
)

// TestLatest: the record decides when there is one, unless a pending
// snapshot was built on it (its successor); without one the snapshot
// waiting for its pointer, then the last verified one; an unreadable local
// state does not hide the record.
func TestLatest(t *testing.T) {
	const name = "alpha.hermes.eth"
	last := &state.Snapshot{BlobID: "lastBlob"}
	pending := &state.Pointer{Value: "pendingBlob"}
	successor := &state.Pointer{Value: "pendingBlob", Expected: ref("chainBlob")}
	boom := errors.New("boom")
	for _, tc := range []struct {
		desc         string
		name, record string // record "" = none
		readErr      error
		st           *state.AgentState
		stErr        error
		blob, source string
		err          error
		readsState   bool
	}{
		{"record", name, ref("chainBlob"), nil, &state.AgentState{Last: last, Pending: pending}, nil, ref("chainBlob"), SourceENS, nil, true},
		{"record; pending built on it", name, ref("chainBlob"), nil, &state.AgentState{Last: last, Pending: successor}, nil, "pendingBlob", SourcePending, nil, true},
		{"record moved past pending's parent", name, ref("otherBlob"), nil, &state.AgentState{Last: last, Pending: successor}, nil, ref("otherBlob"), SourceENS, nil, true},
		// Written on an L2 (pendingBlob's parent), not visible from L1 yet:
		// the record still names what was published before.
		{"record lags behind an L2 write", name, ref("publishedBlob"), nil, &state.AgentState{Last: last, Published: ref("publishedBlob"),
			Pending: &state.Pointer{Value: "pendingBlob", Expected: "writtenBlob"}}, nil, "pendingBlob", SourcePending, nil, true},
		{"record; no state needed", name, ref("chainBlob"), nil, nil, boom, ref("chainBlob"), SourceENS, nil, true},
		{"no record, pending", name, "", nil, &state.AgentState{Last: last, Pending: pending}, nil, "pendingBlob", SourcePending, nil, true},
		{"no record, last", name, "", nil, &state.AgentState{Last: last}, nil, "lastBlob", SourceLocal, nil, true},
		{"no record, nothing", name, "", nil, &state.AgentState{}, nil, "", "", nil, true},
		{"chain down", name, ref("chainBlob"), boom, &state.AgentState{Last: last}, nil, "", "", boom, false},
		{"no name, pending", "", "", nil, &state.AgentState{Last: last, Pending: pending}, nil, "pendingBlob", SourcePending, nil, true},
		{"no name, last", "", "", nil, &state.AgentState{Last: last}, nil, "lastBlob", SourceLocal, nil, true},
		{"unreadable state", name, "", nil, nil, boom, "", "", boom, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := newFakeChain()
			c.readErr = tc.readErr
			if tc.record != "" {
				c.set(name, tc.record)
			}
			read := false
			blob, source, err := Latest(t.Context(), c, tc.name, func() (*state.AgentState, error) {
				read = true
				return tc.st, tc.stErr
			})
			if blob != tc.blob || source != tc.source || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Errorf("Latest = %q, %q, %v; want %q, %q, %v", blob, source, err, tc.blob, tc.source, tc.err)
			}
			if read != tc.readsState {
				t.Errorf("local state read: %v, want %v", read, tc.readsState)
			}
		})
	}
}
