package pointer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/ens"
)

// l1Registry is the L1 side of a move (Registry): the name's resolver in
// the registry and what each resolver serves for it.
type l1Registry struct {
	mu       sync.Mutex
	resolver common.Address
	serves   map[common.Address]func() string
	owner    bool
	sets     int
}

func (f *l1Registry) resolution(r common.Address) ens.Resolution {
	v := ""
	if s := f.serves[r]; s != nil {
		v = s()
	}
	return ens.Resolution{Name: "alpha.eth", Value: v, Resolver: r, ResolverOf: "alpha.eth", Via: ens.PathExtended}
}

func (f *l1Registry) Resolve(context.Context, string) (ens.Resolution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resolution(f.resolver), nil
}

func (f *l1Registry) ResolveAt(_ context.Context, _ string, r common.Address) (ens.Resolution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resolution(r), nil
}

func (f *l1Registry) PlanResolver(_ context.Context, name string, to common.Address) (ens.ResolverPlan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := ens.ResolverPlan{Name: name, From: f.resolver, To: to, Unchanged: f.resolver == to}
	if !f.owner {
		return p, &ens.NotAuthorizedError{Name: name, Owner: common.Address{1}, Signer: self, Action: "change its resolver"}
	}
	if !p.Unchanged {
		p.Gas = 31_562
	}
	return p, nil
}

func (f *l1Registry) SetResolver(ctx context.Context, name string, to common.Address) (ens.TxResult, error) {
	p, err := f.PlanResolver(ctx, name, to)
	if err != nil || p.Unchanged {
		return ens.TxResult{Unchanged: p.Unchanged}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets++
	f.resolver = to
	return ens.TxResult{TxHash: common.Hash{9}, GasUsed: 31_209}, nil
}

// A move to the L2 (docs/design.md §7.4): refused for a signer that does
// not own the name, with nothing written anywhere; a dry run writes
// nothing; stopped when the new resolver does not serve the head (the
// head written on the L2, the resolver unchanged); finished by a re-run;
// a no-op once done.
func TestMove(t *testing.T) {
	r := newRig(t)
	onL1, offchain := common.Address{0xa1}, common.Address{0xb2}
	served := true
	var mu sync.Mutex
	reg := &l1Registry{resolver: onL1, serves: map[common.Address]func() string{
		onL1: func() string { return r.w.get("alpha.eth") },
		offchain: func() string {
			mu.Lock()
			defer mu.Unlock()
			if !served {
				return ""
			}
			v, _, _ := onTarget{r.w}.Read(context.Background(), "alpha.eth")
			return v
		},
	}}
	r.w.set("alpha.eth", "head-1")
	req := MoveRequest{Name: "alpha.eth", To: "l2", Resolver: offchain, L1: reg, Dest: r.l2, AtDest: onTarget{r.w},
		Visibility: 50 * time.Millisecond, ConfirmPoll: 10 * time.Millisecond}
	atL2 := func() string { v, _, _ := onTarget{r.w}.Read(t.Context(), "alpha.eth"); return v }

	_, err := Move(t.Context(), req)
	var na *ens.NotAuthorizedError
	if !errors.As(err, &na) || atL2() != "" || reg.sets != 0 {
		t.Fatalf("not the owner: %v; the L2 holds %q, %d resolver changes", err, atL2(), reg.sets)
	}
	reg.owner = true
	dry := req
	dry.DryRun = true
	if res, err := Move(t.Context(), dry); err != nil || res.Plan.Gas == 0 || res.Value != "head-1" || atL2() != "" || reg.sets != 0 {
		t.Fatalf("dry run: %+v %v", res, err)
	}

	mu.Lock()
	served = false
	mu.Unlock()
	res, err := Move(t.Context(), req)
	if !errors.Is(err, ErrNotServed) || atL2() != "head-1" || reg.sets != 0 || res.DestWrite.Tx.Hash == "" {
		t.Fatalf("the new resolver does not serve it: %v; the L2 holds %q, %d resolver changes, %+v", err, atL2(), reg.sets, res.DestWrite)
	}
	mu.Lock()
	served = true
	mu.Unlock()
	res, err = Move(t.Context(), req)
	if err != nil || !res.Visible || res.Done || !res.DestWrite.Unchanged || reg.sets != 1 || res.Resolver.GasUsed == 0 || res.From != onL1 {
		t.Fatalf("the re-run: %+v %v", res, err)
	}
	if res, err := Move(t.Context(), req); err != nil || !res.Done || !res.Visible || reg.sets != 1 {
		t.Fatalf("once more: %+v %v", res, err)
	}

	r.w.set("alpha.eth", "")
	reg.resolver = onL1
	if _, err := Move(t.Context(), req); !errors.Is(err, ErrNoHead) {
		t.Fatalf("no head: %v", err)
	}
}
