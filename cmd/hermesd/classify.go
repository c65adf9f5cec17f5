package main

import (
	"errors"

	"github.com/hermesd/hermesd/internal/cipher"
)

// classify maps errors from hermesd's packages to exit codes. Commands may
// also wrap an error with withCode when they know better.
func classify(err error) int {
	switch {
	case errors.Is(err, cipher.ErrInvalidKey):
		return exitUsage
	case errors.Is(err, cipher.ErrAuth):
		return exitAuth
	}
	return exitFailure
}
