package main

import (
	"errors"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walrus"
)

// classify maps errors from hermesd's packages to exit codes. Commands may
// also wrap an error with withCode when they know better. Every refusal of
// untrusted input (a blob, an archive, a lock, a receipt, an aggregator's
// answer) is 3, or 6 when it is the decryption that refused it.
func classify(err error) int {
	switch {
	case errors.Is(err, config.ErrInvalid), errors.Is(err, cipher.ErrInvalidKey),
		errors.Is(err, snapshot.ErrSealNotConfigured), errors.Is(err, snapshot.ErrNoKey):
		return exitUsage
	case errors.Is(err, state.ErrLocked):
		return exitLocked
	// Seal: a key server's key that fails its pairing check, or shares
	// that decrypt but do not lie on one polynomial, failed verification
	// (3); a blob that cannot be opened — damaged, forged, sealed for
	// someone else, or the policy refuses the requester — failed
	// decryption (6). Too few key servers reachable is an outage (1).
	case errors.Is(err, seal.ErrInvalidKey), errors.Is(err, seal.ErrInconsistentShares):
		return exitMismatch
	case errors.Is(err, seal.ErrNoAccess), errors.Is(err, seal.ErrMalformed), errors.Is(err, seal.ErrUnsupported),
		errors.Is(err, seal.ErrNonceMismatch), errors.Is(err, seal.ErrAuth), errors.Is(err, snapshot.ErrSealIdentity):
		return exitAuth
	case errors.Is(err, cipher.ErrAuth), errors.Is(err, snapshot.ErrWrongAgent), errors.Is(err, repo.ErrAuth),
		errors.Is(err, cipher.ErrUnknownFormat), errors.Is(err, cipher.ErrUnsupportedVersion),
		errors.Is(err, cipher.ErrTruncated), errors.Is(err, cipher.ErrTrailingData),
		errors.Is(err, cipher.ErrCorrupted):
		return exitAuth
	case errors.Is(err, snapshot.ErrHashMismatch), errors.Is(err, snapshot.ErrNoLock),
		errors.Is(err, snapshot.ErrHostile), errors.Is(err, bundlelock.ErrMalformed), errors.Is(err, repo.ErrCorrupt),
		errors.Is(err, walrus.ErrMismatch), errors.Is(err, walrus.ErrBodyTooLarge),
		errors.Is(err, receipts.ErrRejected):
		return exitMismatch
	// An offchain lookup whose lookup, gateway answer or resolver verdict
	// is refused (7); an unreachable gateway matches ens.ErrUnavailable
	// and is an outage (1).
	case errors.Is(err, ens.ErrOffchain):
		return exitOffchain
	case errors.Is(err, walrus.ErrNotFound), errors.Is(err, ens.ErrNoPointer), errors.Is(err, ens.ErrNameNotFound),
		errors.Is(err, snapshot.ErrBlobNotFound), errors.Is(err, repo.ErrNotFound):
		return exitNotFound
	}
	return exitFailure
}
