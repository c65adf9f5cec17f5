package localwalrus

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/zeebo/blake3"
	"golang.org/x/crypto/blake2b"

	"github.com/hermesd/hermesd/internal/atomicfile"
)

// store keeps blobs under dir/blobs as <hex id>.blob with a <hex id>.json
// metadata file beside each. Files are named by the hex of the id, not the
// base64 text, because base64 ids differ only in case on case-insensitive
// filesystems.
type store struct {
	blobs string
	tmp   string
	mu    sync.Mutex // serializes metadata read-modify-write
}

type registration struct {
	ObjectID        string `json:"objectId"`
	StorageID       string `json:"storageId"`
	RegisteredEpoch uint32 `json:"registeredEpoch"`
	CertifiedEpoch  uint32 `json:"certifiedEpoch"`
	EndEpoch        uint32 `json:"endEpoch"` // exclusive
	Permanent       bool   `json:"permanent"`
	// Owner is where the Blob object went: "" for the publisher's own
	// wallet, a Sui address for send_object_to, "shared" for share=true.
	Owner          string `json:"owner,omitempty"`
	SharedObjectID string `json:"sharedObjectId,omitempty"`
	TxDigest       string `json:"txDigest"`
}

type blobMeta struct {
	Version       int            `json:"version"`
	BlobID        string         `json:"blobId"`
	Size          int64          `json:"size"`
	Registrations []registration `json:"registrations"`
}

func openStore(dir string) (*store, error) {
	st := &store{blobs: filepath.Join(dir, "blobs"), tmp: filepath.Join(dir, "tmp")}
	for _, d := range []string{dir, st.blobs, st.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("localwalrus: %w", err)
		}
	}
	// Uploads interrupted by a crash are garbage.
	if ents, err := os.ReadDir(st.tmp); err == nil {
		for _, e := range ents {
			os.Remove(filepath.Join(st.tmp, e.Name()))
		}
	}
	return st, nil
}

func (st *store) dataPath(key string) string { return filepath.Join(st.blobs, key+".blob") }
func (st *store) metaPath(key string) string { return filepath.Join(st.blobs, key+".json") }

// newUpload creates the temporary file an upload streams into.
func (st *store) newUpload() (*os.File, error) {
	return os.CreateTemp(st.tmp, "upload-*")
}

// loadMeta returns the blob's metadata, nil if there is none.
func (st *store) loadMeta(key string) (*blobMeta, error) {
	data, err := os.ReadFile(st.metaPath(key))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m blobMeta
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("parse %s: %w", st.metaPath(key), err)
	}
	return &m, nil
}

func (st *store) saveMeta(key string, m *blobMeta) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(st.metaPath(key), append(data, '\n'), 0o644)
}

// live drops registrations that have expired at epoch now.
func live(m *blobMeta, now uint32) []registration {
	var out []registration
	for _, r := range m.Registrations {
		if r.EndEpoch > now {
			out = append(out, r)
		}
	}
	return out
}

// lookup returns the metadata and data path of a blob readable at epoch
// now, or nil. A blob with no live registration is removed.
func (st *store) lookup(id [32]byte, now uint32) (*blobMeta, string, error) {
	key := hex.EncodeToString(id[:])
	st.mu.Lock()
	defer st.mu.Unlock()
	m, err := st.loadMeta(key)
	if err != nil || m == nil {
		return nil, "", err
	}
	if regs := live(m, now); len(regs) == 0 {
		// Expired: collect the garbage.
		os.Remove(st.metaPath(key))
		os.Remove(st.dataPath(key))
		return nil, "", nil
	}
	return m, st.dataPath(key), nil
}

type putParams struct {
	epochs       uint32
	permanent    bool
	force        bool
	share        bool
	sendObjectTo string
}

// putOutcome is what a store decided: a new registration or an existing
// certified one.
type putOutcome struct {
	already bool
	reg     registration
}

// commit registers an upload whose content (already fsynced in tmpPath)
// hashes to id. It consumes tmpPath.
func (st *store) commit(tmpPath string, id [32]byte, blobID string, size int64, now uint32, p putParams) (putOutcome, error) {
	key := hex.EncodeToString(id[:])
	st.mu.Lock()
	defer st.mu.Unlock()
	defer os.Remove(tmpPath) // no-op after the rename below

	m, err := st.loadMeta(key)
	if err != nil {
		return putOutcome{}, err
	}
	if m == nil {
		m = &blobMeta{Version: 1, BlobID: blobID, Size: size}
	}
	m.Registrations = live(m, now)
	target := now + p.epochs
	if !p.force {
		// As the publisher does: a certified blob that lives to at least
		// the target epoch satisfies the request if it is permanent, or,
		// for a deletable request, if the publisher itself owns it.
		for _, r := range m.Registrations {
			if r.EndEpoch < target {
				continue
			}
			if r.Permanent || (!p.permanent && r.Owner == "") {
				return putOutcome{already: true, reg: r}, nil
			}
		}
	}
	if _, err := os.Stat(st.dataPath(key)); len(m.Registrations) == 0 || err != nil {
		if err := os.Rename(tmpPath, st.dataPath(key)); err != nil {
			return putOutcome{}, err
		}
		if err := atomicfile.SyncDir(st.blobs); err != nil {
			return putOutcome{}, err
		}
	}
	r := registration{
		ObjectID:        randomObjectID(),
		StorageID:       randomObjectID(),
		RegisteredEpoch: now,
		CertifiedEpoch:  now,
		EndEpoch:        target,
		Permanent:       p.permanent,
		TxDigest:        randomDigest(),
	}
	switch {
	case p.share:
		r.Owner = "shared"
		r.SharedObjectID = randomObjectID()
	case p.sendObjectTo != "":
		r.Owner = p.sendObjectTo
	}
	m.Registrations = append(m.Registrations, r)
	if err := st.saveMeta(key, m); err != nil {
		return putOutcome{}, err
	}
	return putOutcome{reg: r}, nil
}

// blobIDHasher computes the simulated blob id (see the package doc) while
// an upload streams through it.
type blobIDHasher struct {
	h hash.Hash
	n int64
}

func newBlobIDHasher() *blobIDHasher {
	// The content digest is BLAKE3, not Blake2b or SHA-256: this server
	// shares its host with the client it stands in for (a real publisher
	// computes ids elsewhere), and BLAKE3 costs half of SHA-256 with SHA
	// extensions, a third of Blake2b, on one core.
	return &blobIDHasher{h: blake3.New()}
}

func (b *blobIDHasher) Write(p []byte) (int, error) {
	b.n += int64(len(p))
	return b.h.Write(p)
}

func (b *blobIDHasher) Sum() [32]byte {
	outer, _ := blake2b.New256(nil)
	outer.Write([]byte("localwalrus/blob-id/v3\x00"))
	outer.Write([]byte{1}) // RS2
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(b.n))
	outer.Write(n[:])
	outer.Write(b.h.Sum(nil))
	var id [32]byte
	outer.Sum(id[:0])
	return id
}

// BlobID returns the id the server gives content (see the package doc).
func BlobID(content []byte) string {
	h := newBlobIDHasher()
	h.Write(content)
	id := h.Sum()
	return encodeBlobID(id)
}

func encodeBlobID(id [32]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// decodeBlobID parses a blob id as the real aggregator does: URL-safe
// base64 without padding, exactly 32 bytes.
func decodeBlobID(s string) ([32]byte, bool) {
	var id [32]byte
	if len(s) != 43 {
		return id, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != 32 {
		return id, false
	}
	copy(id[:], b)
	return id, true
}

func randomObjectID() string {
	var b [32]byte
	rand.Read(b[:])
	return "0x" + hex.EncodeToString(b[:])
}

// randomDigest is a Sui-style transaction digest: base58 of 32 bytes.
func randomDigest() string {
	var b [32]byte
	rand.Read(b[:])
	return base58(b[:])
}

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

func base58(b []byte) string {
	n := new(big.Int).SetBytes(b)
	radix := big.NewInt(58)
	mod := new(big.Int)
	var out []byte
	for n.Sign() > 0 {
		n.DivMod(n, radix, mod)
		out = append(out, base58Alphabet[mod.Int64()])
	}
	for _, c := range b {
		if c != 0 {
			break
		}
		out = append(out, '1')
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

// validSuiAddress accepts 0x followed by 1 to 64 hex digits, as Sui's
// address parser does.
func validSuiAddress(s string) bool {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || len(h) == 0 || len(h) > 64 {
		return false
	}
	for _, c := range h {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}
