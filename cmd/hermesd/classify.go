package main

import (
	"errors"
	"io/fs"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/daemon"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/secretfile"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walrus"
)

// classify maps errors from hermesd's packages to exit codes. Commands may
// also wrap an error with withCode when they know better. Every refusal of
// untrusted input (a blob, an archive, a lock, a receipt, an aggregator's
// answer) is 3, or 6 when it is the decryption that refused it. Every
// problem of the configuration or of the files and directories it names
// is 2: retrying cannot fix it, and the systemd unit's
// RestartPreventExitStatus=2 stops restarting on it.
func classify(err error) int {
	switch {
	// The configuration, and what it names: an invalid file, a key that is
	// not one, a secret file or state, brain or seed directory refused for
	// its mode, owner, type, size, links or place (a system directory),
	// a secret reference without a source, the chain it names not being
	// the configured one or holding no registry.
	case errors.Is(err, config.ErrInvalid), errors.Is(err, cipher.ErrInvalidKey),
		errors.Is(err, snapshot.ErrSealNotConfigured), errors.Is(err, snapshot.ErrNoKey),
		errors.Is(err, seal.ErrInvalidConfig), errors.Is(err, walrus.ErrConfig), errors.Is(err, daemon.ErrConfig),
		errors.Is(err, state.ErrUnsafe), errors.Is(err, fsys.ErrUnsafeDir), errors.Is(err, fsys.ErrSymlink),
		errors.Is(err, fsys.ErrForeignOwner), errors.Is(err, secretfile.ErrMode), errors.Is(err, secretfile.ErrNotRegular),
		errors.Is(err, secretfile.ErrTooLarge), errors.Is(err, config.ErrNoSecret), errors.Is(err, receipts.ErrPolicy),
		errors.Is(err, ens.ErrWrongChain), errors.Is(err, ens.ErrNoRegistry), errors.Is(err, ens.ErrReadOnly),
		errors.Is(err, ens.ErrInvalidName):
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
		errors.Is(err, receipts.ErrRejected), errors.Is(err, agent.ErrInvalidPointer):
		return exitMismatch
	// An offchain lookup whose lookup, gateway answer or resolver verdict
	// is refused (7); an unreachable gateway matches ens.ErrUnavailable
	// and is an outage (1).
	case errors.Is(err, ens.ErrOffchain):
		return exitOffchain
	case errors.Is(err, walrus.ErrNotFound), errors.Is(err, ens.ErrNoPointer), errors.Is(err, ens.ErrNameNotFound),
		errors.Is(err, snapshot.ErrBlobNotFound), errors.Is(err, repo.ErrNotFound):
		return exitNotFound
	// A file or directory hermesd's user may not use: how the machine is
	// set up, which a retry does not change.
	case errors.Is(err, fs.ErrPermission):
		return exitUsage
	}
	return exitFailure
}
