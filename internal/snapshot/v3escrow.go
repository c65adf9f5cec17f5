package snapshot

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/seal"
)

// ErrNoEscrow means a head pack carries no key escrow (seal.escrow was
// off when it was written, or it is not a v3 snapshot).
var ErrNoEscrow = errors.New("the snapshot carries no key escrow")

// Recovered says how RecoverAgentKey found the agent key: never the key.
type Recovered struct {
	BlobID      string
	KeyID       string   // the recovered key's public id, checked against the pack's
	EscrowBytes int      // size of the escrow in the head pack
	Servers     []string // the key servers whose keys opened it: object id (URL host)
	Took        time.Duration
}

// escrowFor seals the agent key for the head packs when p.Escrow is set;
// the caller holds p.v3mu.
func (p *Pipeline) escrowFor(k *repo.Keys, ak repo.AgentKey) error {
	if !p.Escrow {
		return nil
	}
	if p.Seal == nil {
		return fmt.Errorf("snapshot: %w: seal.escrow needs the seal section (key servers, threshold, policy)", ErrSealNotConfigured)
	}
	raw := ak.Bytes()
	defer clear(raw[:])
	e, err := p.Seal.EscrowKey(p.sealAgent(), &raw)
	if err != nil {
		return fmt.Errorf("snapshot: escrow the key of %s: %w", p.AgentID, err)
	}
	return k.SetEscrow(e)
}

// RecoverAgentKey reads the key escrow of the v3 head pack head names (its
// header and escrow only, two range reads), asks threshold key servers for
// the keys as the configured Sui requester, and makes the recovered agent
// key the pipeline's: then a restore needs no key file. The key must have
// the key id the pack names, so an escrow that does not belong to the
// pack is refused before anything is read with it. Only the head's
// header and escrow are read: the restore that follows checks the head
// against its reference's digest.
func (p *Pipeline) RecoverAgentKey(ctx context.Context, head string) (Recovered, error) {
	start := time.Now()
	out := Recovered{BlobID: head}
	blobID := headref.ID(head)
	if p.Seal == nil {
		return out, fmt.Errorf("%w: recovering from a key escrow needs the seal section (key servers, threshold, policy, sui_key)", ErrSealNotConfigured)
	}
	var b bytes.Buffer
	if _, err := p.Store.ReadRange(ctx, blobID, 0, repo.HeaderSize, &b); err != nil {
		return out, &StageError{"download", fmt.Errorf("read blob %s: %w", blobID, err)}
	}
	h, err := repo.DecodeHeader(b.Bytes())
	if err != nil {
		return out, fmt.Errorf("blob %s: %w", blobID, err)
	}
	if !h.Head || h.EscrowLength == 0 {
		return out, fmt.Errorf("blob %s: %w (write snapshots with seal.escrow: true to have one)", blobID, ErrNoEscrow)
	}
	if _, err := p.Store.ReadRange(ctx, blobID, repo.HeaderSize, h.EscrowLength, &b); err != nil {
		return out, &StageError{"download", fmt.Errorf("read the key escrow of blob %s: %w", blobID, err)}
	}
	h, escrow, err := repo.ParseEscrow(b.Bytes())
	if err != nil {
		return out, fmt.Errorf("blob %s: %w", blobID, err)
	}
	out.EscrowBytes = len(escrow)
	raw, err := p.Seal.RecoverKey(ctx, p.sealAgent(), escrow)
	if err != nil {
		return out, fmt.Errorf("blob %s: %w", blobID, err)
	}
	ak := repo.NewAgentKey(raw)
	clear(raw[:])
	if got, want := ak.ID(), hex.EncodeToString(h.KeyID[:]); got != want {
		return out, fmt.Errorf("%w: blob %s: the escrow holds the key of id %s, the pack was written under %s", repo.ErrCorrupt, blobID, got, want)
	}
	if o, err := seal.ParseEncryptedObject(escrow); err == nil {
		for _, s := range p.Seal.Client.Answered(o) {
			out.Servers = append(out.Servers, s.ObjectID.String())
		}
	}
	p.v3mu.Lock()
	p.AgentKey = &ak
	p.v3 = nil // keys derived anew from the recovered key
	p.v3mu.Unlock()
	out.KeyID, out.Took = ak.ID(), time.Since(start)
	return out, nil
}
