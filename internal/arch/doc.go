// Package arch holds no code: its tests check the structure of the
// repository, so that a forbidden import or a citation of a document the
// repository does not hold fails CI instead of review.
//
// Layering (docs/design.md §1.1). The package set and every package's
// imports come from `go list ./...`, run once for each build of builds
// (linux, darwin and windows, and the portable fallbacks), so an import in
// a file only another system compiles is checked as well; a non-test file
// no build compiles fails. Every package must be placed in a layer; a new
// one fails until it is. A package imports only packages below it (test
// files may import anything; test support only test files import), and
// inside its own layer only what the layer allows: nothing, or in the
// leaves and in the clients, servers and formats the edges lateral lists,
// which is the layer's order written out; an edge no package needs any
// more fails too. Walrus and ENS never meet, not even indirectly; the
// daemon, the drill and the CLI build their services through compose;
// hash, tarball and the v3 builder share fsys's walker and name policy.
//
// The layer table of docs/design.md §1.1 is read and held against
// placement both ways, so the document cannot fall behind the layering
// the build enforces. Placing a package is one line in placement and one
// name in the table's row.
//
// Citations: no tracked file cites a document outside the repository (the
// shared design notes it was planned from); the design is docs/design.md.
//
// Binary (binary_test.go): the daemon's binary (cmd/hermesd) links no EVM
// and no C it does not need: its closure, from `go list -deps`, holds
// neither the local chain (internal/devchain, internal/devnet,
// go-ethereum's core, state, vm, databases, node) nor a cgo package
// without a pure-Go fallback; the local chain is cmd/hermesd-devnet's
// alone.
package arch
