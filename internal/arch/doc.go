// Package arch holds no code: its test enforces the layering of DESIGN §1,
// so that a forbidden import fails CI instead of review.
//
//   - hash, tarball and cipher are leaves: they import no hermesd package;
//   - walrus and ens never import each other (not even indirectly);
//   - no internal package imports the daemon, the agent or the CLI;
//   - the daemon's binary (cmd/hermesd) links no EVM and no C it does not
//     need: its closure, from `go list -deps`, holds neither the local
//     chain (internal/devchain, internal/devnet, go-ethereum's core, state,
//     vm, databases, node) nor a cgo package without a pure-Go fallback;
//     the local chain is cmd/hermesd-devnet's alone.
package arch
