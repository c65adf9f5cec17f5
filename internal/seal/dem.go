package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha3"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"hash"
)

// aesIV is Seal's fixed 16-byte AES-GCM IV. A fixed IV is sound because
// every DEM key is fresh; a 16-byte GCM nonce is hashed by GHASH, so the
// standard 12-byte nonce API would not interoperate.
var aesIV = []byte{138, 55, 153, 253, 198, 46, 121, 219, 160, 128, 89, 7, 214, 156, 148, 220}

func newGCM(key *[KeySize]byte) cipher.AEAD {
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic("seal: aes: " + err.Error()) // 32-byte keys cannot fail
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(aesIV))
	if err != nil {
		panic("seal: gcm: " + err.Error())
	}
	return gcm
}

// aesEncrypt returns ciphertext ‖ 16-byte tag.
func aesEncrypt(key *[KeySize]byte, msg, aad []byte) []byte {
	return newGCM(key).Seal(nil, aesIV, msg, aad)
}

func aesDecrypt(key *[KeySize]byte, blob, aad []byte) ([]byte, error) {
	pt, err := newGCM(key).Open(nil, aesIV, blob, aad)
	if err != nil {
		return nil, fmt.Errorf("%w: AES-256-GCM tag mismatch", ErrAuth)
	}
	return pt, nil
}

var (
	hmacEncTag = []byte("HMAC-CTR-ENC")
	hmacMacTag = []byte("HMAC-CTR-MAC")
)

// hmacCTR XORs msg with the key stream HMAC-SHA3-256(key, "HMAC-CTR-ENC" ‖
// u64le(i)) for 32-byte block i. It is its own inverse.
func hmacCTR(key *[KeySize]byte, msg []byte) []byte {
	out := make([]byte, len(msg))
	mac := hmac.New(func() hash.Hash { return sha3.New256() }, key[:])
	var in [12 + 8]byte
	copy(in[:], hmacEncTag)
	var pad [KeySize]byte
	for i := 0; i*KeySize < len(msg); i++ {
		binary.LittleEndian.PutUint64(in[12:], uint64(i))
		mac.Reset()
		mac.Write(in[:])
		mac.Sum(pad[:0])
		lo := i * KeySize
		hi := min(lo+KeySize, len(msg))
		subtle.XORBytes(out[lo:hi], msg[lo:hi], pad[:hi-lo])
	}
	return out
}

// hmacMAC is HMAC-SHA3-256(key, "HMAC-CTR-MAC" ‖ u64le(len(aad)) ‖ aad ‖ c).
func hmacMAC(key *[KeySize]byte, aad, c []byte) [KeySize]byte {
	mac := hmac.New(func() hash.Hash { return sha3.New256() }, key[:])
	mac.Write(hmacMacTag)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(aad)))
	mac.Write(n[:])
	mac.Write(aad)
	mac.Write(c)
	var out [KeySize]byte
	mac.Sum(out[:0])
	return out
}

func hmacEncrypt(key *[KeySize]byte, msg, aad []byte) ([]byte, [KeySize]byte) {
	c := hmacCTR(key, msg)
	return c, hmacMAC(key, aad, c)
}

func hmacDecrypt(key *[KeySize]byte, c, aad []byte, tag *[KeySize]byte) ([]byte, error) {
	want := hmacMAC(key, aad, c)
	if !hmac.Equal(want[:], tag[:]) {
		return nil, fmt.Errorf("%w: HMAC-256-CTR MAC mismatch", ErrAuth)
	}
	return hmacCTR(key, c), nil
}
