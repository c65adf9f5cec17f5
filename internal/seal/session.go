package seal

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"time"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
)

// Session-key limits, as the key server and the SDK enforce them.
const (
	MaxSessionTTL = 30 * time.Minute // the server's default session_key_ttl_max
	// expiryMargin treats a session as expired this long before its TTL
	// ends, as the SDK does (10 s), so requests do not race the deadline.
	expiryMargin = 10 * time.Second
	// DefaultClockSkew backdates a session's creation time: the server
	// refuses a creation time in its future, so a client clock slightly
	// ahead would otherwise fail every request.
	DefaultClockSkew = 15 * time.Second
)

// Signer signs Sui personal messages for an address: a SuiKey, or a wallet.
type Signer interface {
	Address() Address
	SignPersonalMessage(msg []byte) (string, error)
}

// SessionOptions tunes NewSessionKey.
type SessionOptions struct {
	TTL       time.Duration // whole minutes, 1 to 30; default 10 minutes
	MVRName   string        // sign for an MVR name instead of the package ID
	Now       time.Time     // default time.Now()
	ClockSkew time.Duration // backdating of the creation time; default DefaultClockSkew, negative for none
	Rand      io.Reader     // default crypto/rand
}

// SessionKey is an ephemeral Ed25519 key the user's Sui key authorizes, by a
// personal-message signature, to request keys of one package for a TTL.
type SessionKey struct {
	address  Address
	pkg      Address
	mvrName  string
	created  int64 // Unix milliseconds
	ttlMin   uint16
	key      ed25519.PrivateKey
	userSig  string
	randSrc  io.Reader
	deadline time.Time
}

// NewSessionKey creates a session key for package pkg (the policy package's
// first version) and has signer sign its certificate.
func NewSessionKey(signer Signer, pkg Address, opts *SessionOptions) (*SessionKey, error) {
	if opts == nil {
		opts = &SessionOptions{}
	}
	ttl := opts.TTL
	if ttl == 0 {
		ttl = 10 * time.Minute
	}
	if ttl < time.Minute || ttl > MaxSessionTTL || ttl%time.Minute != 0 {
		return nil, fmt.Errorf("%w: session TTL %v must be whole minutes from 1 to 30", ErrInvalidConfig, ttl)
	}
	if opts.MVRName != "" && len(opts.MVRName) > 256 {
		return nil, fmt.Errorf("%w: MVR name too long", ErrInvalidConfig)
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	skew := opts.ClockSkew
	if skew == 0 {
		skew = DefaultClockSkew
	} else if skew < 0 {
		skew = 0
	}
	rnd := opts.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	_, priv, err := ed25519.GenerateKey(rnd)
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	created := now.Add(-skew)
	s := &SessionKey{
		address: signer.Address(),
		pkg:     pkg,
		mvrName: opts.MVRName,
		created: created.UnixMilli(),
		ttlMin:  uint16(ttl / time.Minute),
		key:     priv,
		randSrc: rnd,
	}
	s.deadline = time.UnixMilli(s.created).Add(ttl - expiryMargin)
	sig, err := signer.SignPersonalMessage([]byte(s.PersonalMessage()))
	if err != nil {
		return nil, fmt.Errorf("session key: sign certificate: %w", err)
	}
	s.userSig = sig
	return s, nil
}

// Address is the user the session acts for.
func (s *SessionKey) Address() Address { return s.address }

// PackageID is the package namespace the session may request keys for.
func (s *SessionKey) PackageID() Address { return s.pkg }

// Expired reports whether the session is past its TTL (less a 10 s margin).
func (s *SessionKey) Expired(now time.Time) bool { return !now.Before(s.deadline) }

// PersonalMessage is the text the user's key signs.
func (s *SessionKey) PersonalMessage() string {
	name := s.pkg.String()
	if s.mvrName != "" {
		name = s.mvrName
	}
	return PersonalMessage(name, s.key.Public().(ed25519.PublicKey), s.created, s.ttlMin)
}

// PersonalMessage formats the session-key message the key server verifies:
// "Accessing keys of package {pkg} for {ttl} mins from {YYYY-MM-DD HH:MM:SS}
// UTC, session key {base64 vk}", with the time truncated to the second.
func PersonalMessage(pkg string, sessionVK ed25519.PublicKey, creationMs int64, ttlMin uint16) string {
	t := time.Unix(creationMs/1000, 0).UTC()
	return fmt.Sprintf("Accessing keys of package %s for %d mins from %s UTC, session key %s",
		pkg, ttlMin, t.Format(time.DateTime), base64.StdEncoding.EncodeToString(sessionVK))
}

// Certificate is the session certificate sent with every key request.
type Certificate struct {
	User         Address `json:"user"`
	SessionVK    string  `json:"session_vk"`    // base64 of the 32-byte Ed25519 key
	CreationTime int64   `json:"creation_time"` // Unix milliseconds
	TTLMin       uint16  `json:"ttl_min"`
	Signature    string  `json:"signature"` // serialized Sui signature, base64
	MVRName      *string `json:"mvr_name"`
}

// Certificate returns the session's certificate.
func (s *SessionKey) Certificate() Certificate {
	c := Certificate{
		User:         s.address,
		SessionVK:    base64.StdEncoding.EncodeToString(s.key.Public().(ed25519.PublicKey)),
		CreationTime: s.created,
		TTLMin:       s.ttlMin,
		Signature:    s.userSig,
	}
	if s.mvrName != "" {
		name := s.mvrName
		c.MVRName = &name
	}
	return c
}

// SignedRequest is the BCS of the struct the session key signs for a key
// request: three vector<u8> fields, the PTB's BCS, the 48-byte ElGamal
// public key and the 96-byte ElGamal verification key.
func SignedRequest(ptb, encKey, encVK []byte) []byte {
	w := &bcsWriter{}
	w.bytes(ptb)
	w.bytes(encKey)
	w.bytes(encVK)
	return w.b
}

// FetchKeyRequest is the JSON body of POST /v1/fetch_key.
type FetchKeyRequest struct {
	PTB                string      `json:"ptb"`                  // base64 of the PTB's BCS
	EncKey             string      `json:"enc_key"`              // base64 G1: ElGamal public key g1^esk
	EncVerificationKey string      `json:"enc_verification_key"` // base64 G2: g2^esk
	RequestSignature   string      `json:"request_signature"`    // base64 Ed25519 over SignedRequest
	Certificate        Certificate `json:"certificate"`
}

// FetchKeyRequest signs a fetch_key request for a PTB's BCS with a fresh
// ElGamal key, which it discards: the answer cannot be decrypted. It is for
// probing and testing key servers; Client makes the requests it uses.
func (s *SessionKey) FetchKeyRequest(ptb []byte) (*FetchKeyRequest, error) {
	req, _, err := s.newRequest(ptb)
	return req, err
}

// elgamalKey is the ephemeral key the servers encrypt user secret keys to.
type elgamalKey struct {
	sk fr.Element
}

// newRequest builds a fetch_key request for a PTB with a fresh ElGamal key.
func (s *SessionKey) newRequest(ptb []byte) (*FetchKeyRequest, *elgamalKey, error) {
	esk, err := randomScalar(s.randSrc)
	if err != nil {
		return nil, nil, fmt.Errorf("request key: %w", err)
	}
	pk, vk := g1Base(&esk), g2Base(&esk)
	pkb, vkb := pk.Bytes(), vk.Bytes()
	sig := ed25519.Sign(s.key, SignedRequest(ptb, pkb[:], vkb[:]))
	return &FetchKeyRequest{
		PTB:                base64.StdEncoding.EncodeToString(ptb),
		EncKey:             base64.StdEncoding.EncodeToString(pkb[:]),
		EncVerificationKey: base64.StdEncoding.EncodeToString(vkb[:]),
		RequestSignature:   base64.StdEncoding.EncodeToString(sig),
		Certificate:        s.Certificate(),
	}, &elgamalKey{sk: esk}, nil
}

// decrypt opens an ElGamal ciphertext (c1, c2) = (g1^r, m + pk^r): m = c2 - esk·c1.
func (k *elgamalKey) decrypt(c1, c2 *bls.G1Affine) bls.G1Affine {
	t := g1Mul(c1, &k.sk)
	var m bls.G1Affine
	m.Sub(c2, &t)
	return m
}

// ElGamalEncrypt encrypts a G1 point to an ElGamal public key, as a key
// server does with a user secret key: (g1^r, m + pk^r). encKey is untrusted
// and is checked to be a valid G1 point.
func ElGamalEncrypt(rnd io.Reader, usk *UserSecretKey, encKey []byte) (c1, c2 [G1Size]byte, err error) {
	pk, err := decodeG1(encKey)
	if err != nil {
		return c1, c2, fmt.Errorf("%w: ElGamal key: %w", ErrMalformed, err)
	}
	r, err := randomScalar(rnd)
	if err != nil {
		return c1, c2, err
	}
	a := g1Base(&r)
	b := g1Mul(&pk, &r)
	b.Add(&b, &usk.p)
	return a.Bytes(), b.Bytes(), nil
}
