package seal

import "errors"

// Sentinel errors. Errors returned by this package wrap one of them with
// context, so callers branch with errors.Is.
var (
	// ErrMalformed: bytes that should be a Seal structure (EncryptedObject,
	// PTB, certificate, key-server response) are not well formed: bad
	// BCS, wrong lengths, trailing bytes, bad enum tags, invalid points.
	ErrMalformed = errors.New("seal: malformed input")

	// ErrUnsupported: a well-formed structure uses a version or a scheme this
	// package does not implement (EncryptedObject version ≠ 0, a KEM other
	// than Boneh–Franklin BLS12-381, a signature scheme other than Ed25519).
	ErrUnsupported = errors.New("seal: unsupported")

	// ErrInvalidConfig: a key-server configuration or an argument is
	// invalid (threshold out of range, duplicate servers, bad URL).
	ErrInvalidConfig = errors.New("seal: invalid configuration")

	// ErrInvalidKey: a key is malformed, or a user secret key does not verify
	// against its key server's public key.
	ErrInvalidKey = errors.New("seal: invalid key")

	// ErrNotEnoughKeys: fewer than threshold (weighted) verified keys are
	// available to decrypt.
	ErrNotEnoughKeys = errors.New("seal: not enough key servers")

	// ErrInconsistentShares: the decrypted shares do not all lie on one
	// polynomial, so different key-server subsets would decrypt differently.
	ErrInconsistentShares = errors.New("seal: inconsistent shares")

	// ErrNonceMismatch: the recovered encryption randomness does not produce
	// the object's nonce (g2^r ≠ nonce): wrong keys or a forged object.
	ErrNonceMismatch = errors.New("seal: nonce check failed")

	// ErrAuth: the DEM ciphertext does not authenticate (AES-GCM tag or
	// HMAC-CTR MAC).
	ErrAuth = errors.New("seal: authentication failed")

	// ErrInvalidPTB: a programmable transaction is not a valid seal_approve
	// call (the key server's InvalidPTB).
	ErrInvalidPTB = errors.New("seal: invalid seal_approve transaction")

	// ErrInvalidSignature: a signature does not verify.
	ErrInvalidSignature = errors.New("seal: invalid signature")

	// ErrSessionExpired: a session key's TTL has elapsed (or is about to).
	ErrSessionExpired = errors.New("seal: session key expired")

	// ErrKeyServer matches every error answered by a key server; the
	// returned *ServerError says which server, the HTTP status and the kind.
	ErrKeyServer = errors.New("seal: key server error")

	// ErrNoAccess: a key server's policy refused the requester (403 NoAccess).
	ErrNoAccess = errors.New("seal: access denied by policy")
)
