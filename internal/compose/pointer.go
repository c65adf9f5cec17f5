package compose

import (
	"context"
	"errors"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/ens"
)

// Pointer adapts the ENS client to what agents read and write.
func Pointer(c *ens.Client) interface {
	agent.Pointer
	agent.PointerWriter
} {
	return chainPointer{c}
}

type chainPointer struct{ c *ens.Client }

func (p chainPointer) Read(ctx context.Context, name string) (string, bool, error) {
	v, err := p.c.Read(ctx, name)
	if errors.Is(err, ens.ErrNoPointer) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return v, true, nil
}

// WritePointers writes the updates in one multicall when they can share
// it, and reports per-name results.
func (p chainPointer) WritePointers(ctx context.Context, ups []agent.PointerUpdate) []agent.WriteResult {
	out := make([]agent.WriteResult, len(ups))
	idx := make(map[string]int, len(ups))
	pending := make([]ens.Update, 0, len(ups))
	for i, u := range ups {
		idx[u.Name] = i
		pending = append(pending, ens.Update{Name: u.Name, Value: u.Value, Expected: u.Expected})
	}
	for len(pending) > 0 {
		res, err := p.c.WriteMany(ctx, pending)
		if errors.Is(err, ens.ErrMixedResolvers) && len(pending) > 1 {
			// Names on different resolvers cannot share a transaction.
			for _, u := range pending {
				r, err := p.c.WriteMany(ctx, []ens.Update{u})
				out[idx[u.Name]] = writeResult(r, err, u.Name, 1)
			}
			return out
		}
		if err == nil {
			for _, u := range pending {
				out[idx[u.Name]] = writeResult(res, nil, u.Name, len(pending))
			}
			return out
		}
		// Names with a definite problem (a conflict, no authority) leave
		// the batch; the others are written at once without them.
		bad := perName(err)
		if len(bad) == 0 || len(bad) == len(pending) {
			for _, u := range pending {
				e := err
				if b, ok := bad[u.Name]; ok {
					e = b
				}
				out[idx[u.Name]] = writeResult(ens.TxResult{}, e, u.Name, 1)
			}
			return out
		}
		var rest []ens.Update
		for _, u := range pending {
			if b, ok := bad[u.Name]; ok {
				out[idx[u.Name]] = writeResult(ens.TxResult{}, b, u.Name, 1)
			} else {
				rest = append(rest, u)
			}
		}
		pending = rest
	}
	return out
}

func writeResult(r ens.TxResult, err error, name string, batch int) agent.WriteResult {
	var ce *ens.ConflictError
	switch {
	case err == nil:
		w := agent.WriteResult{Kind: agent.Written, Unchanged: r.Unchanged}
		if !r.Unchanged {
			w.TxHash = r.TxHash.Hex()
			w.GasUsed = r.GasUsed / uint64(max(batch, 1))
		}
		return w
	case errors.As(err, &ce):
		return agent.WriteResult{Kind: agent.Conflicted, Actual: ce.Actual, Err: err}
	case errors.Is(err, ens.ErrNotAuthorized):
		return agent.WriteResult{Kind: agent.Unauthorized, Err: err}
	}
	return agent.WriteResult{Kind: agent.Failed, Err: err}
}

// perName splits a joined error from WriteMany into the per-name problems
// that a retry cannot fix.
func perName(err error) map[string]error {
	out := map[string]error{}
	var visit func(error)
	visit = func(e error) {
		var ce *ens.ConflictError
		var na *ens.NotAuthorizedError
		switch {
		case errors.As(e, &ce) && ce == e:
			out[ce.Name] = e
			return
		case errors.As(e, &na) && na == e:
			out[na.Name] = e
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				visit(c)
			}
		}
	}
	visit(err)
	return out
}
