package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/secretfile"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/tarball"
	"github.com/hermesd/hermesd/internal/walrus"
)

// TestExitCodesOfRefusals: every refusal of untrusted input exits 3, or 6
// when decryption refused it, however deeply it is wrapped.
func TestExitCodesOfRefusals(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("restore failed: blob X: %w", err) }
	for _, tc := range []struct {
		err  error
		code int
	}{
		{wrap(fmt.Errorf("%w: %w", snapshot.ErrHostile, tarball.ErrFormat)), exitMismatch},
		{wrap(fmt.Errorf("%w: %w", snapshot.ErrHostile, tarball.ErrUnsafePath)), exitMismatch},
		{wrap(fmt.Errorf("%w: %w", snapshot.ErrHostile, tarball.ErrLimit)), exitMismatch},
		{wrap(snapshot.ErrHashMismatch), exitMismatch},
		{wrap(snapshot.ErrNoLock), exitMismatch},
		{wrap(fmt.Errorf("read X: %w: top level is not an object", bundlelock.ErrMalformed)), exitMismatch},
		{wrap(fmt.Errorf("%w: the body goes on past the read limit", walrus.ErrBodyTooLarge)), exitMismatch},
		{wrap(walrus.ErrMismatch), exitMismatch},
		{wrap(receipts.ErrRejected), exitMismatch},
		{wrap(cipher.ErrAuth), exitAuth},
		{wrap(cipher.ErrTruncated), exitAuth},
		{wrap(snapshot.ErrWrongAgent), exitAuth},
		{wrap(walrus.ErrNotFound), exitNotFound},
		{wrap(state.ErrLocked), exitLocked},
		{wrap(errors.New("connection refused")), exitFailure},
	} {
		if got := exitCode(tc.err); got != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.err, got, tc.code)
		}
	}
}

// TestReportSanitizes: the one error line main prints quotes servers,
// blobs and receipts; nothing in it reaches the terminal raw.
func TestReportSanitizes(t *testing.T) {
	var out bytes.Buffer
	err := fmt.Errorf("walrus: HTTP 502: %s", "\x1b]0;pwned\x07\x1b[2J\u009b31m\nsecond line")
	if code := report(&out, err); code != exitFailure {
		t.Errorf("exit %d", code)
	}
	got := out.String()
	if ctx, bad := rawControl(got[:len(got)-1]); bad || strings.Count(got, "\n") != 1 {
		t.Errorf("report printed %q (raw %q)", got, ctx)
	}
	if !strings.Contains(got, `\u001b]0;pwned\u0007\u001b[2J\u009b31m\u000asecond line`) {
		t.Errorf("report printed %q", got)
	}
}

// TestExitCodesOfConfiguration: every problem of the configuration or of
// what it names exits 2, however deeply it is wrapped: an exit 1 (an
// "unsafe state directory", say) would have systemd, whose unit says
// RestartPreventExitStatus=2, restart hermesd forever.
func TestExitCodesOfConfiguration(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("startup: open agent a: %w", err) }
	for _, err := range []error{
		&config.ValidationError{Fields: []*config.FieldError{{Field: "state_dir", Msg: "required"}}},
		fmt.Errorf("%w: /etc is a system directory", state.ErrUnsafe),
		fmt.Errorf("%w: /srv/s belongs to uid 65534", state.ErrUnsafe),
		fmt.Errorf("%w: /srv/s is writable by everyone", state.ErrUnsafe),
		fmt.Errorf("%w: /srv/a -> /etc", fsys.ErrSymlink),
		fsys.CheckSystemDir("/etc"),
		fmt.Errorf("read secret: %w: /k belongs to uid 65534", fsys.ErrForeignOwner),
		fmt.Errorf("/k is %w (mode 0644)", secretfile.ErrMode),
		fmt.Errorf("/k: %w", secretfile.ErrNotRegular),
		fmt.Errorf("/k is %w of 65536 bytes", secretfile.ErrTooLarge),
		fmt.Errorf("key: %w", cipher.ErrInvalidKey),
		config.ErrNoSecret,
		fmt.Errorf("%w: threshold", seal.ErrInvalidConfig),
		fmt.Errorf("%w: no aggregators", walrus.ErrConfig),
		fmt.Errorf("%w: chain id 1, configured 11155111", ens.ErrWrongChain),
		ens.ErrNoRegistry,
		ens.ErrReadOnly,
		fmt.Errorf("%w: a..eth", ens.ErrInvalidName),
		receipts.ErrPolicy,
		snapshot.ErrNoKey,
		&fs.PathError{Op: "mkdir", Path: "/var/lib/hermesd", Err: syscall.EACCES},
	} {
		if got := exitCode(wrap(err)); got != exitUsage {
			t.Errorf("%v: exit %d, want %d", err, got, exitUsage)
		}
	}
}
