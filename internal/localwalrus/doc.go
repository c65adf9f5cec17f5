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
// What is simulated:
//   - The blob id is NOT the real RedStuff id, which needs the RS2 erasure
//     encoding over 1000 shards. It is
//     Blake2b-256("localwalrus/blob-id/v3\x00" || 0x01 || u64le(size) ||
//     BLAKE3-256(content)) in URL-safe base64 without padding: the same
//     shape and the same content-addressing property, different values.
//     (The content digest is BLAKE3, the cheapest sound hash on one core,
//     because this server shares its host with the client it stands in
//     for. Blobs stored before keep their ids and stay readable: v1 ids
//     digested content with Blake2b-256, v2 with SHA-256.)
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
// The quilt layout is this server's own, shaped like QuiltV1 at 1000
// shards (the real one is not specified here, and nothing depends on it
// beyond the patch id's form): the quilt blob is a matrix of 334 rows ×
// 667 columns of z-byte symbols, z the smallest even number with which
// everything fits, stored column by column, so column c is bytes
// [c·334·z, (c+1)·334·z) and the blob is 222,778·z bytes (the docs'
// quilt example, 1,782,224 bytes, is z = 8). Patches are sorted by
// identifier; the index takes the first columns, then each patch takes
// whole columns of its own, max(1, ⌈size/(334·z)⌉) of them, its bytes
// from the start of its first column, zero-padded to the end of its
// last. The index is
//
//	u8 version (1) ‖ u32le length of the rest ‖ u16le count ‖ count ×
//	  (u16le first column ‖ u16le end column ‖ u64le size ‖
//	   u32le identifier length ‖ identifier ‖ u32le tags length ‖ tags JSON)
//
// (tags JSON with sorted keys, empty without tags). The same patches
// therefore always give the same quilt bytes, hence the same quilt id:
// a retried store of the same quilt is deduplicated like a blob. The
// quilt blob is stored, expires and is read (GET /v1/blobs/{quiltId},
// ranges included) like any blob. A patch id is, as the real one,
// URL-safe base64 without padding of the quilt's blob id (32 bytes) ‖
// version 0x01 ‖ u16le first column ‖ u16le end column
// (QuiltPatchInternalIdV1): 37 bytes, 50 characters. A laid-out quilt
// larger than Config.MaxQuiltSize (1 GiB, and at most the largest blob
// Config.Shards encode) is refused (400): widely differing patch sizes
// widen every column. A quilt is charged as the one blob it is stored
// as: the blobStoreResult's encodedLength and cost are those of the
// laid-out size, by the same formula and price as a blob's (the docs'
// quilt example: 72,040,000 encoded bytes).
//
// Writes are durable: uploads stream to a temporary file (hashed on the
// way, 1 MiB at a time, never held whole in memory), are fsynced and
// renamed into place, and metadata is replaced atomically. Reads stream
// from disk (sendfile(2) where the connection allows).
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
