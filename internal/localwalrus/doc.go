// Package localwalrus is a Walrus-compatible publisher and aggregator for
// the devnet and tests. It speaks the HTTP API of the real daemon
// (PUT /v1/blobs, GET /v1/blobs/{id}, the quilt API, GET /status,
// GET /v1/api) with the same query parameters, JSON shapes, status codes
// and size limits, and keeps blobs on disk so a restarted server still
// has them.
//
// It passes the Walrus conformance suite (internal/walrustest): every
// documented request is answered as the real service answers it, with
// ids compared by shape and consistency, not value.
//
// What is real: content addressing (identical bytes get the same id), the
// epoch clock and expiry (a blob is readable until its exclusive end epoch
// begins, then 404), dedup as the publisher does it (alreadyCertified only
// for a certified blob that outlives the requested end epoch and is
// permanent, or deletable but owned by the publisher), closed-form Range
// reads only (bytes=a-b; 206 with Content-Range, 416 with
// INVALID_BYTE_RANGE for other forms and for a last byte at or past the
// end), and the body limit (413 plain text, as axum's
// DefaultBodyLimit). So is what a store costs: a newlyCreated answer
// carries the encoded length by Walrus's RS2 formula
// (blobObject.storage.storageSize and
// resourceOperation.registerFromScratch.encodedLength, over Config.Shards,
// default 1000) and its cost in FROST at Config.Price (units·(storage
// price·epochs + write price), default early mainnet's figures), both from
// package walruscost; an alreadyCertified answer carries no cost, as on the
// network.
//
// Blob ids are Walrus's own (package redstuff): the RS2 encoding's
// metadata over Config.Shards (default 1000, mainnet's and testnet's),
// Blake2b-256 of the encoding type, the size and the Merkle root of the
// sliver pairs, so a blob stored here has the id the network would give
// it. At 1000 shards an id costs up to about a CPU-second whatever the
// blob's size (10⁶ symbol hashes and as many Merkle nodes), a third of
// that for a small blob or a quilt of small patches (their zero padding
// hashes alike, and is looked up); the ids of recent content are
// cached by its BLAKE3 digest, so a blob stored again is not encoded
// again. Blobs stored by earlier versions keep the simulated ids they
// were given (Blake2b-256 of a domain string, the size and a content
// digest) and stay readable, their quilts too (their old local layout).
//
// What is simulated:
//   - Sui object ids and transaction digests are random; the price is
//     configured, not read from a Sui system object.
//   - Every registration of a blob is kept in one metadata file beside the
//     data; re-storing content registers a new object (or answers
//     alreadyCertified as above) but never extends an existing one.
//
// Quilts (the documented quilt HTTP API):
//   - PUT /v1/quilts?epochs=N (every blob-store query parameter applies):
//     a multipart/form-data body, one part per blob whose field name is
//     its identifier, and optionally a part _metadata holding a JSON array
//     of {"identifier", "tags": {…}}. Identifiers are unique, start with a
//     letter or digit (so never with "_"), are valid UTF-8 and at most
//     64 KiB; all tags of a quilt together at most 64,000 bytes; at most
//     666 blobs; the body at most Config.MaxQuiltBodySize (100 MiB, the
//     real publisher's default; 413 beyond). Parts stream to a spool
//     file; only identifiers and tags are held in memory. The answer is
//     {"blobStoreResult": {newlyCreated|alreadyCertified}, "storedQuiltBlobs":
//     [{"identifier", "quiltPatchId"}…]}, patches in quilt order.
//     Each stored patch also carries "range": [first, end), its columns,
//     as the daemon reports a patch's sliver range.
//   - GET /v1/blobs/by-quilt-patch-id/{patchId} and
//     GET /v1/blobs/by-quilt-id/{quiltId}/{identifier}: one patch's bytes,
//     whole (Range is not part of the documented patch API and is
//     ignored: a client may still read ranges of the quilt blob itself),
//     with the headers of every read but the quilt's id as ETag (the
//     daemon's; its OpenAPI examples show the patch id), then each tag
//     among the aggregator's default allowed headers (Content-Type,
//     Content-Disposition, Content-Encoding, Content-Language,
//     Content-Location, Link, Authorization) that no header has taken,
//     then X-Quilt-Patch-Identifier. 404 QUILT_PATCH_NOT_FOUND for a
//     patch the quilt does not have (or a blob that is not a quilt).
//   - GET /v1/quilts/{quiltId}/patches: [{"identifier", "patch_id", "tags"}].
//
// Reads carry X-Content-Type-Options: nosniff, the daemon's
// Cache-Control, the ETag, and a Content-Type only where the request
// asks for one (an Accept without wildcards, else a GET's Content-Type),
// as the daemon: none otherwise, not even a sniffed one. Errors are the
// daemon's JSON (AIP-193: status, code, message, details with an
// ErrorInfo; a 500 is INTERNAL_ERROR in domain "global" with a DebugInfo,
// whose detail says here what went wrong) or axum's plain text (400 of a
// query or path, 413, 429).
//
// Quilts are laid out as Walrus's QuiltV1 over Config.Shards (package
// redstuff; the same bytes as walrus-core's and @mysten/walrus's
// encoders): the index and then every patch, sorted by identifier, each
// with its header, identifier and tags, in whole columns of the quilt
// blob's matrix. The quilt blob is stored, expires and is read (GET
// /v1/blobs/{quiltId}, ranges included) like any blob, and its id is its
// blob id; a patch id is the quilt's id and the patch's columns
// (QuiltPatchInternalIdV1), exactly as the network's. The same patches
// always give the same quilt, hence the same id: a retried store of the
// same quilt is deduplicated like a blob. Identifiers also follow
// walrus-core's rules (no trailing white space, no control characters).
// A laid-out quilt larger than Config.MaxQuiltSize (1 GiB, and at most
// the largest blob Config.Shards encode) is refused (400): widely
// differing patch sizes widen every column. A quilt is charged as the
// one blob it is stored as: the blobStoreResult's encodedLength and cost
// are those of the laid-out size, by the same formula and price as a
// blob's (the docs' quilt example: 72,040,000 encoded bytes). A patch is
// served from the columns it takes, read a group at a time.
//
// Writes are durable: uploads stream to a temporary file (digested on
// the way, never held whole in memory), are fsynced, encoded for their id
// from the file, renamed into place, and metadata is replaced atomically.
// Reads stream from disk (sendfile(2) where the connection allows).
//
// Faults (status errors, Retry-After, latency, connection resets and
// truncated bodies) can be switched on at runtime, deterministically from a
// seed, for retry tests; OnRequest sees every request with its outcome.
// A status fault answers with the daemon's body for that status (451
// FORBIDDEN_BLOB, 500, 503 BLOB_UNAVAILABLE, 504
// INSUFFICIENT_CONFIRMATIONS, 429 in plain text). So can the network's
// states a store meets, answered as the publisher does (never in the
// default mix): a blob marked invalid (FaultMarkedInvalid: 500 for a
// blob, the markedInvalid result with no patches for a quilt) and a store
// failed in a phase (FaultStoreFailed: the error result, status 200).
// So can a hostile server's (never in the default mix): an endless body,
// chunked or under a huge Content-Length (FaultEndless), a Content-Length
// that lies about the real answer (FaultLyingLength), and a redirect to
// another origin (FaultRedirect). Queue them with InjectNext or list them
// in Faults.Kinds like any other.
package localwalrus
