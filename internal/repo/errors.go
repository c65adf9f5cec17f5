package repo

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns about untrusted input
// wraps one of them, so the CLI can map them to exit codes with errors.Is.
var (
	// ErrCorrupt: a pack, index, tree, commit or object fails verification
	// (bad structure, lengths out of bounds, an object whose SHA-256 is not
	// its id, a file whose content does not hash to its recorded SHA-256, a
	// bundle hash that does not match the trees, a missing object). The
	// bytes authenticated, or could not even be parsed: this is a
	// verification failure, not a key problem.
	ErrCorrupt = errors.New("repo: snapshot fails verification")

	// ErrAuth: AES-256-GCM authentication failed: the bytes were tampered
	// with, or the key or agent identity is wrong.
	ErrAuth = errors.New("repo: authentication failed")

	// ErrWrongAgent: the pack was written under another agent key (its
	// header names a different key id). It also matches ErrAuth.
	ErrWrongAgent = errors.New("repo: not this agent's snapshot")

	// ErrNotPack: the blob is not a v3 pack (no "HRMS" magic, or another
	// format version). The caller may try the v1/v2 readers.
	ErrNotPack = errors.New("repo: not a v3 pack")

	// ErrChanged: the brain changed while the snapshot was built, so the
	// trees do not hash to the bundle hash the caller expected. Re-hash and
	// try again.
	ErrChanged = errors.New("repo: brain changed during the snapshot")

	// ErrName: a file or directory name the format cannot carry (invalid
	// UTF-8, '/', NUL, '\', ".", "..", empty, or longer than MaxNameLen).
	ErrName = errors.New("repo: unsupported file name")

	// ErrTooLarge: something does not fit the configured limits (a tree or
	// commit larger than a pack, a pack cap below the minimum).
	ErrTooLarge = errors.New("repo: size limit exceeded")

	// ErrNotEmpty: a restore target exists and is not an empty directory.
	ErrNotEmpty = errors.New("repo: restore target is not an empty directory")

	// ErrNotFound: a restore or walk path is not in the commit.
	ErrNotFound = errors.New("repo: path not in snapshot")
)

// wrongAgentError matches both ErrWrongAgent and ErrAuth.
type wrongAgentError struct{ msg string }

func (e *wrongAgentError) Error() string { return e.msg }

func (e *wrongAgentError) Is(target error) bool {
	return target == ErrWrongAgent || target == ErrAuth
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
