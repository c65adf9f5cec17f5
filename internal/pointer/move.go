package pointer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/ens"
)

// Registry is the L1 side of a move: the name's resolution and its
// resolver in the L1 registry (an *ens.Client of L1, with the signer).
type Registry interface {
	Resolve(ctx context.Context, name string) (ens.Resolution, error)
	ResolveAt(ctx context.Context, name string, resolver common.Address) (ens.Resolution, error)
	PlanResolver(ctx context.Context, name string, to common.Address) (ens.ResolverPlan, error)
	SetResolver(ctx context.Context, name string, to common.Address) (ens.TxResult, error)
}

// MoveRequest moves a name's record to another place (docs/design.md
// §7.4): from L1 to an ens.records target or back, or between targets.
type MoveRequest struct {
	Name string // normalized
	// To names the destination for messages ("" = L1's resolver).
	To string
	// Resolver is the L1 resolver that serves the destination's records:
	// the target's OffchainResolver, or the L1 resolver that holds them.
	Resolver common.Address
	L1       Registry
	// Dest writes the record at the destination; AtDest reads it there
	// (for L1, a records client of the L1 resolver itself).
	Dest   Chain
	AtDest Reader
	// Visibility bounds the reads through L1 (before the resolver change
	// through the new resolver, after it through the name) until they
	// show the value; ConfirmPoll is the first interval between them.
	Visibility  time.Duration
	ConfirmPoll time.Duration
	// DryRun checks and estimates, and sends nothing.
	DryRun bool
}

// MoveResult is what a move found and did.
type MoveResult struct {
	Value string // the head: what the name resolved to before the move
	// From is the resolver that answered before (the name's own or an
	// ancestor's, ResolverOf), Via how.
	From       common.Address
	ResolverOf string
	Via        string
	// AtDest is what the destination held before the move.
	AtDest string
	// DestWrite is the write of the head at the destination (Unchanged:
	// it held it already; nothing sent).
	DestWrite SetResult
	// Plan is the resolver change checked and estimated; Resolver its
	// transaction (Unchanged: the name had that resolver already).
	Plan     ens.ResolverPlan
	Resolver ens.TxResult
	// Done: the name had been moved already (a re-run); nothing was sent.
	Done bool
	// Visible: L1 resolution, as a fresh machine does it, shows Value
	// through the new resolver; Reads and Waited are the confirmation's.
	Visible bool
	Reads   int
	Waited  time.Duration
}

// Errors of a move, each a one-line reason; nothing was sent on L1 when
// one of the first three is returned.
var (
	ErrNoHead = errors.New("the name resolves to no agent-snapshot record: there is no head to move")
	// ErrNotServed: the new resolver does not show the head for the name
	// (its gateway does not map the name, or lags past the visibility
	// timeout); the resolver was not changed.
	ErrNotServed = errors.New("the new resolver does not serve the head for this name")
	// ErrMoveNotVisible: the resolver was changed but L1 resolution did
	// not show the head in time; a re-run verifies again.
	ErrMoveNotVisible = errors.New("the resolver was changed, but L1 resolution does not show the head yet")
)

// Move moves req.Name's record to where req.Resolver serves it from, in
// the order that never lets the name resolve to nothing or an older
// value: the head (what L1 resolution shows now) is written at the
// destination first, the new resolver is asked, before anything changes
// on L1, whether it serves the head for the name (through CCIP-read, as
// a fresh machine will), then one L1 transaction changes the name's
// resolver in the registry, and L1 resolution is read until it shows the
// head through the new resolver. Every step is skipped when it is done
// already, so a re-run after a crash finishes the move. Authorisation is
// checked first: the signer must own the name in the L1 registry (or be
// an operator its owner approved).
func Move(ctx context.Context, req MoveRequest) (MoveResult, error) {
	var res MoveResult
	cur, err := req.L1.Resolve(ctx, req.Name)
	if err != nil {
		return res, fmt.Errorf("resolve %s through L1: %w", req.Name, err)
	}
	res.Value, res.From, res.ResolverOf, res.Via = cur.Value, cur.Resolver, cur.ResolverOf, cur.Via.String()
	if cur.Value == "" {
		return res, fmt.Errorf("%s: %w", req.Name, ErrNoHead)
	}
	if cur.Resolver == req.Resolver {
		// L1 resolution reaches the head through the new resolver
		// already: a run that stopped before its verification, or a
		// name under a parent whose resolver it is (ENSIP-10).
		res.Done, res.Visible = true, true
		res.Resolver = ens.TxResult{Unchanged: true, Names: []string{req.Name}}
		return res, nil
	}
	if res.Plan, err = req.L1.PlanResolver(ctx, req.Name, req.Resolver); err != nil {
		return res, err
	}
	if res.Plan.Unchanged {
		// The name's own resolver is the new one, yet another answered:
		// a registry walk cannot do that (a Universal Resolver that
		// disagrees with the registry?).
		return res, fmt.Errorf("%s has resolver %s in the registry, but %s answered its resolution", req.Name, req.Resolver, cur.Resolver)
	}
	at, _, err := req.AtDest.Read(ctx, req.Name)
	if err != nil {
		return res, fmt.Errorf("read the record at %s: %w", destName(req.To), err)
	}
	res.AtDest = at
	if req.DryRun {
		return res, nil
	}
	if at != res.Value {
		w, err := Set(ctx, SetRequest{Name: req.Name, Value: res.Value, Expected: at, Chain: req.Dest, AtTarget: req.AtDest})
		res.DestWrite = w
		if err != nil {
			return res, fmt.Errorf("write the head at %s: %w (nothing changed on L1)", destName(req.To), err)
		}
	} else {
		res.DestWrite = SetResult{Previous: at, Unchanged: true, Visible: true}
	}
	if err := waitFor(ctx, req, res.Value, func(ctx context.Context) (ens.Resolution, error) {
		return req.L1.ResolveAt(ctx, req.Name, req.Resolver)
	}, nil); err != nil {
		return res, fmt.Errorf("%s through %s: %w: %w (nothing changed on L1; the head written at %s is harmless there)", req.Name, req.Resolver, ErrNotServed, err, destName(req.To))
	}
	if res.Resolver, err = req.L1.SetResolver(ctx, req.Name, req.Resolver); err != nil {
		if res.Resolver.TxHash != (common.Hash{}) {
			return res, fmt.Errorf("change the resolver of %s: %w (transaction %s; run the move again to finish it)", req.Name, err, res.Resolver.TxHash)
		}
		return res, fmt.Errorf("change the resolver of %s: %w", req.Name, err)
	}
	start := time.Now()
	reads := 0
	err = waitFor(ctx, req, res.Value, func(ctx context.Context) (ens.Resolution, error) {
		reads++
		return req.L1.Resolve(ctx, req.Name)
	}, func(r ens.Resolution) bool { return r.Resolver == req.Resolver })
	res.Reads, res.Waited = reads, time.Since(start)
	if err != nil {
		return res, fmt.Errorf("%s: %w: %w (run the move again to verify)", req.Name, ErrMoveNotVisible, err)
	}
	res.Visible = true
	return res, nil
}

// waitFor reads until a read shows value (and ok, when given, holds of
// it) or the visibility timeout passes, backing off from the poll
// interval.
func waitFor(ctx context.Context, req MoveRequest, value string, read func(context.Context) (ens.Resolution, error), ok func(ens.Resolution) bool) error {
	deadline := time.Now().Add(req.Visibility)
	poll := max(req.ConfirmPoll, 10*time.Millisecond)
	for n := 0; ; n++ {
		r, err := read(ctx)
		if err == nil && r.Value == value && (ok == nil || ok(r)) {
			return nil
		}
		wait := min(poll<<min(n, 10), 5*time.Second)
		if !time.Now().Add(wait).Before(deadline) {
			if err != nil {
				return fmt.Errorf("after %d reads the last failed: %w", n+1, err)
			}
			return fmt.Errorf("after %d reads it shows %q through %s", n+1, r.Value, r.Resolver)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// destName names a move's destination for messages.
func destName(to string) string {
	if to == "" {
		return "the L1 resolver"
	}
	return "ens.records " + to
}
