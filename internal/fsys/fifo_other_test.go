//go:build !unix

package fsys

import "errors"

func mkfifo(string) error { return errors.ErrUnsupported }
