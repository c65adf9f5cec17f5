//go:build linux && !fsys_portable

package fsys

import "testing"

// implementations runs f once per lookup strategy: openat2, and the
// one-component-at-a-time openat fallback of kernels without it.
func implementations(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("openat", func(t *testing.T) {
		noOpenat2.Store(true)
		defer noOpenat2.Store(false)
		f(t)
	})
}
