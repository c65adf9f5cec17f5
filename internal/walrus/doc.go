// Package walrus is a client for the Walrus publisher and aggregator HTTP
// API: it stores a blob with PUT /v1/blobs and reads it back with
// GET /v1/blobs/{id}.
//
// Invariants:
//   - Bodies stream. A store reads its body from a reopenable source (a spool
//     file) with a known length, once per attempt; a read streams into the
//     caller's writer. Nothing holds a whole blob in memory.
//   - Retries are bounded and selective: network errors, 429, 500, 502, 503
//     and 504 are retried with capped, jittered exponential backoff (or the
//     server's Retry-After, capped), rotating to the next configured
//     endpoint each time; every other status is final and returned as a
//     *StatusError after exactly one attempt.
//   - A read cut off mid-body resumes with a closed Range request
//     (bytes=N-END, the only form aggregators accept) from the byte where it
//     stopped, possibly on another aggregator, so the writer sees each byte
//     exactly once.
//   - Blob ids are opaque and case-sensitive; they are validated, never
//     rewritten.
//   - Nothing is logged except through Config.Logger, and the bearer token
//     never is.
package walrus
