// Package smallfstest runs a test on a small real filesystem: a tmpfs of a
// given size, mounted in a mount namespace of the test process's own, so
// that nothing outside the test sees it or outlives it. Restores that must
// fit (or be refused) on a filesystem of a known size are tested on one
// instead of trusting a stub of statfs(2).
//
// Only tests import this package; internal/arch checks that no other code
// does.
package smallfstest
