package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hermesd/hermesd/internal/exitcode"
)

// Exit codes, as hermesd's (a script treats both commands alike); with a
// child command, the child's status is passed through unchanged.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitLocked      = 5 // the devnet directory is in use by another hermesd-devnet
	exitInterrupted = 130
)

// withCode marks err so that main exits with code.
func withCode(code int, err error) error { return exitcode.With(code, err) }

func usageErrorf(format string, args ...any) error {
	return withCode(exitUsage, fmt.Errorf(format, args...))
}

// report prints err as one line on w and returns the exit code for it.
func report(w io.Writer, err error) int {
	code, marked := exitcode.Of(err)
	switch {
	case err == nil:
		return exitOK
	case marked:
	case errors.Is(err, context.Canceled):
		code, err = exitInterrupted, errors.New("interrupted")
	default:
		code = exitFailure
	}
	fmt.Fprintf(w, "hermesd-devnet: %s\n", strings.TrimSpace(err.Error()))
	return code
}
