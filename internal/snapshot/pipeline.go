package snapshot

import (
	"crypto/ecdsa"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/repo"
)

// Format is how a snapshot is written.
type Format string

const (
	// FormatV3 is the content-addressed repository (docs/design.md §10,
	// docs/format-v3.md): a snapshot uploads only the objects no live pack
	// holds, in packs under the blob size limit; the default.
	FormatV3 Format = "v3"
	// FormatV2 is the streaming envelope (Tink AES-GCM-HKDF, 1 MiB
	// segments) around a deterministic tar of the whole brain.
	FormatV2 Format = "v2"
	// FormatV1 is the reference runtime's whole-buffer envelope around
	// the same tar, capped at V1MaxSize.
	FormatV1 Format = "v1"
)

// Pipeline takes and restores the snapshots of one agent's brain. It is
// built once per agent (see the compose package) and used by the agent's
// loop, `hermesd restore` and the drill alike.
type Pipeline struct {
	AgentID string
	TokenID *uint64
	// Identity is bound into every v2 blob (the agent's normalized ENS
	// name, or its id); Others are the other configured agents', tried
	// when a blob does not decrypt so the error can say whose it is. The
	// agent's own may be among them (skipped where they are used): a
	// daemon's pipelines share one slice of every agent's, not one each
	// of all but theirs, which grew with the square of the agents.
	Identity string
	Others   []string
	BrainDir string
	SpoolDir string

	// Key is the master key: v1 and v2 envelopes use it, and v3 derives
	// the agent key from it unless AgentKey is set.
	Key cipher.Key
	// AgentKey, when set, is the agent's v3 key (HKDF of the master key
	// and the identity; an agent handed to a new owner comes with it
	// alone).
	AgentKey *repo.AgentKey
	// ReadKeys are earlier owners' agent keys (a transfer's handover):
	// they only read the v3 snapshots whose packs carry their key id, and
	// never write. The first snapshot over such a head is a re-key.
	ReadKeys []repo.AgentKey
	Format   Format // how snapshots are written; every format is read
	// Seal seals snapshots of FormatSeal and opens Seal blobs on restore;
	// nil without a seal configuration.
	Seal *Sealing
	// Escrow puts the agent key, sealed to Seal's key servers and policy,
	// in every v3 head pack (docs/format-v3.md §6.1): RecoverAgentKey then
	// opens the agent with only the Sui identity.
	Escrow    bool
	V1MaxSize int64 // the v1 cap, when writing and when reading
	// MaxBlobSize is the store's body limit: a bigger v1/v2 snapshot fails
	// with ErrTooLarge before any upload; v3 packs are cut to it. 0 = no
	// limit here (v3 packs are then 10 MiB).
	MaxBlobSize int64
	Store       BlobStore
	// Quilts, when set, stores v3 packs of at most Quilts.MaxPatch()
	// bytes as patches of quilts shared with other agents' packs.
	Quilts Quilter
	Epochs int

	// CacheDir keeps the v3 dedup index and epoch clock between runs
	// (the agent's state directory); "" keeps them in memory only.
	CacheDir string
	// EpochDuration is the Walrus network's epoch length: with the epoch
	// an upload reports, it tells when a v3 pack nears its end epoch.
	EpochDuration time.Duration
	// Repack is the v3 expiry and compaction policy.
	Repack RepackPolicy
	// Read tunes v3 range reads (zero: the repo package's defaults).
	Read repo.ReadOptions

	// Receipts is the agent's receipt log; its export is folded into every
	// snapshot. Nil writes no receipts.ndjson.
	Receipts *receipts.Log
	// Signer, when set, signs a transition receipt for every change of
	// the bundle hash of an agent with a token id.
	Signer *ecdsa.PrivateKey

	// Limits bound what a restore accepts; zero fields are derived from
	// the blob (see Limits).
	Limits Limits
	Now    func() time.Time
	Log    *slog.Logger

	v3mu sync.Mutex // one v3 snapshot at a time; guards v3
	v3   *v3state
}

func (p *Pipeline) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Pipeline) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (p *Pipeline) check() error {
	switch p.Format {
	case FormatV1, FormatV2:
	case FormatSeal:
		if err := p.checkSeal(); err != nil {
			return err
		}
	case FormatV3:
		if p.MaxBlobSize > 0 && p.MaxBlobSize < repo.MinPackSize {
			return fmt.Errorf("snapshot: format v3 needs a blob size limit of at least %d bytes, not %d", repo.MinPackSize, p.MaxBlobSize)
		}
	default:
		return fmt.Errorf("snapshot: unknown format %q", p.Format)
	}
	if p.Store == nil || p.BrainDir == "" || p.SpoolDir == "" || p.Identity == "" {
		return fmt.Errorf("snapshot: pipeline of %s is not fully configured", p.AgentID)
	}
	return nil
}

// others are the other agents' identities (Others without the agent's).
func (p *Pipeline) others() []string {
	var out []string
	for _, o := range p.Others {
		if o != p.Identity {
			out = append(out, o)
		}
	}
	return out
}
