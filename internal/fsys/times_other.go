//go:build !linux

package fsys

import (
	"errors"
	"os"
	"time"
)

var errNoFutimens = errors.New("fsys: no futimens")

func futimens(*os.File, time.Time) error { return errNoFutimens }
