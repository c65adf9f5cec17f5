package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
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

// exitError attaches an exit code to an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &exitError{code: code, err: err} }

func usageErrorf(format string, args ...any) error {
	return withCode(exitUsage, fmt.Errorf(format, args...))
}

// report prints err as one line on w and returns the exit code for it.
func report(w io.Writer, err error) int {
	code := exitFailure
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		code = ee.code
	case errors.Is(err, context.Canceled):
		code, err = exitInterrupted, errors.New("interrupted")
	}
	fmt.Fprintf(w, "hermesd-devnet: %s\n", strings.TrimSpace(err.Error()))
	return code
}
