// Package headref is the text form of a head reference: how hermesd names
// an agent's newest snapshot wherever it names it — the ENS record
// agent-snapshot, the state directory (state.json), bundle.lock.json, a
// handover, the fleet's head — so that the name binds the bytes
// (docs/format-v3.md §14).
//
// A reference is a Walrus blob id or quilt patch id, then, for a v3 head,
// "." and its digest: the head commit's id (the SHA-256 of the commit's
// plaintext), 43 characters of URL-safe base64 without padding.
//
//	M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk.ki98_bqU5C0tD7_76ECF-7T1WmYMxikQmWR7-GtCiTo
//
// An aggregator answers whatever bytes it likes under an id; a genuine
// older head of the same agent passes every other check (AEAD, object
// ids, bundle hash, identity). The digest does not: a reader compares it
// with the commit it decrypted, before anything else of the snapshot is
// read, and refuses another head with ErrMismatch. A reference without a
// digest (a v1 or v2 blob, which the reference runtime reads; a record
// written before) names an id only.
//
// The text is untrusted (anyone's ENS record, a file on disk): Parse
// accepts exactly the grammar of docs/format-v3.md §14 and nothing
// around it.
package headref
