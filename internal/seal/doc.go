// Package seal implements Mysten Seal, threshold identity-based encryption
// on BLS12-381, byte-compatible with the official TypeScript SDK
// (@mysten/seal 1.4.12) and Seal's Rust crates: an object encrypted here
// decrypts with the SDK and the other way round.
//
// The scheme, as Seal defines it:
//
//   - Identities are package ID ‖ inner ID. A key server with master key s
//     and public key g2^s hands out user secret keys H1(id)^s, where H1 is
//     RFC 9380 hash-to-G1 (the standard min-sig suite) of
//     "SUI-SEAL-IBE-BLS12381-00" ‖ id.
//   - [Encrypt] draws a 32-byte base key, Shamir-shares it byte by byte over
//     GF(2^8) (threshold t of n, a server listed w times holding w shares),
//     and encrypts share i to its server with Boneh–Franklin: a common nonce
//     g2^r and the pad SHA3-256(H2 ‖ e(H1(id)^r, pk_i) ‖ nonce ‖ H1(id) ‖
//     object ID ‖ index). The randomness r is stored encrypted under a key
//     derived from the base key, so decryption can check g2^r == nonce. The
//     payload is encrypted with the DEM key derived from the base key:
//     AES-256-GCM with Seal's fixed 16-byte IV, HMAC-SHA3-256 in CTR mode,
//     or nothing (Plain: the derived key is the secret).
//   - The bytes are Seal's BCS EncryptedObject ([ParseEncryptedObject],
//     [EncryptedObject.MarshalBinary], [Looks]).
//   - [Decrypt] takes user secret keys, verifies each against its server's
//     public key, combines at least t shares, checks the nonce, and
//     optionally that all shares lie on one polynomial.
//
// Fetching keys ([Client]): a [SessionKey] (an ephemeral Ed25519 key whose
// certificate the user's Sui key signs as a personal message) signs each
// request; the request carries a seal_approve PTB built offline ([Approve])
// and an ephemeral ElGamal key the servers encrypt the user secret keys to.
// The client asks the servers concurrently, stops once the answered weight
// reaches the threshold, verifies every key, retries 429/5xx with backoff
// and 403 InvalidParameter briefly, treats other 4xx as final, bounds every
// response and caches verified keys per (identity, server).
//
// Invariants:
//   - Every point read from outside (objects, responses, requests, config)
//     is a compressed encoding checked to be on the curve, in the prime-order
//     subgroup and not the identity.
//   - Parsers are strict: canonical lengths, known tags, no trailing bytes,
//     and nothing is allocated from an unchecked length.
//   - Keys from key servers are used only after they verify against the
//     configured public key; a wrong key makes that server count as failed.
//   - Secrets (master keys, Sui keys, user secret keys, symmetric keys, API
//     keys) print as [REDACTED] with every fmt verb and in logs; errors
//     never contain them, and name key servers by object ID and
//     scheme://host:port only, because a URL's path or query may hold an
//     API key.
//
// Compatibility notes: the example in Seal's docs/content/SealCLI.mdx was
// produced by an early derivation (its user secret keys hash the identity
// as len ‖ "SUI-SEAL-IBE-BLS12381-00" ‖ id, and its shares use that
// derivation too), so neither this package nor the SDK decrypts it with the
// documented user secret keys; its bytes and symmetric key are asserted
// exactly. Objects from early SDKs with share indices above n parse. Only
// Ed25519 Sui signatures are supported, and only the Boneh–Franklin KEM
// (not the newer ID-ML-KEM variant).
package seal
