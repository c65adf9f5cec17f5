package repo

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"unicode/utf8"
	"weak"

	"github.com/restic/chunker"
)

// Key derivation labels (docs/format-v3.md §2). Changing any of them is a
// new format version.
const (
	agentSalt      = "hermesd/v3"
	infoObjectKey  = "hermesd/v3 object key"
	infoKeyID      = "hermesd/v3 key id"
	infoPolynomial = "hermesd/v3 chunker polynomial"
	aadPrefix      = "hermesd/v3\x00"
)

// polynomialStream is how many HKDF bytes the chunker polynomial may
// consume: the most HKDF-SHA256 can expand (255 blocks), 1020 candidates of
// 8 bytes. A candidate is irreducible with probability about 1/26, so
// running out has probability below 2^-55.
const polynomialStream = 255 * sha256.Size

// KeySize is the size of a master key and of an agent key.
const KeySize = 32

// KeyIDSize is the size of a key id (hex: twice as many characters).
const KeyIDSize = 8

// MaxIdentityLen bounds an agent identity (a normalized ENS name or a
// configured id) in bytes.
const MaxIdentityLen = 1024

// AgentKey is one agent's repository key:
// HKDF-SHA256(master key, salt "hermesd/v3", info identity). Every other
// key of the agent's repository derives from it, so handing it to a new
// owner reveals nothing about the operator's other agents.
//
// It never prints: every fmt verb, String, GoString and slog show
// "[REDACTED]". Bytes returns the secret for an explicit export.
type AgentKey struct {
	k [KeySize]byte
}

// DeriveAgentKey derives the agent key of identity from a 32-byte master
// key.
func DeriveAgentKey(master [KeySize]byte, identity string) AgentKey {
	b, err := hkdf.Key(sha256.New, master[:], []byte(agentSalt), identity, KeySize)
	if err != nil {
		panic("repo: hkdf: " + err.Error()) // only for lengths HKDF cannot produce
	}
	var k AgentKey
	copy(k.k[:], b)
	return k
}

// NewAgentKey wraps an agent key given directly (a transfer hands one
// agent's key to its new owner).
func NewAgentKey(raw [KeySize]byte) AgentKey { return AgentKey{k: raw} }

// Bytes returns the secret key bytes.
func (k AgentKey) Bytes() [KeySize]byte { return k.k }

// ID returns the key's public id: 16 hex digits of
// HKDF-SHA256(agent key, info "hermesd/v3 key id"). Commits and pack
// headers carry it, so a reader can tell "another agent's snapshot" from
// "tampered", and status can say which key is in use.
func (k AgentKey) ID() string {
	id := k.keyID()
	return hex.EncodeToString(id[:])
}

func (k AgentKey) keyID() (id [KeyIDSize]byte) {
	copy(id[:], subkey(k.k, infoKeyID, KeyIDSize))
	return id
}

const redacted = "[REDACTED]"

// String returns "[REDACTED]".
func (AgentKey) String() string { return redacted }

// GoString returns "[REDACTED]".
func (AgentKey) GoString() string { return redacted }

// Format prints "[REDACTED]" whatever the verb.
func (AgentKey) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// LogValue keeps the key out of structured logs.
func (AgentKey) LogValue() slog.Value { return slog.StringValue(redacted) }

// subkey is HKDF-SHA256(ikm = agent key, salt = empty, info, n bytes).
func subkey(agent [KeySize]byte, info string, n int) []byte {
	b, err := hkdf.Key(sha256.New, agent[:], nil, info, n)
	if err != nil {
		panic("repo: hkdf: " + err.Error())
	}
	return b
}

// Type is an object's type. It is bound into the object's associated
// data, so an object presented as another type does not decrypt.
type Type uint8

// Object types (docs/format-v3.md §3).
const (
	TypeChunk Type = 1 // a piece of file content
	TypeTree  Type = 2 // one directory
	typeIndex Type = 3 // a pack index (associated data only)
)

func (t Type) String() string {
	switch t {
	case TypeChunk:
		return "chunk"
	case TypeTree:
		return "tree"
	case typeIndex:
		return "index"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// NonceSize, TagSize and Overhead describe a stored object:
// nonce[12] ‖ ciphertext ‖ tag[16].
const (
	NonceSize = 12
	TagSize   = 16
	Overhead  = NonceSize + TagSize
)

// Keys holds an agent's derived keys and identity: everything needed to
// seal and open its objects. It is safe for concurrent use.
type Keys struct {
	identity string
	agent    [KeySize]byte
	keyID    [KeyIDSize]byte
	aead     cipher.AEAD
	aad      [4][]byte // per Type: aadPrefix ‖ type ‖ identity (index: header inserted)

	polOnce sync.Once
	pol     chunker.Pol
	polErr  error
	// tables are the polynomial's fingerprint tables (4.6 KB), kept only
	// while a snapshot holds them: rebuilt in ~0.25 ms, they were 5.5 MB
	// of a thousand idle agents' heap.
	tablesMu sync.Mutex
	tables   weak.Pointer[rabin]

	// escrow goes into every head pack (SetEscrow); nil: none.
	escrow []byte

	// rand supplies nonces; crypto/rand unless a test fixes it.
	rand io.Reader
}

// NewKeys derives the working keys of the agent identity from its agent
// key. The identity is bound into every object's associated data.
func NewKeys(key AgentKey, identity string) (*Keys, error) {
	if err := checkIdentity(identity); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(subkey(key.k, infoObjectKey, 32))
	if err != nil {
		return nil, fmt.Errorf("repo: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("repo: %w", err)
	}
	k := &Keys{identity: identity, agent: key.k, keyID: key.keyID(), aead: aead, rand: rand.Reader}
	for _, t := range []Type{TypeChunk, TypeTree, typeIndex} {
		k.aad[t] = append(append([]byte(aadPrefix), byte(t)), identity...)
	}
	return k, nil
}

func checkIdentity(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("repo: empty agent identity")
	case len(id) > MaxIdentityLen:
		return fmt.Errorf("repo: agent identity longer than %d bytes", MaxIdentityLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("repo: agent identity is not valid UTF-8")
	case bytes.IndexByte([]byte(id), 0) >= 0:
		return fmt.Errorf("repo: agent identity contains NUL")
	}
	return nil
}

// Identity returns the agent identity the keys are bound to.
func (k *Keys) Identity() string { return k.identity }

// KeyID returns the agent key's public id (AgentKey.ID).
func (k *Keys) KeyID() string { return hex.EncodeToString(k.keyID[:]) }

// Polynomial returns the agent's Rabin polynomial for content-defined
// chunking: restic/chunker's DerivePolynomial over the HKDF stream
// HKDF-SHA256(agent key, info "hermesd/v3 chunker polynomial"). It is
// computed once.
func (k *Keys) Polynomial() (chunker.Pol, error) {
	k.polOnce.Do(func() {
		stream := subkey(k.agent, infoPolynomial, polynomialStream)
		k.pol, k.polErr = chunker.DerivePolynomial(bytes.NewReader(stream))
		if k.polErr != nil {
			k.polErr = fmt.Errorf("repo: derive chunker polynomial: %w", k.polErr)
			return
		}
		k.polErr = checkDegree(k.pol) // a degree the tables cannot take fails here, once
	})
	return k.pol, k.polErr
}

// chunkTables returns the polynomial's fingerprint tables: the ones a
// snapshot still holds, or new ones.
func (k *Keys) chunkTables() (*rabin, error) {
	pol, err := k.Polynomial()
	if err != nil {
		return nil, err
	}
	k.tablesMu.Lock()
	defer k.tablesMu.Unlock()
	if r := k.tables.Value(); r != nil {
		return r, nil
	}
	r, err := newRabin(pol)
	if err != nil {
		return nil, err
	}
	k.tables = weak.Make(r)
	return r, nil
}

// Seal encrypts plaintext as an object of type t and returns its id
// (SHA-256 of plaintext) and stored form nonce ‖ ciphertext ‖ tag.
func (k *Keys) Seal(t Type, plaintext []byte) (ID, []byte, error) {
	id := ID(sha256.Sum256(plaintext))
	out, err := k.sealTo(make([]byte, 0, len(plaintext)+Overhead), t, plaintext)
	return id, out, err
}

// sealTo appends the stored form of plaintext to dst.
func (k *Keys) sealTo(dst []byte, t Type, plaintext []byte) ([]byte, error) {
	return k.sealAAD(dst, k.aad[t], plaintext)
}

func (k *Keys) sealAAD(dst, aad, plaintext []byte) ([]byte, error) {
	var nonce [NonceSize]byte
	if _, err := io.ReadFull(k.rand, nonce[:]); err != nil {
		return nil, fmt.Errorf("repo: nonce: %w", err)
	}
	dst = append(dst, nonce[:]...)
	return k.aead.Seal(dst, nonce[:], plaintext, aad), nil
}

// Open decrypts a stored object of type t and checks that its plaintext
// hashes to id. An authentication failure matches ErrAuth; a wrong id or
// a length below Overhead matches ErrCorrupt.
func (k *Keys) Open(t Type, id ID, stored []byte) ([]byte, error) {
	return k.openTo(nil, t, id, stored)
}

func (k *Keys) openTo(dst []byte, t Type, id ID, stored []byte) ([]byte, error) {
	plain, err := k.openAAD(dst, k.aad[t], stored)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", t, id.Short(), err)
	}
	if ID(sha256.Sum256(plain)) != id {
		return nil, corruptf("%s %s: content does not hash to its id", t, id.Short())
	}
	return plain, nil
}

// openHashed decrypts a stored object of type t without hashing its
// plaintext against id: only for an object its caller hashes as part of a
// digest that covers it and that it checks (a chunk of a file of several
// chunks, against the file's SHA-256 in its tree). The key still
// authenticates it; what the id check would add is that it is the object
// listed, not another object under this key of the same length, and the
// caller's digest catches that swap.
func (k *Keys) openHashed(dst []byte, t Type, id ID, stored []byte) ([]byte, error) {
	plain, err := k.openAAD(dst, k.aad[t], stored)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", t, id.Short(), err)
	}
	return plain, nil
}

func (k *Keys) openAAD(dst, aad, stored []byte) ([]byte, error) {
	if len(stored) < Overhead {
		return nil, corruptf("object of %d bytes is shorter than nonce and tag", len(stored))
	}
	plain, err := k.aead.Open(dst, stored[:NonceSize], stored[NonceSize:], aad)
	if err != nil {
		return nil, fmt.Errorf("%w: object does not decrypt with this agent's key and identity", ErrAuth)
	}
	return plain, nil
}

// indexAAD is the associated data of a pack index: it binds the plaintext
// pack header and key escrow, so a tampered, swapped or stripped one
// fails the index.
func (k *Keys) indexAAD(header, escrow []byte) []byte {
	aad := make([]byte, 0, len(aadPrefix)+1+len(header)+len(escrow)+len(k.identity))
	aad = append(aad, aadPrefix...)
	aad = append(aad, byte(typeIndex))
	aad = append(aad, header...)
	aad = append(aad, escrow...)
	return append(aad, k.identity...)
}
