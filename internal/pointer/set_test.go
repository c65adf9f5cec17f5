package pointer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/ens"
)

// Set writes where the record lives and, off L1, confirms through L1: a
// record on the L2 is set (forced over what it holds), shown by L1 once
// the gateway serves it, unchanged when it holds the value already,
// refused on a conflict, and reported as not visible while the gateway
// lags past the timeout.
func TestSet(t *testing.T) {
	w := newWorld()
	const name = "scout.l2.hermes.eth"
	w.onL2[name] = true
	w.set(name, "old")
	l2 := newChain(w, true)
	req := SetRequest{Name: name, Value: "new", Force: true, Chain: l2, AtTarget: onTarget{w}, L1: viaL1{w},
		Visibility: time.Minute, ConfirmPoll: time.Millisecond}

	res, err := Set(t.Context(), req)
	if err != nil || !res.Visible || res.Unchanged || res.Previous != "old" || res.Tx.ChainID != 1338 || res.Fee == nil {
		t.Fatalf("forced write on the L2: %+v %v", res, err)
	}
	if w.get(name) != "new" || w.l1[name] != "" {
		t.Fatalf("the L2 holds %q, L1's own resolver %q", w.get(name), w.l1[name])
	}

	res, err = Set(t.Context(), req)
	if err != nil || !res.Unchanged || !res.Visible || res.Tx.Hash != "" {
		t.Fatalf("the same value again: %+v %v", res, err)
	}

	req.Force, req.Expected, req.Value = false, "stale", "newer"
	if _, err := Set(t.Context(), req); err == nil || !strings.Contains(err.Error(), `holds "new"`) {
		t.Fatalf("a conflict: %v", err)
	}

	// The gateway lags: written on the L2, L1 shows the older value.
	w.lagging(true)
	req.Expected, req.Visibility = "new", 30*time.Millisecond
	res, err = Set(t.Context(), req)
	if !errors.Is(err, ErrNotVisible) || res.Visible || res.Tx.Hash == "" || res.Reads < 1 || !strings.Contains(err.Error(), `L1 shows "new"`) {
		t.Fatalf("a lagging gateway: %+v %v", res, err)
	}
	if w.get(name) != "newer" {
		t.Fatalf("the L2 holds %q", w.get(name))
	}

	// On L1 the write is the end of it.
	w.set("auditor.hermes.eth", "a")
	res, err = Set(t.Context(), SetRequest{Name: "auditor.hermes.eth", Value: "b", Expected: "a", Chain: newChain(w, false)})
	if err != nil || !res.Visible || w.l1["auditor.hermes.eth"] != "b" {
		t.Fatalf("on L1: %+v %v", res, err)
	}
}

// A signer the records contract refuses is an error that names why.
func TestSetNotAuthorized(t *testing.T) {
	w := newWorld()
	c := newChain(w, true)
	c.setHook(func(u ens.Update) (ens.UpdateResult, bool) {
		return ens.UpdateResult{Outcome: ens.NotAuthorized, Err: errors.New("not authorised")}, true
	})
	if _, err := Set(t.Context(), SetRequest{Name: "x.hermes.eth", Value: "v", Chain: c, L1: viaL1{w}}); err == nil || !strings.Contains(err.Error(), "not authorised") {
		t.Fatalf("got %v", err)
	}
}
