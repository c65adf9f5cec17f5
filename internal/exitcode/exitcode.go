// Package exitcode carries a process exit code on an error, from where a
// command learns what went wrong up to its main, which exits with the
// code. hermesd and hermesd-devnet share it (a script treats both
// commands' codes alike); each command keeps its own table of codes.
package exitcode

import "errors"

// Error is err with the code its command exits with.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// With marks err so that main exits with code. A nil err stays nil.
func With(code int, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// Of returns the code With attached to err (the outermost, however deeply
// err wraps it), and false if there is none.
func Of(err error) (int, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return 0, false
}
