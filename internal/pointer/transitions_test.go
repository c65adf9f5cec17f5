package pointer

import (
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/state"
)

// The transitions of docs/design.md §7.3, one by one, driven directly
// against a head with small fakes and a fake clock.

// published makes a's first snapshot and publishes it; it returns its value.
func (r *rig) published(a *agent) string {
	r.t.Helper()
	v := a.snapshot(r.t)
	if res := r.publishOnce(a); res.Outcome != Published {
		r.t.Fatalf("first publish: %s %v", res.Outcome, res.Err)
	}
	return v
}

// A verified snapshot: the state directory's head, and pending for an
// agent with a name.
func TestVerified(t *testing.T) {
	t.Run("no name: the state directory only", func(t *testing.T) {
		r := newRig(t)
		a := r.head("alpha", "", false, 0)
		v := a.snapshot(t)
		st := a.st.get()
		if st.Last == nil || st.Last.BlobID != v || st.Pending != nil {
			t.Fatalf("state: %+v", st)
		}
	})
	t.Run("none → pending, over what was published", func(t *testing.T) {
		r := newRig(t)
		a := r.head("alpha", "alpha.eth", false, 0)
		first := r.published(a)
		woken := 0
		a.h.OnPending(func() { woken++ })
		v := a.snapshot(t)
		st := a.st.get()
		if st.Last.BlobID != v || st.Pending == nil || st.Pending.Value != v || st.Pending.Expected != first ||
			!st.Pending.Since.Equal(st.Last.CreatedAt) || st.Pending.Target != "" || woken != 1 {
			t.Fatalf("pending %+v (woken %d)", st.Pending, woken)
		}
	})
	t.Run("pending → pending: the newest wins, the oldest change's age stays", func(t *testing.T) {
		r := newRig(t)
		a := r.head("alpha", "alpha.eth", false, 0)
		a.snapshot(t)
		a.st.Update(func(st *state.AgentState) bool {
			st.Pending.TxHash, st.Pending.LastErr = "0xdead", "reverted"
			return true
		})
		since := a.st.get().Pending.Since
		v := a.snapshot(t)
		p := a.st.get().Pending
		if p.Value != v || !p.Since.Equal(since) || p.TxHash != "" || p.LastErr != "" {
			t.Fatalf("pending %+v", p)
		}
	})
	t.Run("written → pending over the written value", func(t *testing.T) {
		r := newRig(t)
		a := r.head("scout", "scout.l2.eth", true, 0)
		r.published(a)
		r.w.lagging(true)
		written := a.snapshot(t)
		if res := r.publishOnce(a); res.Outcome != Lagging {
			t.Fatalf("write: %s", res.Outcome)
		}
		v := a.snapshot(t)
		p := a.st.get().Pending
		if p.Value != v || p.Expected != written || p.Written != nil {
			t.Fatalf("pending %+v", p)
		}
	})
}

// One write and how it is judged.
func TestWrite(t *testing.T) {
	foreign := "someone-else"
	for _, tc := range []struct {
		name  string
		onL2  bool
		setup func(r *rig, a *agent, first string)
		hook  func(u ens.Update) (ens.UpdateResult, bool)
		want  Outcome
		check func(t *testing.T, r *rig, a *agent, first, second string, res Result)
	}{
		{name: "pending → published (L1)", want: Published, check: func(t *testing.T, r *rig, a *agent, first, second string, res Result) {
			st := a.st.get()
			if st.Pending != nil || st.Published != second || !st.PublishedAt.Equal(r.clk.now()) || r.w.get("alpha.eth") != second {
				t.Fatalf("state %+v", st)
			}
			if res.Write.Tx.Hash == "" || res.Write.Tx.Gas != 30_002 || res.Write.Tx.Batch != 1 || !a.h.CheckedAt().Equal(r.clk.now()) {
				t.Fatalf("write %+v", res.Write)
			}
		}},
		{name: "the record holds the value already: published, nothing sent",
			setup: func(r *rig, a *agent, first string) { r.w.set("alpha.eth", a.st.get().Pending.Value) },
			want:  Published, check: func(t *testing.T, r *rig, a *agent, first, second string, res Result) {
				if _, txs := r.l1.counts(); txs != 1 || res.Write.Tx.Hash != "" || a.st.get().Pending != nil {
					t.Fatalf("%d transactions, write %+v", txs, res.Write)
				}
			}},
		{name: "an older snapshot of ours → rollback: pending again over it",
			setup: func(r *rig, a *agent, first string) {
				r.w.set("alpha.eth", "alpha-old")
				a.lin.ids = append(a.lin.ids, "alpha-old")
			},
			want: Rollback, check: func(t *testing.T, r *rig, a *agent, first, second string, res Result) {
				st := a.st.get()
				if st.Published != "alpha-old" || st.Pending == nil || st.Pending.Value != second || st.Pending.Expected != "alpha-old" || st.Hold != nil {
					t.Fatalf("state %+v %+v", st, st.Pending)
				}
			}},
		{name: "a record that is gone → rollback, not another writer",
			setup: func(r *rig, a *agent, first string) { r.w.set("alpha.eth", "") },
			want:  Rollback, check: func(t *testing.T, r *rig, a *agent, first, second string, res Result) {
				if p := a.st.get().Pending; p == nil || p.Expected != "" || p.Value != second {
					t.Fatalf("pending %+v", p)
				}
			}},
		{name: "our own value, written before a lost save → published",
			setup: func(r *rig, a *agent, first string) {
				r.w.set("alpha.eth", a.st.get().Pending.Value)
				a.st.Update(func(st *state.AgentState) bool { st.Pending.Expected = "stale"; return true })
			},
			hook: func(u ens.Update) (ens.UpdateResult, bool) {
				return ens.UpdateResult{Outcome: ens.Conflict, Actual: u.Value, Err: errors.New("conflict")}, true
			},
			want: Published},
		{name: "a foreign value → held",
			setup: func(r *rig, a *agent, first string) { r.w.set("alpha.eth", foreign) },
			want:  Held, check: func(t *testing.T, r *rig, a *agent, first, second string, res Result) {
				h := a.h.Hold()
				if h == nil || h.Value != foreign || !strings.Contains(h.Reason, "not a snapshot of this agent") {
					t.Fatalf("hold %+v", h)
				}
				if _, ok := a.h.Pending(); ok {
					t.Fatal("a held head has a pointer to publish")
				}
			}},
		{name: "the signer may not write, the name still ours → held",
			hook: func(ens.Update) (ens.UpdateResult, bool) {
				return ens.UpdateResult{Outcome: ens.NotAuthorized, Err: errors.New("not authorised")}, true
			},
			want: Unauthorized, check: func(t *testing.T, r *rig, a *agent, first, second string, res Result) {
				if h := a.h.Hold(); h == nil || h.Value != first || a.h.Transferred() != nil {
					t.Fatalf("hold %+v", h)
				}
			}},
		{name: "the signer may not write, the name moved → transferred (final)",
			setup: func(r *rig, a *agent, first string) { r.w.owners["alpha.eth"] = common.HexToAddress("0xb2") },
			hook: func(ens.Update) (ens.UpdateResult, bool) {
				return ens.UpdateResult{Outcome: ens.NotAuthorized, Err: errors.New("not authorised")}, true
			},
			want: Transferred, check: func(t *testing.T, r *rig, a *agent, first, second string, res Result) {
				st := a.st.get()
				if st.Transferred == nil || st.Pending != nil || st.Hold != nil || !strings.Contains(st.Transferred.Reason, "is owned by") {
					t.Fatalf("state %+v", st)
				}
				if out, err := a.h.Check(t.Context()); out != Transferred || err != nil {
					t.Fatalf("check after the transfer: %s %v", out, err)
				}
			}},
		{name: "not mined in time → pending, the transaction named",
			hook: func(ens.Update) (ens.UpdateResult, bool) {
				return ens.UpdateResult{Outcome: ens.Retry, TxHash: common.HexToHash("0xabc"), Err: errors.New("not mined within tx_timeout")}, true
			},
			want: Failed, check: func(t *testing.T, r *rig, a *agent, first, second string, res Result) {
				p := a.st.get().Pending
				if p == nil || p.Attempts != 1 || p.LastErr != "not mined within tx_timeout" || p.TxHash != common.HexToHash("0xabc").Hex() {
					t.Fatalf("pending %+v", p)
				}
				if _, n := r.fees.gas("alpha"); n != 1 {
					t.Fatalf("%d fees paid; a transaction not mined costs nothing yet", n-1)
				}
			}},
		{name: "reverted → pending, its gas paid",
			hook: func(ens.Update) (ens.UpdateResult, bool) {
				return ens.UpdateResult{Outcome: ens.Failed, TxHash: common.HexToHash("0xdef"), BatchSize: 1, TxGasUsed: 25_000,
					EffectiveGasPrice: txPrice, Err: errors.New("reverted")}, true
			},
			want: Failed, check: func(t *testing.T, r *rig, a *agent, first, second string, res Result) {
				if gas, n := r.fees.gas("alpha"); n != 2 || gas != 30_002+25_000 {
					t.Fatalf("fees: %d gas in %d", gas, n)
				}
			}},
		{name: "pending → written → visible → published (L2)", onL2: true, want: Published,
			check: func(t *testing.T, r *rig, a *agent, first, second string, res Result) {
				st := a.st.get()
				if st.Pending != nil || st.Published != second || res.Write.Tx.ChainID != 1338 || res.Write.Tx.Hash == "" {
					t.Fatalf("state %+v, write %+v", st, res.Write)
				}
				if calls, txs := r.l1.counts(); calls != 0 || txs != 0 {
					t.Fatalf("%d calls on L1 for a record on the L2", calls)
				}
			}},
		{name: "pending → written, not visible (L2)", onL2: true,
			setup: func(r *rig, a *agent, first string) { r.w.lagging(true) },
			want:  Lagging, check: func(t *testing.T, r *rig, a *agent, first, second string, res Result) {
				p := a.st.get().Pending
				w := p.Written
				if w == nil || w.Value != second || w.Target != "l2" || w.ChainID != 1338 || w.TxHash != res.Write.Tx.Hash ||
					w.Block == 0 || !w.At.Equal(r.clk.now()) || w.Seen != first || res.Seen != first || w.Reads != 1 {
					t.Fatalf("written %+v", w)
				}
				if pp, _ := a.h.Pending(); !pp.AwaitingVisibility() {
					t.Fatal("not awaiting visibility")
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			name := "alpha.eth"
			if tc.onL2 {
				name = "alpha.l2.eth"
			}
			a := r.head("alpha", name, tc.onL2, 0)
			first := r.published(a)
			second := a.snapshot(t)
			if tc.setup != nil {
				tc.setup(r, a, first)
			}
			chain := r.l1
			if tc.onL2 {
				chain = r.l2
			}
			chain.setHook(tc.hook)
			r.clk.add(time.Minute)
			res := r.publishOnce(a)
			if res.Outcome != tc.want {
				t.Fatalf("outcome %s (%v), want %s", res.Outcome, res.Err, tc.want)
			}
			if tc.check != nil {
				tc.check(t, r, a, first, second, res)
			}
		})
	}
}

// written → (confirmed by reads only) lagging → not visible past the
// timeout → published when L1 shows it: one transaction in all.
func TestConfirm(t *testing.T) {
	r := newRig(t)
	a := r.head("scout", "scout.l2.eth", true, 0)
	r.published(a)
	r.w.lagging(true)
	second := a.snapshot(t)
	if res := r.publishOnce(a); res.Outcome != Lagging || res.Err != nil {
		t.Fatalf("write: %s %v", res.Outcome, res.Err)
	}
	calls, txs := r.l2.counts()

	r.clk.add(10 * time.Minute)
	if res := a.h.Confirm(t.Context()); res.Outcome != Lagging || res.Err != nil || res.Wrote {
		t.Fatalf("within the timeout: %s %v", res.Outcome, res.Err)
	}
	r.w.mu.Lock()
	r.w.readErr = errors.New("gateway unreachable")
	r.w.mu.Unlock()
	r.clk.add(time.Hour)
	res := a.h.Confirm(t.Context())
	if res.Outcome != NotVisible || res.Err == nil || !strings.Contains(res.Err.Error(), "not visible from L1 after 1h0m0s") ||
		!strings.Contains(res.Err.Error(), "could not be read: gateway unreachable") {
		t.Fatalf("past the timeout: %s %v", res.Outcome, res.Err)
	}
	st := a.st.get()
	if st.Hold != nil || st.Pending == nil || st.Pending.Attempts != 1 || st.Pending.LastErr != res.Err.Error() || st.Pending.Written.Reads != 3 {
		t.Fatalf("past the timeout: %+v", st.Pending)
	}
	if note := a.h.Note(st); !strings.Contains(note, "past visibility_timeout 1h0m0s") || !strings.Contains(note, "could not be read") {
		t.Errorf("note %q", note)
	}
	r.w.mu.Lock()
	r.w.readErr = nil
	r.w.mu.Unlock()
	r.w.lagging(false)
	if res := a.h.Confirm(t.Context()); res.Outcome != Published || res.Err != nil {
		t.Fatalf("caught up: %s %v", res.Outcome, res.Err)
	}
	if st := a.st.get(); st.Pending != nil || st.Published != second || a.h.Note(st) != "" {
		t.Fatalf("caught up: %+v", st)
	}
	if c, x := r.l2.counts(); c != calls || x != txs {
		t.Fatalf("the confirmations wrote: %d calls, %d transactions (before %d, %d)", c, x, calls, txs)
	}
}

// The read-back of a published pointer.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		onL2  bool
		setup func(r *rig, a *agent, first string)
		want  Outcome
		check func(t *testing.T, r *rig, a *agent, first string)
	}{
		{name: "published, the same: ok", want: OK},
		{name: "an older snapshot of ours → rollback: the newest pending again",
			setup: func(r *rig, a *agent, first string) {
				r.w.set("alpha.eth", "alpha-old")
				a.lin.ids = append(a.lin.ids, "alpha-old")
			},
			want: Rollback, check: func(t *testing.T, r *rig, a *agent, first string) {
				p := a.st.get().Pending
				if p == nil || p.Value != first || p.Expected != "alpha-old" {
					t.Fatalf("pending %+v", p)
				}
			}},
		{name: "our head by its id, with a digest the state does not carry → rollback",
			// A record written before heads carried their digest names
			// ours by its id alone (headref.Same); so does one that
			// carries a digest where the state has none.
			setup: func(r *rig, a *agent, first string) {
				r.w.set("alpha.eth", headref.Bind(first, headref.Digest{1}).String())
			},
			want: Rollback},
		{name: "no record while we published one → rollback",
			setup: func(r *rig, a *agent, first string) { r.w.set("alpha.eth", "") },
			want:  Rollback},
		{name: "a foreign value → held",
			setup: func(r *rig, a *agent, first string) { r.w.set("alpha.eth", "foreign") },
			want:  Held, check: func(t *testing.T, r *rig, a *agent, first string) {
				if h := a.h.Hold(); h == nil || h.Value != "foreign" {
					t.Fatalf("hold %+v", h)
				}
			}},
		{name: "a foreign value, the name moved → transferred",
			setup: func(r *rig, a *agent, first string) {
				r.w.set("alpha.eth", "foreign")
				r.w.owners["alpha.eth"] = common.HexToAddress("0xb2")
			},
			want: Transferred},
		{name: "held, the name moved → transferred",
			setup: func(r *rig, a *agent, first string) {
				r.w.set("alpha.eth", "foreign")
				if out, _ := a.h.Check(r.t.Context()); out != Held {
					r.t.Fatal("not held")
				}
				r.w.owners["alpha.eth"] = common.HexToAddress("0xb2")
			},
			want: Transferred},
		{name: "the read fails", setup: func(r *rig, a *agent, first string) { r.w.readErr = errDown }, want: Failed},
		{name: "L1 shows an older value, the L2 holds what we published: the gateway lags", onL2: true,
			setup: func(r *rig, a *agent, first string) {
				r.w.mu.Lock()
				r.w.lag, r.w.shown = true, map[string]string{}
				r.w.mu.Unlock()
			},
			want: Lagging, check: func(t *testing.T, r *rig, a *agent, first string) {
				if _, ok := a.h.Pending(); ok {
					t.Fatal("a lagging gateway made the published snapshot pending again")
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			name := "alpha.eth"
			if tc.onL2 {
				name = "alpha.l2.eth"
			}
			a := r.head("alpha", name, tc.onL2, 0)
			first := r.published(a)
			if tc.setup != nil {
				tc.setup(r, a, first)
			}
			before := a.h.CheckedAt()
			r.clk.add(time.Minute)
			out, err := a.h.Check(t.Context())
			if out != tc.want {
				t.Fatalf("check %s (%v), want %s", out, err, tc.want)
			}
			if out != Failed && out != Transferred && !a.h.CheckedAt().After(before) {
				t.Error("a read-back did not count as one")
			}
			if tc.check != nil {
				tc.check(t, r, a, first)
			}
		})
	}
}

// A first start on a state that knows nothing: Reconcile learns the
// record (and wakes the publisher when a pointer is pending).
func TestReconcile(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, 0)
	r.w.set("alpha.eth", "alpha-old")
	a.lin.add("alpha-old")
	v := a.snapshot(t)
	woken := 0
	a.h.OnPending(func() { woken++ })
	if err := a.h.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := a.st.get()
	if st.Published != "alpha-old" || st.Pending == nil || st.Pending.Value != v || st.Pending.Expected != "alpha-old" || woken == 0 {
		t.Fatalf("after reconcile: %+v %+v, woken %d", st, st.Pending, woken)
	}
}

// held → pending: an operator publishes ours over the other writer's.
func TestOverride(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, 0)
	if err := a.h.Override(t.Context()); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("override without a hold: %v", err)
	}
	first := r.published(a)
	r.w.set("alpha.eth", "foreign")
	if out, _ := a.h.Check(t.Context()); out != Held {
		t.Fatalf("check: %s", out)
	}
	if err := a.h.Override(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := a.st.get()
	if st.Hold != nil || st.Published != "foreign" || st.Pending == nil || st.Pending.Value != first || st.Pending.Expected != "foreign" {
		t.Fatalf("after override: %+v %+v", st, st.Pending)
	}
	if res := r.publishOnce(a); res.Outcome != Published || r.w.get("alpha.eth") != first {
		t.Fatalf("publish: %s %v", res.Outcome, res.Err)
	}
}

// The state directory's head after a restore, and after a lost save.
func TestRestoredAndCatchUp(t *testing.T) {
	t.Run("restored from the record: published, nothing pending or held", func(t *testing.T) {
		r := newRig(t)
		a := r.head("alpha", "alpha.eth", false, 0)
		a.st.Update(func(st *state.AgentState) bool {
			st.Pending, st.Hold = &state.Pointer{Value: "x"}, &state.Hold{Value: "y"}
			return true
		})
		if err := a.h.Restored(state.Snapshot{BlobID: "r1"}, "r1"); err != nil {
			t.Fatal(err)
		}
		if st := a.st.get(); st.Last.BlobID != "r1" || st.Published != "r1" || st.Pending != nil || st.Hold != nil {
			t.Fatalf("state %+v", st)
		}
	})
	t.Run("restored from the state: the last snapshot only", func(t *testing.T) {
		r := newRig(t)
		a := r.head("alpha", "", false, 0)
		a.h.Restored(state.Snapshot{BlobID: "r1"}, "")
		if st := a.st.get(); st.Last.BlobID != "r1" || st.Published != "" {
			t.Fatalf("state %+v", st)
		}
	})
	t.Run("a lost save: caught up and pending", func(t *testing.T) {
		r := newRig(t)
		a := r.head("alpha", "alpha.eth", false, 0)
		first := r.published(a)
		a.lin.add("alpha-lost") // the lock records it; the state never heard
		caught, err := a.h.CatchUp()
		if err != nil || !caught {
			t.Fatalf("catch up: %v %v", caught, err)
		}
		st := a.st.get()
		if st.Last.BlobID != "alpha-lost" || st.Pending == nil || st.Pending.Value != "alpha-lost" || st.Pending.Expected != first {
			t.Fatalf("state %+v %+v", st, st.Pending)
		}
		if caught, _ := a.h.CatchUp(); caught {
			t.Error("caught up twice")
		}
	})
	t.Run("a lock of another lineage is not caught up", func(t *testing.T) {
		r := newRig(t)
		a := r.head("alpha", "alpha.eth", false, 0)
		r.published(a)
		a.lin.ids = []string{"elsewhere"}
		if caught, _ := a.h.CatchUp(); caught {
			t.Error("caught up with a lineage that does not know the last snapshot")
		}
	})
}

// transferred is final: nothing pending, nothing held, nothing written.
func TestTransferred(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, 0)
	r.published(a)
	a.snapshot(t)
	if err := a.h.MarkTransferred("head", "handed over"); err != nil {
		t.Fatal(err)
	}
	saves := a.st.saves
	a.h.MarkTransferred("other", "again")
	if tr := a.h.Transferred(); tr == nil || tr.Head != "head" || a.st.saves != saves {
		t.Fatalf("transferred %+v", tr)
	}
	if _, ok := a.h.Pending(); ok {
		t.Fatal("a transferred head has a pointer to publish")
	}
	if _, ok := a.h.PublishOnce(t.Context(), r.chains); ok {
		t.Fatal("a transferred head published")
	}
}

// A record that moved (ens.records changed) takes its pending pointer
// along: written where it lives now, the old write forgotten.
func TestBindMovedRecord(t *testing.T) {
	r := newRig(t)
	st := &memStore{st: state.AgentState{Pending: &state.Pointer{Value: "v", Target: "l2", Written: &state.Written{Value: "v", Target: "l2"}}}}
	h := NewHead(Config{Agent: "alpha", Name: "alpha.eth"}, Deps{Now: r.clk.now})
	if err := h.Bind(st, &lineageOf{}, nil); err != nil {
		t.Fatal(err)
	}
	if p := st.get().Pending; p.Target != "" || p.Written != nil || st.saves != 1 {
		t.Fatalf("pending %+v", p)
	}
}

// A multicall's gas is split equally among its updates, the remainder one
// unit each to the first: the shares add up to the receipt's gas used.
func TestSplit(t *testing.T) {
	price := big7()
	r := ens.UpdateResult{TxHash: common.Hash{1}, BatchSize: 3, TxGasUsed: 269_033, EffectiveGasPrice: price, ChainID: 8453}
	var gas uint64
	var share float64
	for k, want := range []uint64{89_678, 89_678, 89_677} {
		f := split(r, k)
		if f == nil || f.Gas != want || f.ChainID != 8453 || f.GasPrice != price {
			t.Fatalf("update %d: %+v, want %d gas", k, f, want)
		}
		gas += f.Gas
		share += f.Share
	}
	if gas != r.TxGasUsed || share < 0.999999 || share > 1.000001 {
		t.Errorf("shares add up to %d gas, %v of the transaction", gas, share)
	}
	if split(ens.UpdateResult{BatchSize: 1}, 0) != nil {
		t.Error("a share of a transaction that was not mined")
	}
}

func big7() *big.Int { return big.NewInt(7) }
