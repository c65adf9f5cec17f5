// Package ledger is hermesd's account of what each agent spends: Walrus
// storage (from every publisher's store answer), the Sui transactions those
// stores imply, and the gas of every pointer transaction (from its receipt)
// — and, beside it, what the same snapshots would have cost the naive way.
// It is kept per agent in the state directory, so a restart does not reset
// it, and `hermesd cost`, `hermesd status`, /v1/status and the metrics all
// read it.
//
// What is recorded, per agent:
//   - a store answer (walruscost.Charge): a newly created blob counts as a
//     blob, its encoded length, that length times the epochs it paid for,
//     the publisher's cost in FROST and walruscost.SuiTxPerBlob (2) Sui
//     transactions; an alreadyCertified answer counts as reused and costs
//     nothing. A quilt is one blob shared by patches: its charge is split
//     among the patches in proportion to their bytes (Charge.Split) and
//     each agent records its patches' shares (counted as patches).
//   - a mined pointer transaction (Tx): its gas used times its effective
//     gas price, by chain id, so a write on an L2 counts against the L2. A
//     multicall's gas is split equally among the agents it wrote, the
//     remainder one unit each to the first of them, so the shares add up
//     to the receipt's gas used exactly; each agent counts 1/n of the
//     transaction. A reverted transaction is paid for and recorded too.
//   - a verified snapshot (Snapshot): one snapshot, and the naive way of
//     storing it: one blob holding the whole brain (its size estimated as
//     the files' bytes plus 1 KiB of tar header and padding per file, or
//     the real blob of a whole-brain format) for the agent's epochs, with
//     its encoded length and storage units by walruscost, two Sui
//     transactions and one L1 setText update (NaiveWriteGas).
//
// Reports project per day and per month from the recent window, once
// MinWindow (an hour) is recorded; before that they give no projection
// and say when there will be one (AgentReport.ProjectFrom).
//
// Format: <state>/agents/<id>/cost.json, a JSON Book (schema version 1):
// the totals since the first record and the spend of each of the last 24
// hours with any, which is what "recent" means (Report). Every record
// rewrites the file atomically (fsync, rename, fsync of the directory);
// it stays a few KiB. A file that cannot be read, or that holds amounts no
// record makes (a chain without figures, a count outside 0..2^53, a fee
// outside 0..2^256−1 wei), is moved aside (cost.json.bad) and the account
// starts again, with a warning; a file of a newer schema is left alone and
// the account is kept in memory only. Sums saturate at the same bounds.
package ledger
