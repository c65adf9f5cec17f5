package sealserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/hermesd/hermesd/internal/seal"
)

// AccountBased is Seal's patterns::account_based policy, natively: every
// requested ID must be the BCS of the requester's address (its 32 bytes),
// so each Sui account has exactly one identity, which only it can open.
// It is what hermesd seals snapshots to by default.
func AccountBased() Policy {
	return PolicyFunc(func(_ context.Context, r *Request) error {
		for _, id := range r.IDs {
			if !bytes.Equal(id, r.User[:]) {
				return fmt.Errorf("the identity is not the requester's address %s", r.User)
			}
		}
		return nil
	})
}

// LocalObjectID is the object ID a local key server goes by when it has no
// KeyServer object on chain: SHA-256 of a fixed tag and its public key, so
// the same master key always has the same ID and different keys never
// share one.
func LocalObjectID(pk seal.PublicKey) seal.Address {
	b := pk.Bytes()
	h := sha256.New()
	h.Write([]byte("hermesd local seal key server\x00"))
	h.Write(b[:])
	var a seal.Address
	copy(a[:], h.Sum(nil))
	return a
}
