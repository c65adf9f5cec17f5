// Package fleettest runs a hermesd fleet as its users would and checks
// that no agent ever had two writers.
//
// Start brings up a real 3-member etcd cluster in the test process
// (devetcd), the devnet world (the L1 and L2 chains with the real ENS
// contracts, the local Walrus server) and N real `hermesd run` processes
// on per-node configurations. Every node reaches Walrus and each chain
// through a proxy of its own that records the time of every store and of
// every transaction it sends, so a write is attributed to its node. The
// test then breaks the fleet — kill -9, SIGSTOP and SIGCONT a node, a
// rolling restart with drain, scaling 1 → 3 → 1, stopping etcd members —
// and waits on conditions (WaitOwned).
//
// Check reads the whole run back: the agents' ENS records (the
// resolvers' TextChanged events on both chains), etcd's revision history
// of the fleet's keys (every head and ownership write, every node lease),
// the proxies' timestamps and the nodes' hook logs; and fails the test on
// a fork (a head or record that does not descend from the one before), a
// rollback, a write by a node that did not own the agent or whose lease
// had expired, and a hook that ran on two live nodes at once or whose
// taker started before its giver's on_release returned. The checker
// itself is a pure function over those histories (History.Check), tested
// on synthetic runs with planted faults.
//
// Only tests import this package; internal/arch checks that no other code
// does. The fleet itself (cluster.go) runs on Unix only: it controls the
// nodes by process group and SIGSTOP.
package fleettest
