//go:build !linux || fsys_portable

package fsys

import "testing"

func implementations(t *testing.T, f func(t *testing.T)) { t.Run("os.Root", f) }
