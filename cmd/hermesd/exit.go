package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hermesd/hermesd/internal/exitcode"
)

// Exit codes. They are part of hermesd's interface: scripts, init containers
// and systemd units branch on them, so a code never changes meaning.
const (
	exitOK          = 0
	exitFailure     = 1   // anything not listed below
	exitUsage       = 2   // bad flags or arguments, invalid configuration, refused key files or directories
	exitMismatch    = 3   // verification failed: hash, bytes, modes, signatures, a tampered blob, an ENS record that names no snapshot
	exitNotFound    = 4   // no pointer, no blob, or the blob has expired
	exitLocked      = 5   // another hermesd process holds the state directory
	exitAuth        = 6   // decryption failed: wrong key, wrong agent, or a corrupted blob
	exitOffchain    = 7   // ENS resolution refused what a CCIP-read gateway or its resolver sent
	exitInterrupted = 130 // stopped by SIGINT or SIGTERM before finishing
)

const exitCodeHelp = `
Exit status:
  0    success
  1    failure (network, chain, disk, ...)
  2    usage error or invalid configuration, or what it names refused: a
       key file (mode, owner), a state or brain directory (a system
       directory, writable by others, another user's), permission denied
  3    verification failed (hash, bytes, modes, signature, tampered blob,
       an ENS record that is not a blob id or a quilt patch id)
  4    not found (no ENS pointer, no such blob, blob expired)
  5    state directory locked by another hermesd process
  6    decryption failed (wrong key, blob of another agent, corrupted blob)
  7    ENS offchain lookup refused (CCIP-read: invalid lookup, gateway 4xx
       or unusable answer, answer rejected by the resolver, too many
       lookups); an unreachable gateway is 1
  130  interrupted
`

// withCode marks err so that main exits with code. A nil err stays nil.
func withCode(code int, err error) error { return exitcode.With(code, err) }

// usageError is a mistake in how hermesd was invoked.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errUsageShown means the usage text was already printed; main only sets the
// exit code.
var errUsageShown = errors.New("usage shown")

// exitCode maps an error returned by Run to the process exit code.
func exitCode(err error) int {
	var ue *usageError
	code, marked := exitcode.Of(err)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case marked:
		return code
	case errors.Is(err, errUsageShown), errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	return classify(err)
}

// report prints err as one line on w and returns the exit code for it.
// Errors quote servers, blobs and receipts: the line is sanitized, so an
// escape sequence in any of them reaches the terminal as text.
func report(w io.Writer, err error) int {
	code := exitCode(err)
	if err != nil && code != exitOK && !errors.Is(err, errUsageShown) {
		msg := err.Error()
		if errors.Is(err, context.Canceled) && code == exitInterrupted {
			msg = "interrupted"
		}
		fmt.Fprintf(w, "hermesd: %s\n", sanitize(strings.TrimSpace(msg)))
	}
	return code
}
