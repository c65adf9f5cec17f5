// Package arch holds no code: its test enforces the layering of DESIGN §1,
// so that a forbidden import fails CI instead of review.
//
//   - hash, tarball and cipher are leaves: they import no hermesd package;
//   - walrus and ens never import each other (not even indirectly);
//   - no internal package imports the daemon, the agent or the CLI.
package arch
