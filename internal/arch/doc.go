// Package arch holds no code: its tests check the structure of the
// repository, so that a forbidden import or a citation of a document the
// repository does not hold fails CI instead of review.
//
// Layering (docs/design.md §1). The package set comes from `go list ./...`,
// and every package must be placed in a layer; a new one fails until it
// is. Bottom up:
//
//   - leaves (fsys, hash, tarball, cipher, sqlite, secretfile, ...) import
//     only the few leaves listed for them (hash, tarball and sqlite build
//     on fsys; cipher reads key files through secretfile);
//   - clients, servers and formats (walrus, ens, repo, seal, receipts,
//     config, state, devchain, localwalrus, ...) import leaves and each
//     other; walrus and ens never meet, not even indirectly;
//   - the pipeline (snapshot), then the agent, then the composition layer
//     (compose, and devnet, the local world), whose two packages do not
//     import each other;
//   - the daemon and the drill, which do not import each other, and on top
//     the CLI; all three build their services through compose;
//   - tools (scripts/..., testnet/ethkey), which nothing else imports, and
//     test support (pointertest, smallfstest, nodetest), which only test
//     files import.
//
// A package imports only packages below it (test files may import
// anything). hash, tarball and the v3 builder share fsys's walker and
// name policy.
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
