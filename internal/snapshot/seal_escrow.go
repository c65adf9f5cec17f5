package snapshot

import (
	"context"
	"fmt"
)

// AgentKeySize is the size of an escrowed agent key.
const AgentKeySize = 32

// EscrowKey seals a 32-byte agent key to the configured key servers and
// policy, for agent a: the same identity its Seal snapshots use, with
// "hermesd/escrow:" ‖ identity as associated data. Whoever the policy lets
// in — the operator's Sui account, nothing stored on its disk — recovers
// the key with RecoverKey. It needs no key server: only their public keys.
func (s *Sealing) EscrowKey(a SealAgent, key *[AgentKeySize]byte) ([]byte, error) {
	return s.sealFor(a, sealEscrowAAD, key[:])
}

// RecoverKey opens an escrow EscrowKey wrote for agent a, with only the
// requester's Sui key and the key servers: it fetches keys from threshold
// servers, verifies each and the shares' consistency, and requires the
// escrow's associated data and size exactly.
func (s *Sealing) RecoverKey(ctx context.Context, a SealAgent, escrow []byte) (key [AgentKeySize]byte, err error) {
	if len(escrow) > sealHeaderAllowance {
		return key, fmt.Errorf("%w: a key escrow of %d bytes (at most %d)", ErrTooLarge, len(escrow), sealHeaderAllowance)
	}
	pt, err := s.openFor(ctx, a, sealEscrowAAD, escrow)
	if err != nil {
		return key, fmt.Errorf("recover agent key: %w", err)
	}
	defer clear(pt)
	if len(pt) != AgentKeySize {
		return key, fmt.Errorf("recover agent key: %w: the escrow holds %d bytes, not a %d-byte key", ErrSealIdentity, len(pt), AgentKeySize)
	}
	copy(key[:], pt)
	return key, nil
}
