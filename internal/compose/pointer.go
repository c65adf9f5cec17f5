package compose

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/pointer"
)

// Pointer reads agents' records through c's L1 resolution, as a fresh
// machine does (agent.Pointer, pointer.Reader).
func Pointer(c *ens.Client) pointer.Reader { return reader{c} }

// reader adapts an ens.Client's Read: ok is false when the name has no
// record.
type reader struct{ c *ens.Client }

func (r reader) Read(ctx context.Context, name string) (string, bool, error) {
	v, err := r.c.Read(ctx, name)
	if errors.Is(err, ens.ErrNoPointer) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return v, true, nil
}

// Chains are the clients that write records, by target: the L1 client
// for records on L1 ("") and the client of every ens.records entry an
// agent uses (none in a read-only build, whose writes then fail).
func (s *Services) Chains() map[string]pointer.Chain {
	out := map[string]pointer.Chain{}
	if s.Chain != nil {
		out[""] = s.Chain
	}
	for id, rc := range s.Records {
		if rc != nil {
			out[id] = rc
		}
	}
	return out
}

// head builds agent ac's pointer.Head from the configuration: its name,
// where its record lives and the chains that read it, its pacing, and
// the account its transactions are paid to.
func (s *Services) head(ac *config.Agent, acct pointer.Accounts) *pointer.Head {
	c := s.Config
	cfg := pointer.Config{Agent: ac.ID, Name: ac.ENSName, Self: s.Self, Interval: c.PointerIntervalOf(ac)}
	deps := pointer.Deps{Accounts: acct, Log: s.Log}
	if f := s.Fleet; f != nil {
		deps.Fleet = f
		deps.Gate = func() error { return f.Gate(ac.ID, WriteChain) }
	}
	if ac.ENSName != "" && s.Chain != nil {
		deps.Reader = Pointer(s.Chain)
		deps.Router = router{c: s.Chain, cfg: c}
	}
	if o := s.owners(ac); o != nil {
		deps.Owners = o
	}
	if r := c.RecordsOf(ac); r != nil {
		cfg.Target, cfg.VisibilityTimeout, cfg.ConfirmPoll = r.ID, r.VisibilityTimeout.D(), r.PollInterval.D()
		// The name's owner in the L1 registry says nothing about who may
		// write the record where it lives: a transfer is read only from
		// the registry of the record's chain, when ens.records names it
		// (owners). What the record holds there is what a hold is
		// resolved against.
		if rc := s.Records[r.ID]; rc != nil {
			deps.AtTarget = Pointer(rc)
		}
	}
	return pointer.NewHead(cfg, deps)
}

// Publisher builds the publisher of heads (the daemon's): through the
// services' chains, reading every pointer back every chain.check_interval
// and watching the L1 chain's head every chain.head_interval. nil without
// a chain.
func (s *Services) Publisher(heads []*pointer.Head, obs pointer.Observer, log *slog.Logger) *pointer.Publisher {
	if s.Chain == nil {
		return nil
	}
	c := s.Config
	var targets []string
	if s.Fleet != nil {
		// Heads come and go with the agents this node owns.
		for t := range s.Chains() {
			targets = append(targets, t)
		}
		slices.Sort(targets)
	}
	return pointer.NewPublisher(pointer.PublisherConfig{
		Targets:    targets,
		Chains:     s.Chains(),
		Probe:      Pointer(s.Chain),
		Blocks:     s.Chain,
		HeadEvery:  c.Chain.HeadInterval.D(),
		CheckEvery: c.Chain.CheckInterval.D(),
		Observer:   obs,
		Log:        log,
	}, heads)
}

// RecordsSet is the part of an operator's compare-and-set of a record at
// ens.records target r that the configuration decides: rc writes and
// reads it there, l1 confirms it through L1 resolution within r's
// visibility timeout, polling from r's poll interval.
func RecordsSet(r *config.RecordsTarget, rc, l1 *ens.Client) pointer.SetRequest {
	return pointer.SetRequest{Chain: rc, AtTarget: Pointer(rc), L1: Pointer(l1),
		Visibility: r.VisibilityTimeout.D(), ConfirmPoll: r.PollInterval.D()}
}

// RecordsMove is the part of a move of a record to ens.records target r
// that the configuration decides: rc writes and reads it there, L1
// resolution is given r's visibility_timeout to show it.
func RecordsMove(r *config.RecordsTarget, rc *ens.Client) pointer.MoveRequest {
	return pointer.MoveRequest{To: r.ID, Resolver: common.HexToAddress(r.L1Resolver), Dest: rc, AtDest: Pointer(rc),
		Visibility: r.VisibilityTimeout.D(), ConfirmPoll: r.PollInterval.D()}
}

// L1MoveVisibility bounds the reads through L1 of a move to a resolver
// on L1: no gateway stands between, so the first read shows it.
const L1MoveVisibility = 30 * time.Second

// L1Move is RecordsMove for a move back to the L1 resolver at resolver,
// which dest (a records client of L1 for that contract) writes and reads.
func L1Move(c *config.Config, resolver common.Address, dest *ens.Client) pointer.MoveRequest {
	return pointer.MoveRequest{Resolver: resolver, Dest: dest, AtDest: Pointer(dest),
		Visibility: L1MoveVisibility, ConfirmPoll: c.Chain.PollInterval.D()}
}

// router tells which ens.records target L1 resolution reaches a name
// through (docs/design.md §7.4).
type router struct {
	c   *ens.Client
	cfg *config.Config
}

func (r router) Route(ctx context.Context, name, configured string) (string, bool, error) {
	addr, err := r.c.ResolverOf(ctx, name)
	if err != nil {
		return "", false, err
	}
	if addr == (common.Address{}) {
		return "", false, nil // no resolver: the write says what is wrong
	}
	target, known := RouteOf(r.cfg, addr, configured)
	if known || configured == "" {
		return target, known, nil
	}
	// A resolver that is no entry's l1_resolver, for a record configured
	// off L1: a resolver that answers from L1 itself, without an offchain
	// lookup, holds the record on L1 (it was moved back); one that looks
	// offchain may be the entry's under a new deployment (not known).
	res, err := r.c.Resolve(ctx, name)
	if err != nil || res.Offchain() {
		return "", false, nil
	}
	return "", true, nil
}

// RouteOf is the ens.records target whose l1_resolver is resolver, and
// whether the configuration can tell: known when resolver is an entry's
// l1_resolver; for a record configured on L1 (configured ""), a resolver
// that is no entry's is L1's own, unless an entry names no l1_resolver
// (it might be that one's).
func RouteOf(c *config.Config, resolver common.Address, configured string) (string, bool) {
	all := true
	for _, t := range c.ENS.Records {
		if t.L1Resolver == "" {
			all = false
			continue
		}
		if common.HexToAddress(t.L1Resolver) == resolver {
			return t.ID, true
		}
	}
	return "", all && configured == ""
}
