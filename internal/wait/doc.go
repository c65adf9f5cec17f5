// Package wait is how tests wait: they poll a condition until it holds,
// never sleep through a wall-clock window. A deadline is only the bound
// after which a test that would otherwise hang fails, saying what it
// waited for; it is long enough for a loaded 2-core machine and is no
// timing assertion. Only test files import it.
package wait
