// Package fleet is one node's place in a fleet of hermesd nodes that
// share their agents through etcd (docs/design.md §12): the node's
// registration and lease, the fence that stops its writes when it cannot
// renew the lease in time, the ownership of each agent (an etcd key bound
// to the owner's lease, taken in a transaction) with every transition of
// it, the balanced assignment of agents to nodes, the order of a
// hand-off, the hooks that start and stop an agent's runtime, and the
// fleet head — an agent's newest verified snapshot, kept in etcd and
// written only by the agent's owner.
//
// It drives agents without knowing them: the Host (the daemon) opens,
// finalises and closes them; the pointer package decides when a fleet
// head is written and calls PutHead. Node.ReconcileOnce and the
// transitions (Acquire, HandOff, Drop, Leave) are synchronous steps that
// Run schedules and the tests call directly against real etcd members.
//
// Words:
//
//   - lease: the node's etcd lease; its registration and every agent it
//     owns are bound to it, so they vanish together when it expires.
//   - token: the create revision of an agent's owner key — strictly
//     increasing with each acquisition — which every fleet-head write is
//     conditioned on.
//   - fenced: the node has not renewed its lease for half its TTL: it
//     writes nothing (uploads, chain transactions, fleet heads, state
//     saves) until it renews, so that it has stopped writing long before
//     anyone else may take its agents.
//   - lost: the lease is gone (etcd says so) or may be (silence for a
//     whole TTL): every agent is dropped without writing, and the node
//     registers again.
package fleet
