package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

var (
	seller = common.HexToAddress("0x00000000000000000000000000000000000000a1")
	buyer  = common.HexToAddress("0x00000000000000000000000000000000000000b2")
)

// The seller's side: once the name has moved, a refused write or a foreign
// record is "transferred" — final, no snapshots, no retries, kept across a
// restart — while a refused write with the name still ours stays a hold.
func TestSellerTransferred(t *testing.T) {
	unauthorized := func(ens.Update) (ens.UpdateResult, bool) {
		return ens.UpdateResult{Outcome: ens.NotAuthorized, Err: errors.New("not authorised")}, true
	}
	t.Run("a refused write with the name still ours is a hold", func(t *testing.T) {
		r := newRig(t)
		r.self = seller
		r.chain.setOwner(r.name, seller)
		a, _ := publishFirst(t, r)
		r.chain.write = unauthorized
		r.write("system.md", "v2\n")
		a.SyncOnce(t.Context())
		out := publishOnce(t, a, r.chain)
		if len(out) != 1 || out[0].Outcome != pointer.Unauthorized || a.Transferred() != nil || a.Head().Hold() == nil {
			t.Fatalf("publish: %+v, transferred %v", out, a.Transferred())
		}
	})
	t.Run("a refused write after the name moved", func(t *testing.T) {
		r := newRig(t)
		r.self = seller
		r.chain.setOwner(r.name, seller)
		a, _ := publishFirst(t, r)
		r.chain.setOwner(r.name, buyer)
		r.chain.write = unauthorized
		r.write("system.md", "v2\n")
		if res, err := a.SyncOnce(t.Context()); err != nil || res.Outcome != Snapshotted {
			t.Fatalf("sync: %+v %v", res, err)
		}
		out := publishOnce(t, a, r.chain)
		if len(out) != 1 || out[0].Outcome != pointer.Transferred {
			t.Fatalf("publish: %+v", out)
		}
		tr := a.Transferred()
		if tr == nil || !strings.Contains(tr.Reason, buyer.Hex()) {
			t.Fatalf("transferred: %+v", tr)
		}
		s := a.Status()
		if s.Pending != nil || s.Hold != nil || s.Transferred == nil {
			t.Errorf("status after the transfer: %+v", s)
		}
		takes := r.pipe.Takes()
		r.write("system.md", "v3\n")
		if res, err := a.SyncOnce(t.Context()); err != nil || res.Outcome != TransferredOutcome || r.pipe.Takes() != takes {
			t.Errorf("sync after the transfer: %+v %v (takes %d → %d)", res, err, takes, r.pipe.Takes())
		}
		if out := publishOnce(t, a, r.chain); len(out) != 0 {
			t.Errorf("publish after the transfer: %+v", out)
		}
		if o, err := a.Head().Check(t.Context()); o != pointer.Transferred || err != nil {
			t.Errorf("check after the transfer: %s %v", o, err)
		}
		a = r.reopen(a)
		if err := a.Prepare(t.Context()); err != nil || !a.Ready() || a.Transferred() == nil {
			t.Errorf("restart: %v, ready %v, transferred %+v", err, a.Ready(), a.Transferred())
		}
		if res, _ := a.SyncOnce(t.Context()); res.Outcome != TransferredOutcome || r.pipe.Takes() != takes {
			t.Errorf("sync after a restart: %+v", res)
		}
	})
	t.Run("a foreign record after the name moved", func(t *testing.T) {
		r := newRig(t)
		r.self = seller
		r.chain.setOwner(r.name, seller)
		a, _ := publishFirst(t, r)
		r.chain.setOwner(r.name, buyer)
		r.chain.set(r.name, "buyersRekey")
		if o, err := a.Head().Check(t.Context()); o != pointer.Transferred || err != nil {
			t.Fatalf("check: %s %v", o, err)
		}
		if a.Head().Hold() != nil || a.Transferred() == nil {
			t.Errorf("hold %+v, transferred %+v", a.Head().Hold(), a.Transferred())
		}
	})
}

// handoverRig is a buyer whose configuration names a handover of head.
func handoverRig(t *testing.T, head string) *rig {
	r := newRig(t)
	r.self = buyer
	dir := filepath.Join(t.TempDir(), "b")
	res, err := restoreInto(dir, head)
	if err != nil {
		t.Fatal(err)
	}
	// The bundle hash of the restored files (the lock is written after).
	r.handover = &Handover{Head: head, BundleHash: res.BundleHash, KeyID: "0011223344556677"}
	r.chain.setOwner(r.name, buyer)
	r.chain.set(r.name, head)
	return r
}

// The buyer's side: the first restore of a handed-over agent checks the
// registry and the record against the handover, and refuses with a clear
// error that changes nothing; the first snapshot after it is the re-key.
func TestBuyerHandover(t *testing.T) {
	head := ref("sellersHead")
	for _, tc := range []struct {
		name  string
		setup func(r *rig)
		want  string
		is    error
	}{
		{"the name was not transferred", func(r *rig) { r.chain.setOwner(r.name, seller) },
			"not transferred to you: alpha.hermes.eth is owned by " + seller.Hex(), ErrNotTransferred},
		{"the record names another head", func(r *rig) { r.chain.set(r.name, ref("newerHead")) },
			"names " + ref("newerHead") + ", not the handover's head " + head, nil},
		{"no record", func(r *rig) {
			r.chain.mu.Lock()
			delete(r.chain.records, r.name)
			r.chain.mu.Unlock()
		}, "has no agent-snapshot record", snapshot.ErrBlobNotFound},
		{"the head expired", func(r *rig) {
			r.pipe.restore = func(context.Context, string, string) (snapshot.Restored, error) {
				return snapshot.Restored{}, fmt.Errorf("%w: gone", snapshot.ErrBlobNotFound)
			}
		}, "the handover's head is gone from Walrus", snapshot.ErrBlobNotFound},
		{"another bundle hash", func(r *rig) { r.handover.BundleHash = hash.Digest{1} },
			"the handover says 0x01", snapshot.ErrHashMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := handoverRig(t, head)
			tc.setup(r)
			a := r.open()
			err := a.Prepare(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.want) || tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("prepare: %v, want %q", err, tc.want)
			}
			if _, serr := os.Stat(r.brain); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("the refused handover left the brain directory (%v)", serr)
			}
			if st, _ := state.LoadAgent(state.AgentPath(r.state, "alpha")); st.Last != nil || st.Published != "" {
				t.Errorf("the refused handover changed the state: %+v", st)
			}
			if r.pipe.Takes() != 0 {
				t.Error("a snapshot was taken")
			}
		})
	}
	t.Run("accepted: restore, then a re-key", func(t *testing.T) {
		r := handoverRig(t, head)
		a := r.open()
		if err := a.Prepare(t.Context()); err != nil {
			t.Fatal(err)
		}
		res, err := a.SyncOnce(t.Context())
		if err != nil || res.Outcome != Snapshotted {
			t.Fatalf("the first sync after the handover is not the re-key: %+v %v", res, err)
		}
		if res, err := a.SyncOnce(t.Context()); err != nil || res.Outcome != Unchanged {
			t.Errorf("the second sync: %+v %v", res, err)
		}
		out := publishOnce(t, a, r.chain)
		if len(out) != 1 || out[0].Outcome != pointer.Published || out[0].Update.Expected != head {
			t.Fatalf("publish of the re-key: %+v", out)
		}
		// A restart with the handover still configured: no checks again,
		// no second re-key.
		a = r.reopen(a)
		if err := a.Prepare(t.Context()); err != nil {
			t.Fatal(err)
		}
		if res, err := a.SyncOnce(t.Context()); err != nil || res.Outcome != Unchanged {
			t.Errorf("sync after a restart: %+v %v", res, err)
		}
	})
}
