// Package cipher encrypts and decrypts hermesd snapshot blobs and handles
// snapshot keys.
//
// A blob on Walrus is public, so it is always encrypted (docs/design.md
// §5). This package holds the whole-blob envelopes of snapshot formats v1
// and v2, which hermesd still writes when configured to and always reads.
// The default format, v3, encrypts each object and pack itself
// (internal/repo, docs/format-v3.md), with keys derived from the [Key]
// this package loads; the seal format's envelope is internal/seal's.
//
//   - v2: the 8 bytes "HRMS" 0x02 0x00 0x00 0x00 followed by a
//     Tink streaming AEAD "AES-GCM-HKDF" ciphertext (AES256_GCM_HKDF_1MB:
//     HKDF-SHA256, 32-byte derived keys, 1 MiB ciphertext segments). The
//     associated data is "hermesd/v2:" + the agent identity, which binds a blob
//     to its agent. Written by [Encrypt], read by [Decrypt]; memory stays at a
//     few segment buffers whatever the blob size.
//   - v1, the reference runtime's envelope: u32le(1) ‖ IV[12] ‖ AES-256-GCM
//     ciphertext ‖ tag[16], no associated data. It is a whole-buffer format,
//     so it is always read and written under a size cap ([EncryptV1],
//     [SealV1], [OpenV1], and [Decrypt] with [WithMaxV1Size]). It carries no
//     agent identity.
//
// Invariants:
//   - [Decrypt] never treats unrecognised input as plaintext: it returns
//     [ErrUnknownFormat].
//   - No plaintext byte of a v2 segment is returned before that segment has
//     authenticated, and the reader reports io.EOF only after the final
//     segment has authenticated as the final one; so truncation, reordering,
//     appended data, a wrong key and a wrong agent identity all fail.
//   - Decrypt authenticates the first segment (v1: the whole envelope) before
//     it returns, so a wrong key or identity fails there, not in the middle of
//     an extraction.
//   - Errors never contain key material. Keys come from files or environment
//     values given to [ReadKeyFile] and [ParseKey], never from a config body,
//     and an ephemeral key is never generated implicitly.
//   - A [Key] never prints: fmt (every verb), slog and the JSON and text
//     encoders show "[REDACTED]"; its text form comes only from
//     [Key.Secret]. Keys without entropy (all bytes equal, a short repeating
//     pattern) are refused when parsed, loaded or written.
//
// The v2 construction is Tink's (github.com/tink-crypto/tink-go/v2/
// streamingaead/subtle), used through its public API and not re-implemented,
// so a Tink implementation in another language, given the raw key, the same
// parameters and the associated data, decrypts the bytes after the 8-byte
// prefix.
package cipher
