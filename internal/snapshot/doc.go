// Package snapshot is hermesd's pipeline between a brain directory and a
// Walrus blob, in both directions.
//
// Take: record the new bundle hash in bundle.lock.json (version+1), append
// hermesd's signed transition receipt, export receipts.ndjson, then stream
// the directory through the deterministic tar writer into the encryptor and
// a spool file, reading every file exactly once. The tar manifest's bundle
// hash must equal the hash the lock claims — otherwise a file changed while
// it was being packed and the snapshot is discarded (ErrChanged). The spool
// is uploaded, read back and compared by SHA-256, and only then does the lock
// name the new blob.
//
// Restore: download the blob to a spool file (resuming broken transfers),
// decrypt it (v1 or v2 by detection), extract into a temporary directory
// beside the target, require the extracted files' bundle hash to equal the
// restored lock's bundleHash, sync, and rename the directory into place. A
// failure at any step leaves the target untouched.
package snapshot
