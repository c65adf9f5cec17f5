package snapshot

import (
	"crypto/ecdsa"
	"fmt"
	"log/slog"
	"time"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/receipts"
)

// Format is how a snapshot is written.
type Format string

const (
	// FormatV2 is the streaming envelope (Tink AES-GCM-HKDF, 1 MiB
	// segments) around a deterministic tar; the default.
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
	// when a blob does not decrypt so the error can say whose it is.
	Identity string
	Others   []string
	BrainDir string
	SpoolDir string

	Key    cipher.Key
	Format Format
	// Seal seals snapshots of FormatSeal and opens Seal blobs on restore;
	// nil without a seal configuration.
	Seal      *Sealing
	V1MaxSize int64 // the v1 cap, when writing and when reading
	// MaxBlobSize is the store's body limit: a bigger snapshot fails with
	// ErrTooLarge before any upload. 0 = no limit here.
	MaxBlobSize int64
	Store       BlobStore
	Epochs      int

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
	default:
		return fmt.Errorf("snapshot: unknown format %q", p.Format)
	}
	if p.Store == nil || p.BrainDir == "" || p.SpoolDir == "" || p.Identity == "" {
		return fmt.Errorf("snapshot: pipeline of %s is not fully configured", p.AgentID)
	}
	return nil
}
