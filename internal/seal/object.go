package seal

import (
	"fmt"
)

// MaxServices is the most key-server shares an object can have: share
// indices are a u8 starting at 1.
const MaxServices = 255

// DEM selects how the payload is encrypted under the derived key.
type DEM uint8

// The Ciphertext variants, with their BCS enum tags.
const (
	// AESGCM: AES-256-GCM with Seal's fixed 16-byte IV (the SDK default).
	AESGCM DEM = 0
	// HMACCTR: CTR mode with HMAC-SHA3-256 as the PRF and a MAC; the variant
	// Move can decrypt on chain.
	HMACCTR DEM = 1
	// Plain: no payload; decryption yields the derived key itself (Seal as a
	// key-management service).
	Plain DEM = 2
)

func (d DEM) String() string {
	switch d {
	case AESGCM:
		return "AES-256-GCM"
	case HMACCTR:
		return "HMAC-256-CTR"
	case Plain:
		return "Plain"
	}
	return fmt.Sprintf("DEM(%d)", uint8(d))
}

// ibeBonehFranklin is the IBEEncryptions tag of BonehFranklinBLS12381.
// Tag 1 (IdMlKemMntru) exists in newer Seal and is refused as unsupported.
const ibeBonehFranklin = 0

// Service is one share of an object: the key server holding it and the share
// index (1..n). A server listed several times holds several shares (weight).
type Service struct {
	ObjectID Address
	Index    uint8
}

// EncryptedObject is Seal's BCS EncryptedObject, the bytes the SDK returns
// and stores, with the Boneh–Franklin BLS12-381 KEM.
//
// Slices returned by ParseEncryptedObject alias the parsed buffer.
type EncryptedObject struct {
	Version   uint8
	PackageID Address // the policy package (namespace) of the identity
	ID        []byte  // the inner identity, without the package prefix
	Services  []Service
	Threshold uint8

	Nonce               [G2Size]byte // g2^r, compressed
	EncryptedShares     [][KeySize]byte
	EncryptedRandomness [KeySize]byte

	DEM  DEM
	Blob []byte        // AES-GCM ciphertext ‖ tag, or HMAC-CTR ciphertext; nil for Plain
	AAD  []byte        // nil means None; a non-nil empty slice is Some([])
	MAC  [KeySize]byte // HMAC-CTR only
}

// FullID is the identity the key servers derive keys for: package ID ‖ ID.
func (o *EncryptedObject) FullID() []byte { return FullID(o.PackageID, o.ID) }

// FullID concatenates a package ID and an inner ID.
func FullID(pkg Address, id []byte) []byte {
	out := make([]byte, 0, AddressSize+len(id))
	out = append(out, pkg[:]...)
	return append(out, id...)
}

// AllowlistID is the inner identity the reference runtime encrypts
// snapshots to: the allowlist object ID's 32 bytes followed by the UTF-8 of
// the agent's id. Its allowlist policy checks that prefix and membership.
func AllowlistID(allowlist Address, id string) []byte {
	out := make([]byte, 0, AddressSize+len(id))
	out = append(out, allowlist[:]...)
	return append(out, id...)
}

// Weights returns how many shares each key server holds.
func (o *EncryptedObject) Weights() map[Address]int {
	w := make(map[Address]int, len(o.Services))
	for _, s := range o.Services {
		w[s.ObjectID]++
	}
	return w
}

// Looks reports whether b plausibly starts an EncryptedObject: version 0, a
// well-formed header (package, ID, services with valid indices, threshold)
// and the Boneh–Franklin tag. It validates no points and is cheap; use it to
// tell a Seal blob from other formats, then ParseEncryptedObject.
func Looks(b []byte) bool {
	r := &bcsReader{b: b}
	_, err := readHeader(r)
	return err == nil && r.u8() == ibeBonehFranklin && r.err == nil
}

type header struct {
	pkg       Address
	id        []byte
	services  []Service
	threshold uint8
}

func readHeader(r *bcsReader) (header, error) {
	var h header
	if v := r.u8(); r.err == nil && v != 0 {
		return h, fmt.Errorf("%w: EncryptedObject version %d", ErrUnsupported, v)
	}
	copy(h.pkg[:], r.take(AddressSize))
	h.id = r.bytes()
	n := r.length(AddressSize + 1)
	if r.err == nil && (n == 0 || n > MaxServices) {
		return h, fmt.Errorf("%w: %d key-server services, want 1 to %d", ErrMalformed, n, MaxServices)
	}
	h.services = make([]Service, n)
	var seen [256]bool
	for i := range h.services {
		copy(h.services[i].ObjectID[:], r.take(AddressSize))
		idx := r.u8()
		if r.err != nil {
			break
		}
		// Index 0 would be the secret itself. Indices above n are legal:
		// early SDKs drew random distinct indices.
		if idx == 0 {
			return h, fmt.Errorf("%w: share index 0", ErrMalformed)
		}
		if seen[idx] {
			return h, fmt.Errorf("%w: duplicate share index %d", ErrMalformed, idx)
		}
		seen[idx] = true
		h.services[i].Index = idx
	}
	h.threshold = r.u8()
	if r.err != nil {
		return h, fmt.Errorf("%w: %w", ErrMalformed, r.err)
	}
	if h.threshold == 0 || int(h.threshold) > n {
		return h, fmt.Errorf("%w: threshold %d of %d shares", ErrMalformed, h.threshold, n)
	}
	return h, nil
}

// ParseEncryptedObject decodes the BCS bytes of an EncryptedObject strictly:
// trailing bytes, unknown enum or option tags, non-canonical lengths, a
// version other than 0, a threshold of 0 or above the number of shares,
// duplicate or out-of-range share indices, more than 255 services, a share
// count that differs from the services, and a nonce that is not a valid G2
// point are all refused with ErrMalformed or ErrUnsupported.
func ParseEncryptedObject(b []byte) (*EncryptedObject, error) {
	r := &bcsReader{b: b}
	h, err := readHeader(r)
	if err != nil {
		return nil, fmt.Errorf("parse encrypted object: %w", err)
	}
	o := &EncryptedObject{PackageID: h.pkg, ID: h.id, Services: h.services, Threshold: h.threshold}
	switch tag := r.uleb(); {
	case r.err != nil:
	case tag == 1:
		return nil, fmt.Errorf("parse encrypted object: %w: KEM IdMlKemMntru (only Boneh-Franklin BLS12-381 is implemented)", ErrUnsupported)
	case tag != ibeBonehFranklin:
		return nil, fmt.Errorf("parse encrypted object: %w: unknown KEM tag %d", ErrMalformed, tag)
	}
	copy(o.Nonce[:], r.take(G2Size))
	n := r.length(KeySize)
	if r.err == nil && n != len(o.Services) {
		return nil, fmt.Errorf("parse encrypted object: %w: %d encrypted shares for %d services", ErrMalformed, n, len(o.Services))
	}
	o.EncryptedShares = make([][KeySize]byte, n)
	for i := range o.EncryptedShares {
		copy(o.EncryptedShares[i][:], r.take(KeySize))
	}
	copy(o.EncryptedRandomness[:], r.take(KeySize))
	switch tag := r.uleb(); {
	case r.err != nil:
	case tag == uint64(AESGCM), tag == uint64(HMACCTR):
		o.DEM = DEM(tag)
		o.Blob = r.bytes()
		if r.option() {
			o.AAD = r.bytes()
			if o.AAD == nil && r.err == nil {
				o.AAD = []byte{}
			}
		}
		if o.DEM == HMACCTR {
			copy(o.MAC[:], r.take(KeySize))
		}
	case tag == uint64(Plain):
		o.DEM = Plain
	default:
		return nil, fmt.Errorf("parse encrypted object: %w: unknown ciphertext tag %d", ErrMalformed, tag)
	}
	if err := r.finish(); err != nil {
		return nil, fmt.Errorf("parse encrypted object: %w: %w", ErrMalformed, err)
	}
	if _, err := decodeG2(o.Nonce[:]); err != nil {
		return nil, fmt.Errorf("parse encrypted object: %w: nonce: %w", ErrMalformed, err)
	}
	return o, nil
}

// MarshalBinary returns the object's BCS bytes.
func (o *EncryptedObject) MarshalBinary() ([]byte, error) {
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("marshal encrypted object: %w", err)
	}
	size := 1 + AddressSize + ulebLen(uint64(len(o.ID))) + len(o.ID) +
		ulebLen(uint64(len(o.Services))) + len(o.Services)*(AddressSize+1) + 1 +
		1 + G2Size + ulebLen(uint64(len(o.EncryptedShares))) + len(o.EncryptedShares)*KeySize + KeySize +
		1 + ulebLen(uint64(len(o.Blob))) + len(o.Blob) + 1 + ulebLen(uint64(len(o.AAD))) + len(o.AAD) + KeySize
	w := &bcsWriter{b: make([]byte, 0, size)}
	w.u8(o.Version)
	w.raw(o.PackageID[:])
	w.bytes(o.ID)
	w.uleb(uint64(len(o.Services)))
	for _, s := range o.Services {
		w.raw(s.ObjectID[:])
		w.u8(s.Index)
	}
	w.u8(o.Threshold)
	w.uleb(ibeBonehFranklin)
	w.raw(o.Nonce[:])
	w.uleb(uint64(len(o.EncryptedShares)))
	for i := range o.EncryptedShares {
		w.raw(o.EncryptedShares[i][:])
	}
	w.raw(o.EncryptedRandomness[:])
	w.uleb(uint64(o.DEM))
	if o.DEM != Plain {
		w.bytes(o.Blob)
		if o.AAD == nil {
			w.u8(0)
		} else {
			w.u8(1)
			w.bytes(o.AAD)
		}
		if o.DEM == HMACCTR {
			w.raw(o.MAC[:])
		}
	}
	return w.b, nil
}

// validate checks what MarshalBinary relies on, with the parser's rules.
func (o *EncryptedObject) validate() error {
	n := len(o.Services)
	switch {
	case o.Version != 0:
		return fmt.Errorf("%w: version %d", ErrUnsupported, o.Version)
	case n == 0 || n > MaxServices:
		return fmt.Errorf("%w: %d services, want 1 to %d", ErrInvalidConfig, n, MaxServices)
	case o.Threshold == 0 || int(o.Threshold) > n:
		return fmt.Errorf("%w: threshold %d of %d shares", ErrInvalidConfig, o.Threshold, n)
	case len(o.EncryptedShares) != n:
		return fmt.Errorf("%w: %d encrypted shares for %d services", ErrInvalidConfig, len(o.EncryptedShares), n)
	case o.DEM > Plain:
		return fmt.Errorf("%w: %v", ErrUnsupported, o.DEM)
	}
	var seen [256]bool
	for _, s := range o.Services {
		if s.Index == 0 || seen[s.Index] {
			return fmt.Errorf("%w: share index %d is zero or repeated", ErrInvalidConfig, s.Index)
		}
		seen[s.Index] = true
	}
	return nil
}
