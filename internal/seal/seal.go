package seal

import (
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
)

// Key is the symmetric key of one encryption: the DEM key derived from the
// base key. Whoever holds it decrypts the object without any key server
// ([DecryptWithKey]); keep it as a disaster-recovery backup or discard it.
// It prints as [REDACTED] with every fmt verb.
type Key [KeySize]byte

func (k Key) String() string             { return redacted }
func (k Key) GoString() string           { return redacted }
func (k Key) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }
func (k Key) LogValue() slog.Value       { return slog.StringValue(redacted) }

// EncryptOptions tunes Encrypt. The zero value is AES-256-GCM without
// associated data and crypto/rand.
type EncryptOptions struct {
	DEM  DEM
	AAD  []byte    // associated data for AESGCM/HMACCTR; nil encodes None
	Rand io.Reader // nil: crypto/rand
}

// Encrypt encrypts plaintext to identity cfg.PackageID ‖ id under the
// configured key servers and threshold: each server holds Weight shares, in
// configuration order. It returns the EncryptedObject bytes and the
// symmetric key. With DEM Plain, plaintext must be empty and the returned key
// is what decryption yields.
func Encrypt(cfg *Config, id, plaintext []byte, opts *EncryptOptions) ([]byte, Key, error) {
	o, key, err := EncryptObject(cfg, id, plaintext, opts)
	if err != nil {
		return nil, Key{}, err
	}
	b, err := o.MarshalBinary()
	if err != nil {
		return nil, Key{}, fmt.Errorf("encrypt: %w", err)
	}
	return b, key, nil
}

// EncryptObject is Encrypt returning the structure instead of its bytes.
func EncryptObject(cfg *Config, id, plaintext []byte, opts *EncryptOptions) (*EncryptedObject, Key, error) {
	if opts == nil {
		opts = &EncryptOptions{}
	}
	if err := cfg.validate(false); err != nil {
		return nil, Key{}, fmt.Errorf("encrypt: %w", err)
	}
	if opts.DEM > Plain {
		return nil, Key{}, fmt.Errorf("encrypt: %w: %v", ErrUnsupported, opts.DEM)
	}
	if opts.DEM == Plain && len(plaintext) > 0 {
		return nil, Key{}, fmt.Errorf("encrypt: %w: the Plain DEM encrypts no payload", ErrInvalidConfig)
	}
	rnd := opts.Rand
	if rnd == nil {
		rnd = rand.Reader
	}

	o := &EncryptedObject{PackageID: cfg.PackageID, ID: append([]byte{}, id...), Threshold: uint8(cfg.Threshold), DEM: opts.DEM}
	var pks []*PublicKey
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		for w := 0; w < s.weight(); w++ {
			o.Services = append(o.Services, Service{ObjectID: s.ObjectID, Index: uint8(len(o.Services) + 1)})
			pks = append(pks, &s.PublicKey)
		}
	}

	var base [KeySize]byte
	if _, err := io.ReadFull(rnd, base[:]); err != nil {
		return nil, Key{}, fmt.Errorf("encrypt: base key: %w", err)
	}
	shares, err := split(rnd, &base, cfg.Threshold, len(o.Services))
	if err != nil {
		return nil, Key{}, fmt.Errorf("encrypt: %w", err)
	}
	r, err := randomScalar(rnd)
	if err != nil {
		return nil, Key{}, fmt.Errorf("encrypt: %w", err)
	}
	nonce := g2Base(&r)
	o.Nonce = nonce.Bytes()
	gid := hashID(o.FullID())
	gidBytes := gid.Bytes()
	gidR := g1Mul(&gid, &r)

	// A weighted server's shares use the same pairing value; compute it once.
	pairings := map[Address]*bls.GT{}
	o.EncryptedShares = make([][KeySize]byte, len(o.Services))
	for i, svc := range o.Services {
		x, ok := pairings[svc.ObjectID]
		if !ok {
			v := pair(&gidR, &pks[i].p)
			x = &v
			pairings[svc.ObjectID] = x
		}
		pad := kdf(x, &o.Nonce, &gidBytes, svc.ObjectID, svc.Index)
		o.EncryptedShares[i] = xor32(&shares[i].value, &pad)
	}

	rKey := deriveKey(purposeRandomness, &base, o.Threshold, o.EncryptedShares, o.Services)
	rBytes := r.Bytes()
	o.EncryptedRandomness = xor32(&rBytes, &rKey)
	demKey := deriveKey(purposeDEM, &base, o.Threshold, o.EncryptedShares, o.Services)

	switch opts.DEM {
	case AESGCM:
		o.Blob = aesEncrypt(&demKey, plaintext, opts.AAD)
		o.AAD = cloneAAD(opts.AAD)
	case HMACCTR:
		o.Blob, o.MAC = hmacEncrypt(&demKey, plaintext, opts.AAD)
		o.AAD = cloneAAD(opts.AAD)
	}
	return o, Key(demKey), nil
}

func cloneAAD(aad []byte) []byte {
	if aad == nil {
		return nil
	}
	return append([]byte{}, aad...)
}

// DecryptOptions tunes Decrypt.
type DecryptOptions struct {
	// CheckShareConsistency decrypts every share with the recovered
	// randomness and checks they all lie on one polynomial, so any subset of
	// key servers would decrypt to the same plaintext. It needs the public
	// key of every service in the object. Use it when the encryptor is not
	// trusted.
	CheckShareConsistency bool
}

// Decrypt decrypts an object with user secret keys for its full ID, one per
// key-server object ID. Every key is verified against its server's public
// key in pks before use; a key that does not verify is an error (the client
// drops such keys before they get here). It returns the plaintext or, for the
// Plain DEM, the derived key.
func Decrypt(o *EncryptedObject, keys map[Address]*UserSecretKey, pks map[Address]PublicKey, opts *DecryptOptions) ([]byte, error) {
	fullID := o.FullID()
	for id, k := range keys {
		if !o.hasServer(id) {
			continue
		}
		pk, ok := pks[id]
		if !ok || pk.IsZero() {
			return nil, fmt.Errorf("decrypt: %w: no public key for key server %s", ErrInvalidConfig, id)
		}
		if err := k.Verify(fullID, pk); err != nil {
			return nil, fmt.Errorf("decrypt: key server %s: %w", id, err)
		}
	}
	return decryptVerified(o, keys, pks, opts)
}

func (o *EncryptedObject) hasServer(id Address) bool {
	for _, s := range o.Services {
		if s.ObjectID == id {
			return true
		}
	}
	return false
}

// decryptVerified is Decrypt for keys already verified.
func decryptVerified(o *EncryptedObject, keys map[Address]*UserSecretKey, pks map[Address]PublicKey, opts *DecryptOptions) ([]byte, error) {
	if opts == nil {
		opts = &DecryptOptions{}
	}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}
	nonce, err := decodeG2(o.Nonce[:])
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w: nonce: %w", ErrMalformed, err)
	}
	gid := hashID(o.FullID())
	gidBytes := gid.Bytes()

	pairings := map[Address]*bls.GT{}
	var shares []share
	for i, svc := range o.Services {
		k, ok := keys[svc.ObjectID]
		if !ok {
			continue
		}
		x, ok := pairings[svc.ObjectID]
		if !ok {
			v := pair(&k.p, &nonce)
			x = &v
			pairings[svc.ObjectID] = x
		}
		pad := kdf(x, &o.Nonce, &gidBytes, svc.ObjectID, svc.Index)
		shares = append(shares, share{index: svc.Index, value: xor32(&o.EncryptedShares[i], &pad)})
	}
	if len(shares) < int(o.Threshold) {
		return nil, fmt.Errorf("decrypt: %w: keys for %d of %d shares, threshold %d", ErrNotEnoughKeys, len(shares), len(o.Services), o.Threshold)
	}
	base, err := combine(shares)
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}

	rKey := deriveKey(purposeRandomness, &base, o.Threshold, o.EncryptedShares, o.Services)
	rBytes := xor32(&o.EncryptedRandomness, &rKey)
	r, err := scalarFromBytes(rBytes[:])
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w: recovered randomness is not a scalar", ErrNonceMismatch)
	}
	check := g2Base(&r)
	if !check.Equal(&nonce) {
		return nil, fmt.Errorf("decrypt: %w: g2^r differs from the object's nonce", ErrNonceMismatch)
	}

	if opts.CheckShareConsistency {
		if err := checkConsistency(o, shares, &gid, &gidBytes, &r, pks); err != nil {
			return nil, fmt.Errorf("decrypt: %w", err)
		}
	}

	demKey := deriveKey(purposeDEM, &base, o.Threshold, o.EncryptedShares, o.Services)
	return demDecrypt(o, &demKey)
}

// checkConsistency re-derives every share with the randomness r and the
// public keys and checks it equals the polynomial through the shares used.
func checkConsistency(o *EncryptedObject, shares []share, gid *bls.G1Affine, gidBytes *[G1Size]byte, r *fr.Element, pks map[Address]PublicKey) error {
	gidR := g1Mul(gid, r)
	pairings := map[Address]*bls.GT{}
	for i, svc := range o.Services {
		pk, ok := pks[svc.ObjectID]
		if !ok || pk.IsZero() {
			return fmt.Errorf("%w: the share consistency check needs the public key of key server %s", ErrInvalidConfig, svc.ObjectID)
		}
		x, ok := pairings[svc.ObjectID]
		if !ok {
			v := pair(&gidR, &pk.p)
			x = &v
			pairings[svc.ObjectID] = x
		}
		pad := kdf(x, &o.Nonce, gidBytes, svc.ObjectID, svc.Index)
		got := xor32(&o.EncryptedShares[i], &pad)
		want, err := interpolateAt(shares, svc.Index)
		if err != nil {
			return err
		}
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return fmt.Errorf("%w: share %d (key server %s) is not on the polynomial of the others", ErrInconsistentShares, svc.Index, svc.ObjectID)
		}
	}
	return nil
}

// DecryptWithKey decrypts an object's payload with its symmetric key (the
// backup key Encrypt returns), without key servers. For the Plain DEM it
// returns the key.
func DecryptWithKey(o *EncryptedObject, key Key) ([]byte, error) {
	k := [KeySize]byte(key)
	return demDecrypt(o, &k)
}

func demDecrypt(o *EncryptedObject, key *[KeySize]byte) ([]byte, error) {
	switch o.DEM {
	case AESGCM:
		return aesDecrypt(key, o.Blob, o.AAD)
	case HMACCTR:
		return hmacDecrypt(key, o.Blob, o.AAD, &o.MAC)
	case Plain:
		return append([]byte{}, key[:]...), nil
	}
	return nil, fmt.Errorf("decrypt: %w: %v", ErrUnsupported, o.DEM)
}
