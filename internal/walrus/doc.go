// Package walrus is a client for the Walrus publisher and aggregator HTTP
// API: it stores a blob with PUT /v1/blobs and reads it back, whole or in
// closed byte ranges, with GET /v1/blobs/{id}; and it stores many small
// blobs as one quilt (PUT /v1/quilts, StoreQuilt), reads each back alone
// by its patch id (GET /v1/blobs/by-quilt-patch-id/{id}) or by quilt id
// and identifier (GET /v1/blobs/by-quilt-id/{quilt}/{identifier},
// ReadPatchByIdentifier), whole (ranges of a patch are not part of the
// documented API), and lists a quilt's patches.
//
// Answers are read as the service sends them, which is not always as its
// OpenAPI description has them (internal/walrustest holds both, and runs
// this client against each): a store result's fields camelCase, as sent,
// or snake_case, as described (blob_object, end_epoch, ...), one spelling
// per field; a patch's ETag the quilt's id, as sent, or the patch's id,
// as described, bare or quoted. A store whose blob is marked invalid
// fails with ErrMarkedInvalid, not retried.
//
// A patch id is told from a blob id by its length alone (IsPatchID): a
// blob id is 43 characters (32 bytes), a patch id longer (the quilt's
// 32-byte blob id followed by the patch's internal id, whose first byte
// is the quilt version). Read, ReadToFile and Verify take either.
//
// Invariants:
//   - Bodies stream. A store reads its body from a reopenable source (a spool
//     file) with a known length, once per attempt. A whole-blob read is
//     spooled (memory up to 16 MiB, then an unlinked temporary file;
//     ReadToFile's own file) and reaches the caller only once its Walrus
//     blob id (package redstuff, over Config.Shards) is the one asked for
//     (verify.go): bytes of another blob move the read to the next
//     aggregator, and when none has the blob it fails with ErrBlobID. A
//     lying aggregator can deny service, never substitute bytes. A range
//     read that is not the whole blob, and a quilt patch (whose id commits
//     to its whole quilt), cannot be checked and stream unchecked.
//   - Retries are bounded and selective: network errors, 429, 500, 502, 503
//     and 504 are retried with capped, jittered exponential backoff
//     (internal/backoff's, through retryablehttp's Backoff hook; or the
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
//     never is. Endpoint URLs appear only as scheme://host[:port] in every
//     error, log line and result: their paths, queries and userinfo may
//     hold API keys.
//
// Every server is taken to be hostile. What is bounded, and by how much:
//   - A read's blob size: the expected size (WithExpectedSize; Verify passes
//     the stored size), else WithMaxSize, else Config.MaxReadSize (16 GiB).
//     A Content-Length or Content-Range beyond it fails before the body is
//     read, a body running past it fails at the first byte too many, with
//     ErrBodyTooLarge; neither is retried nor failed over.
//   - A range read writes exactly its length; an aggregator ignoring Range
//     is tolerated only for a whole blob of at most 1 MiB.
//   - Disk: ReadToFile (and any read given WithFreeSpace) checks free
//     space (statfs) before writing, for the size an answer announces plus
//     a margin (internal/diskspace), and again every 64 MiB: ErrNoSpace,
//     with the numbers.
//   - A publisher's answer: 1 MiB (Content-Length checked first). An error
//     answer: 64 KiB read, 300 characters kept for messages.
//   - A quilt: at most 666 parts and Config.MaxBlobSize of multipart body
//     (Content-Length computed in advance; parts stream from their Body,
//     and a part that yields other than its size fails the attempt). Its
//     answer must name exactly the identifiers sent, once each, with
//     patch ids of the quilt the answer names and no two alike, and a
//     newly created quilt no smaller than its parts; anything else is
//     ErrProtocol, not retried. A patch read's ETag, when it has one,
//     must name the patch or its quilt (for a read by identifier: the
//     quilt or a patch of it), and its X-Quilt-Patch-Identifier be the
//     identifier asked for (WithIdentifier; always for a read by
//     identifier); a list of patches is read up to 8 MiB and every patch
//     id in it must be of that quilt.
//   - Redirects: a store follows none (ErrRedirect); a read follows at most
//     MaxRedirects (5), to http(s) only, and drops Authorization,
//     Proxy-Authorization and Cookie once a hop leaves the configured
//     scheme, host and port.
//   - Time: AttemptTimeout until an answer starts, IdleTimeout for a stall
//     mid-body, Timeout for a whole operation; RetryMax attempts.
package walrus
