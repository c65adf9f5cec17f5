// Package compose is hermesd's composition root: it turns a configuration
// into the services every command shares — the snapshot key, the Walrus
// client, the chain client, the receipt signer and the trusted signers —
// and builds the per-agent pieces from them exactly one way: an agent's
// snapshot pipeline (Pipeline), the agent itself (OpenAgent), the lookup of
// its latest snapshot (Latest), and the one-shot start-up path
// (PrepareOnce). The daemon, the drill and the CLI commands depend on this
// package, never on each other.
//
// It is also where the leaf clients meet the interfaces their consumers
// declare: the Walrus client becomes a snapshot.BlobStore, the ENS client
// an agent.Pointer and agent.PointerWriter.
package compose
