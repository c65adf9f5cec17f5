// Package receipts holds signed receipts: the agent runtime's inference
// receipts and hermesd's own snapshot (transition) receipts. It parses and
// verifies them, keeps each agent's receipts in a durable append-only log
// outside the brain, and folds them in and out of the brain's
// receipts.ndjson.
//
// # Receipts and signatures
//
// A receipt is kept as the exact compact JSON it arrived as: key order and
// string escapes are what verifiers see, so they are never re-encoded.
// (Input with insignificant whitespace is stored compacted; json.Compact
// changes nothing else.) Every receipt is signed the way the reference
// runtime signs:
//
//	digest    = keccak256(utf8(callId|tokenId|subscriber|outputHash|stateDeltaHash|ts))
//	signature = secp256k1 over keccak256("\x19Ethereum Signed Message:\n32" ‖ digest)
//
// tokenId and ts in decimal, tokenId "" when absent, subscriber as written.
// The signature is 0x + 65 bytes r‖s‖v with v = 27 or 28; Verify rejects
// other v values and high-s (malleated) signatures. An absent signature or
// the runtime's "0x" placeholder is unsigned.
//
// tokenId is the JSON number's exact digits, never a float: the digest of
// 9007199254740993 is not that of 9007199254740992. But the reference
// runtime, its importer and every JavaScript verifier read a JSON number
// as a double, so a tokenId JavaScript cannot hold exactly (JSExact:
// beyond 2^53 − 1, most integers) would be filed there under another
// token, with another digest and another recovered signer. Verify refuses
// such a receipt (StatusAmbiguousToken) whatever its signature, and the
// configuration refuses such a token_id.
//
// For a runtime receipt (stratum/receipt/v1, v2) the signature covers only
// those six fields; everything else in it (model, transcript, ...) is
// unauthenticated, as in the runtime. v1 receipts without stateDeltaHash do
// not verify (missing digest fields), so they are never imported.
//
// # hermesd/snapshot/v1 receipts
//
// hermesd signs one receipt per snapshot. Its JSON keys, in this order:
//
//	schemaVersion     "hermesd/snapshot/v1"
//	tokenId           the agent's iNFT token id as a JSON number (required to sign;
//	                  Verify still accepts an older receipt without it)
//	subscriber        the signing operator's address, 0x + 40 lowercase hex
//	callId            "hermesd-" + 32 hex (see SnapshotCallID); unique per transition
//	agentId           hermesd's agent id
//	bundleHashBefore  bundle hash before the transition, 0x + 64 lowercase hex
//	bundleHashAfter   bundle hash after (the state this snapshot holds)
//	stateDeltaHash    keccak256(bundleHashBefore[32] ‖ bundleHashAfter[32])
//	parentBlobId      Walrus blob id of the previous snapshot; "" for the first
//	outputHash        keccak256(lp("hermesd/snapshot/v1") ‖ lp(agentId) ‖ lp(bundleHashBefore)
//	                            ‖ lp(bundleHashAfter) ‖ lp(parentBlobId)),
//	                  lp(s) = 4-byte big-endian length of s ‖ s
//	ts                unix seconds, a JSON number
//	signature         as above
//
// Because subscriber and outputHash are digest fields, the runtime's
// signature rule binds every field: Verify recomputes stateDeltaHash and
// outputHash, requires the signer to be the subscriber and rejects unknown
// keys. The runtime's importer, which keys receipts by callId, accepts the
// receipts.ndjson hermesd writes.
//
// # The log
//
// One file per agent, <state_dir>/agents/<agent-id>/receipts.log (LogPath):
//
//	hermesd receipts log v1\n
//	<crc32c of json, 8 lowercase hex> <compact json>\n
//	...
//
// A record counts only if its line is complete and its checksum and JSON
// check out. Append writes a batch with one write and one fsync, and indexes
// it only after the fsync. At open, damage after the last intact record is a
// torn write: it is truncated away and reported (Recovery, logger); complete
// lines in it are copied to the quarantine file first. Damage followed by
// intact records is bit rot: a *CorruptError naming the line, or with
// Options.Repair the damaged lines move to <log>.quarantine and the log is
// rewritten without them. Nothing else is ever removed from the log.
//
// Receipts are unique by callId; the first one wins. Newest first means ts
// descending, and among equal ts the later append first. Only the index
// (callId, ts, offset, checksum) lives in memory; receipt bytes are read
// back from the file. Options.ReadOnly opens a log without changing it (for
// listing while the daemon appends).
//
// Only receipts signed by a trusted operator enter the log through Import:
// the log is folded into every snapshot, so anything else there would let
// whoever can post receipts grow every snapshot past the publisher's limit.
// Append is for hermesd's own receipts and does not verify.
//
// An agent's snapshot carries only its own token's receipts, as the
// reference runtime's export does. ImportRouted, given the agent's Route,
// takes a trusted receipt of another token only to hand it to the log of
// the configured agent holding that token (each log's lock held in turn,
// never two at once); one it cannot hand over (no agent holds the token,
// or the holder's log is not open here, as in a restore) follows the
// policy like an untrusted line, with the reason (StatusForeignToken).
// ExportToken writes one token's receipts, whatever else a log holds from
// before.
//
// # The quarantine
//
// <log>.quarantine collects what is set aside, one JSON object per line
// (QuarantineRecord): {"time", "source" ("import" or "log"), "file",
// "line", "status", "reason", and the data: "receipt" (a parsed receipt,
// verbatim), "text" or "base64" (anything else, cut at about 1 MiB),
// "length", "truncated"}. It is appended to, and emptied only by
// PurgeQuarantine. It is bounded (Options.Quarantine, default 16 MiB and
// 10,000 records): Import drops lines that do not fit and counts them.
// Its size and count are learnt once at open, so imports do not reread it.
// It is opened with O_NOFOLLOW and created 0600: a symbolic link planted
// at its path fails the write instead of redirecting it.
//
// # receipts.ndjson
//
// ExportFile writes the receipts of the agent's token (the reference
// runtime's importer throws on one without a tokenId) newest first, one
// per line, the stored bytes, joined by "\n" with no trailing newline (an
// empty file for none), and replaces the file atomically. Import verifies every line, appends the
// trusted new ones in reverse line order (so export → import → export is
// byte-identical), counts blank lines and duplicates, applies a Policy to
// the rest, and accounts for every line in a bounded report. VerifyLines
// does the verification alone, streaming one result per line. Neither
// touches the network.
package receipts
