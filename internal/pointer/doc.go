// Package pointer owns the life of an agent's head once a snapshot of it
// is verified: the places it is written (the agent's state directory, its
// ENS record on L1 or on an L2 that L1 resolution reaches) and every
// decision about them — pending, written, visible, published, held,
// transferred (docs/design.md §7.3 has the state machine) — with the
// routing, batching, pacing, confirmation, read-back and accounting of the
// writes. The agent hands a Head each newly verified snapshot; the daemon
// runs a Publisher; the CLI and the drill call Publish. None of them
// decides anything about a pointer.
//
// Words, each with one meaning here:
//
//   - head: an agent's newest verified snapshot. Its value (a blob id)
//     is an opaque string, compared and written, never parsed.
//   - record: the agent-snapshot text record of the agent's ENS name.
//   - target: where the record lives and is written: "" for the name's own
//     resolver on L1, else the id of an ens.records entry (a contract on
//     another chain, read from L1 through CCIP-read).
//   - lane: the writes, confirmations and read-backs of one target. Each
//     lane is scheduled on its own, so a target whose chain hangs never
//     holds back the agents of another.
//   - write: a compare-and-set transaction (or the finding that the
//     record holds the value already); confirm: a read through L1
//     resolution of a value written off L1, never a transaction; check
//     (read-back): a read of a published record, to repair a rollback.
//
// The Head's state persists in the agent's state file through Store, under
// its owner's lock; which values are the agent's own (its lineage) is
// Lineage's to say. Everything is driven synchronously by Publisher.Step,
// which Run schedules and the tests call directly with a fake clock.
package pointer
