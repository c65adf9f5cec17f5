package pointer

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SetRequest is an operator's compare-and-set of a record where it lives
// (`hermesd pointer set`), outside any agent's head: the name may be no
// configured agent's.
type SetRequest struct {
	Name  string // normalized
	Value string
	// Expected is what the record must hold now ("" = no record); with
	// Force, what AtTarget reads is taken instead.
	Expected string
	Force    bool
	// Chain writes where the record lives; AtTarget reads it there.
	Chain    Chain
	AtTarget Reader
	// L1 reads through L1 resolution, for a record off L1 (nil: the
	// record is on L1 and the write is the end of it). Visibility bounds
	// how long the value may take to show there; ConfirmPoll is the first
	// interval between reads (doubling, at most 5 s).
	L1          Reader
	Visibility  time.Duration
	ConfirmPoll time.Duration
}

// SetResult is what a Set did.
type SetResult struct {
	Previous  string // what the record held before
	Unchanged bool   // it held Value already: nothing was sent
	Tx        Tx
	Fee       *Fee
	// Visible: L1 resolution shows Value (always for a record on L1);
	// Reads counts the confirmation reads, Waited how long they took.
	Visible bool
	Reads   int
	Waited  time.Duration
}

// ErrNotVisible: the value was written where the record lives, but L1
// resolution did not show it within the visibility timeout (the gateway
// lags); it is on chain and shows once the gateway serves it.
var ErrNotVisible = errors.New("written, not yet visible through L1 resolution")

// Set writes req.Value into req.Name's record where it lives by
// compare-and-set and, for a record off L1, confirms it by reading through
// L1 resolution as a fresh machine does, as the daemon does. A conflict,
// a signer that may not write the name, or a failed write is an error
// (Written.Err, which wraps the chain's); a value written but not visible
// in time is ErrNotVisible with the result filled in.
func Set(ctx context.Context, req SetRequest) (SetResult, error) {
	var res SetResult
	expected := req.Expected
	if req.Force {
		cur, _, err := req.AtTarget.Read(ctx, req.Name)
		if err != nil {
			return res, fmt.Errorf("read the record where it lives: %w", err)
		}
		expected = cur
	}
	res.Previous = expected
	w := Write(ctx, req.Chain, []Update{{Name: req.Name, Value: req.Value, Expected: expected}})[0]
	res.Tx, res.Fee = w.Tx, w.Fee
	switch w.Kind {
	case Wrote:
		res.Unchanged = w.Tx.Hash == ""
	case Conflict:
		return res, fmt.Errorf("the record holds %q, not the expected %q; nothing sent: %w", w.Actual, expected, w.Err)
	default:
		if w.Tx.Hash != "" {
			return res, fmt.Errorf("%w (transaction %s)", w.Err, w.Tx.Hash)
		}
		return res, w.Err
	}
	if req.L1 == nil {
		res.Visible = true
		return res, nil
	}
	start := time.Now()
	deadline := start.Add(req.Visibility)
	poll := max(req.ConfirmPoll, 10*time.Millisecond)
	var seen string
	var seenErr error
	for n := 0; ; n++ {
		v, _, err := req.L1.Read(ctx, req.Name)
		res.Reads++
		res.Waited = time.Since(start)
		if err == nil && v == req.Value {
			res.Visible = true
			return res, nil
		}
		seen, seenErr = v, err
		wait := min(poll<<min(n, 10), 5*time.Second)
		if !time.Now().Add(wait).Before(deadline) {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, fmt.Errorf("%w: waiting for it: %w", ErrNotVisible, ctx.Err())
		case <-t.C:
		}
	}
	if seenErr != nil {
		return res, fmt.Errorf("%w after %s (%d reads; the last failed: %w)", ErrNotVisible, res.Waited.Round(time.Millisecond), res.Reads, seenErr)
	}
	return res, fmt.Errorf("%w after %s (%d reads; L1 shows %q)", ErrNotVisible, res.Waited.Round(time.Millisecond), res.Reads, seen)
}
