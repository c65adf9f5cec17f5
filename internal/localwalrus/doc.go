// Package localwalrus is a Walrus-compatible publisher and aggregator for
// the devnet and tests. It speaks the HTTP API of the real daemon
// (PUT /v1/blobs, GET /v1/blobs/{id}, GET /status, GET /v1/api) with the
// same query parameters, JSON shapes, status codes and size limit, and
// keeps blobs on disk so a restarted server still has them.
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
// Writes are durable: uploads stream to a temporary file (hashed on the
// way, 1 MiB at a time, never held whole in memory), are fsynced and
// renamed into place, and metadata is replaced atomically. Reads stream
// from disk (sendfile(2) where the connection allows).
//
// Faults (status errors, Retry-After, latency, connection resets and
// truncated bodies) can be switched on at runtime, deterministically from a
// seed, for retry tests; OnRequest sees every request with its outcome.
// So can a hostile server's (never in the default mix): an endless body,
// chunked or under a huge Content-Length (FaultEndless), a Content-Length
// that lies about the real answer (FaultLyingLength), and a redirect to
// another origin (FaultRedirect). Queue them with InjectNext or list them
// in Faults.Kinds like any other.
package localwalrus
