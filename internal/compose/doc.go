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
// declare: the Walrus client becomes a snapshot.BlobStore, the quilt
// batcher a snapshot.Quilter, the ENS client an agent.Pointer and
// agent.PointerWriter. What an agent's stores cost is recorded here, from
// what each store returned (a blob's answer, a pack's share of its
// quilt), in the agent's account of the state directory's cost ledger.
// Build takes one Observer, the daemon's: it sees every Walrus attempt
// and quilt, and tells a Walrus retry when the store is back.
package compose
