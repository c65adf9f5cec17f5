// Package repo is hermesd's repository format v3 (docs/design.md §10): an
// agent's brain stored on Walrus as immutable, content-addressed,
// encrypted objects, so a snapshot uploads what changed rather than the
// whole brain. The byte layout is specified in docs/format-v3.md, with test
// vectors this package's tests assert.
//
// Objects: a chunk is a piece of a file (files up to MinChunk are one
// chunk; larger ones are cut by content-defined chunking with a per-agent
// Rabin polynomial), a tree is one directory (entries sorted by name, with
// mode, time, size, SHA-256 and chunk ids, or a subtree id, or a hard
// link's path, or a symlink's target), and a commit names
// the root tree, the lock and receipts files kept beside it, its parent
// snapshot and every live pack. Object ids are SHA-256 of the plaintext;
// every object is AES-256-GCM under a key derived from the agent key, with
// the agent identity and the object type as associated data.
//
// A pack is one Walrus blob: a plaintext header, an encrypted index of its
// objects (and, in a head pack, the commit), then the objects. The ENS
// record names the head pack; readers need only closed range reads.
//
// The pieces, for the daemon:
//   - keys: DeriveAgentKey, NewKeys (per-agent subkeys, key id);
//   - codecs: Tree, Commit, PackIndex, Header, Keys.Seal/Open, PackWriter;
//   - Builder.Stage: walks the brain, reads only files that are new or
//     changed (Known from the hash cache), dedups against the Index and
//     uploads full packs through a PackSink (Pack.Open gives a pack's
//     bytes: header and index from memory, objects from the spool
//     directory), returning the bundle hash of the final trees; the
//     caller records it in the lock, then Staged.Commit stores the lock
//     and receipts and uploads the head pack last (Builder.Snapshot does
//     both for a lock already in place);
//   - Open / ReadCommit: a Reader over a RangeReader, with Restore,
//     Check, Walk, Summarize (bundle hash from trees alone), Diff.
//
// Interfaces (PackSink, RangeReader, TreeSource) are declared here, on the
// consumer side, with standard types only.
package repo
