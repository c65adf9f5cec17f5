package compose

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

// identities are every configured agent's identity, in order.
func identities(c *config.Config) []string {
	out := make([]string, len(c.Agents))
	for i := range c.Agents {
		out[i] = c.Agents[i].Identity()
	}
	return out
}

// Pipeline builds the snapshot pipeline of agent ac: the one way hermesd
// takes and restores that agent's snapshots. rl is the agent's receipt
// log, folded into every snapshot; restore-only uses pass nil.
func (s *Services) Pipeline(ac *config.Agent, spoolDir string, rl *receipts.Log) *snapshot.Pipeline {
	c := s.Config
	all := s.identities
	if all == nil {
		all = identities(c)
	}
	// Each agent's v3 repository has its own key: handing it to the
	// agent's new owner reveals nothing of the other agents'. Which one
	// is the snapshot package's decision; services without keys
	// (Options.NoKey) have neither a master nor an own key, so none.
	keys := s.AgentKeys[ac.ID]
	return &snapshot.Pipeline{
		AgentID:       ac.ID,
		TokenID:       ac.TokenID,
		Identity:      ac.Identity(),
		Others:        all, // the agent's own is skipped where used
		BrainDir:      ac.BrainDir,
		SpoolDir:      spoolDir,
		Key:           s.Key,
		AgentKey:      snapshot.AgentKeyFor(s.Key, keys.Own, ac.Identity()),
		ReadKeys:      keys.Read,
		Format:        snapshot.Format(c.Encryption.Format),
		Seal:          s.Seal,
		Escrow:        c.Seal.Escrow,
		V1MaxSize:     int64(c.Encryption.V1MaxSize),
		MaxBlobSize:   int64(c.Walrus.MaxBlobSize),
		Store:         s.blobStore(),
		Quilts:        s.quilter(nil),
		Epochs:        c.EpochsOf(ac),
		EpochDuration: c.Walrus.EpochDuration.D(),
		Repack: snapshot.RepackPolicy{
			Margin:   uint64(c.Repository.ExpiryMargin),
			MaxPacks: c.Repository.MaxPacks,
			MinLive:  c.Repository.MinLive,
		},
		Receipts: rl,
		Signer:   s.ReceiptSigner,
		Log:      s.Log.With("agent", ac.ID),
	}
}

// blobStore is the store every pipeline shares (services built in tests
// without Build get one of their own).
func (s *Services) blobStore() *walrusStore {
	if s.store == nil {
		s.store = newStore(s.Walrus)
	}
	return s.store
}

// quilter is the pipelines' Quilter, charging each pack's share of its
// quilt to acct (when set); nil without quilts.
func (s *Services) quilter(acct *account) snapshot.Quilter {
	if s.Quilts == nil {
		return nil
	}
	return quilter{b: s.Quilts, acct: acct}
}

// OpenAgent opens agent id exactly as the daemon does, on a state
// directory the caller has locked. obs may be nil. The caller closes the
// agent (which closes its receipt log).
func (s *Services) OpenAgent(sd *state.Dir, id string, obs agent.Observer) (*agent.Agent, error) {
	c := s.Config
	ac, err := c.Agent(id)
	if err != nil {
		return nil, err
	}
	policy, err := receipts.ParsePolicy(c.Receipts.ImportPolicy)
	if err != nil {
		return nil, err
	}
	log := s.Log.With("agent", ac.ID)
	// The log is a rebuildable cache: damaged records are moved to its
	// quarantine file (and logged) rather than keeping the brain
	// unprotected.
	rl, err := receipts.OpenLog(receipts.LogPath(sd.Path(), ac.ID), receipts.Options{Logger: log, Repair: true,
		Quarantine: receipts.QuarantineLimits{MaxBytes: int64(c.Receipts.QuarantineMaxBytes), MaxCount: c.Receipts.QuarantineMaxCount}})
	if err != nil {
		return nil, fmt.Errorf("agent %s: open receipt log: %w", ac.ID, err)
	}
	dir, err := sd.AgentDir(ac.ID)
	if err != nil {
		rl.Close()
		return nil, fmt.Errorf("agent %s: %w", ac.ID, err)
	}
	pipe := s.Pipeline(ac, sd.SpoolDir(), rl)
	pipe.CacheDir = dir // the v3 dedup index and epoch clock
	// What the agent spends goes to the state directory's cost ledger:
	// every store answer of its pipeline (its share of a quilt's for a
	// pack stored as a patch: the quilt's other packs' agents pay the
	// rest), its snapshots, and (through its head) its share of every
	// pointer transaction.
	acct := accounts{l: s.Ledger(sd), c: c, log: log}
	own := &account{accounts: acct, id: ac.ID}
	pipe.Store = s.blobStore().charging(own)
	pipe.Quilts = s.quilter(own)
	deps := agent.Deps{
		State:    sd,
		Pipeline: pipe,
		Receipts: rl,
		Observer: obs,
		Accounts: acct,
		Log:      s.Log,
	}
	if f := s.Fleet; f != nil {
		deps.WriteGate = func() error { return f.Check(WriteState) }
	}
	if ac.ENSName != "" {
		if s.Chain == nil {
			rl.Close()
			return nil, fmt.Errorf("agent %s has an ENS name but no chain client is configured", ac.ID)
		}
		deps.Pointer = Pointer(s.Chain)
		if o := s.owners(ac); o != nil {
			deps.Owners = o
		}
	}
	deps.Head = s.head(ac, acct)
	var hand *agent.Handover
	if h := s.AgentKeys[ac.ID].Handover; h != nil {
		hand = &agent.Handover{Head: h.Head, BundleHash: h.BundleHash, KeyID: h.KeyID()}
	}
	acfg := agent.Config{
		ID:              ac.ID,
		BrainDir:        ac.BrainDir,
		SeedDir:         ac.SeedDir,
		ENSName:         ac.ENSName,
		Quiet:           c.QuietPeriod(ac),
		MaxLag:          c.MaxLagOf(ac),
		MinInterval:     c.SnapshotIntervalOf(ac),
		UnsavedLimit:    c.SnapshotIntervalOf(ac) + c.MaxLagOf(ac) + c.Walrus.BatchWindow.D() + agent.UnsavedMargin,
		RefreshAfter:    c.RefreshAfterOf(ac),
		ImportPolicy:    policy,
		Trusted:         s.Trusted,
		ReceiptRoute:    ReceiptRoute(c, ac.ID, nil),
		AllowSymlinks:   c.AllowSymlinks,
		AllowUnsafeDirs: c.AllowUnsafeDirs,
		Self:            s.Self,
		Handover:        hand,
		KeyID:           keyID(pipe),
	}
	if r := c.RecordsOf(ac); r != nil {
		acfg.Records = r.ID
	}
	a, err := agent.New(acfg, deps)
	if err != nil {
		rl.Close()
		return nil, fmt.Errorf("agent %s: %w", ac.ID, err)
	}
	return a, nil
}

// ReceiptRoute is agent id's receipts.Route under c: its token id, and
// for every other token the configured agent holding it. logOf, when not
// nil, returns that agent's receipt log, open in this process, for the
// receipts to be handed to; without one (or when it returns nil) they are
// quarantined with a reason naming the holder. (A restore names it only:
// it imports the snapshot's own receipts.ndjson into its own agent.)
func ReceiptRoute(c *config.Config, id string, logOf func(agentID string) *receipts.Log) *receipts.Route {
	holders := map[string]string{}
	own := ""
	for i := range c.Agents {
		a := &c.Agents[i]
		if a.TokenID == nil {
			continue
		}
		t := strconv.FormatUint(*a.TokenID, 10)
		if a.ID == id {
			own = t
		} else {
			holders[t] = a.ID
		}
	}
	return &receipts.Route{Agent: id, Token: own, Forward: func(token string) (*receipts.Log, string) {
		h := holders[token]
		if h == "" || logOf == nil {
			return nil, h
		}
		return logOf(h), h
	}}
}

// ErrNoSnapshot means an agent has no snapshot to read: no ENS record and
// none in the local state.
var ErrNoSnapshot = errors.New("no snapshot")

// Latest is the agent's newest snapshot as agent.Latest decides it, for a
// command that runs beside the daemon: the local state is read without
// taking the state directory's lock (its saves are atomic renames).
// source says where the blob id came from.
func (s *Services) Latest(ctx context.Context, ac *config.Agent) (blob, source string, err error) {
	var p agent.Pointer
	if ac.ENSName != "" && s.Chain != nil {
		p = Pointer(s.Chain)
	}
	dir := state.AgentPath(s.Config.StateDir, ac.ID)
	blob, source, err = agent.Latest(ctx, p, ac.ENSName, func() (*state.AgentState, error) { return state.LoadAgent(dir) })
	switch {
	case err != nil:
		return "", "", err
	case blob != "":
		return blob, source, nil
	case p != nil:
		return "", "", fmt.Errorf("%w: %s has no agent-snapshot record, and the local state of agent %s in %s holds none", ErrNoSnapshot, ac.ENSName, ac.ID, s.Config.StateDir)
	}
	return "", "", fmt.Errorf("%w: agent %s has no ENS name and no snapshot in %s", ErrNoSnapshot, ac.ID, s.Config.StateDir)
}

// PrepareOnce runs one agent's start-up path once — restore if the brain
// is missing or empty, fill from the seed, hash, reconcile with the chain —
// and stops (`hermesd restore`, init containers).
func (s *Services) PrepareOnce(ctx context.Context, id string, opts agent.PrepareOptions) (agent.Status, error) {
	sd, err := OpenState(s.Config)
	if err != nil {
		return agent.Status{}, err
	}
	defer sd.Close()
	a, err := s.OpenAgent(sd, id, nil)
	if err != nil {
		return agent.Status{}, err
	}
	err = a.PrepareWith(ctx, opts)
	st := a.Status()
	if cerr := a.Close(); err == nil {
		err = cerr
	}
	return st, err
}

// OpenState opens and locks the configuration's state directory.
func OpenState(c *config.Config) (*state.Dir, error) {
	return state.Open(c.StateDir, StateOptions(c))
}

// StateOptions are the state directory's checks as the configuration
// relaxes them.
func StateOptions(c *config.Config) state.Options {
	return state.Options{AllowSymlinks: c.AllowSymlinks, AllowUnsafeDirs: c.AllowUnsafeDirs}
}

// keyID is the id of the key the agent's v3 snapshots are written under;
// "" for other formats.
func keyID(p *snapshot.Pipeline) string {
	if p.Format != snapshot.FormatV3 {
		return ""
	}
	return p.KeyID()
}
