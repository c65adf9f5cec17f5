package localwalrus

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/zeebo/blake3"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/redstuff"
	"github.com/hermesd/hermesd/internal/walruscost"
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
	Version int    `json:"version"`
	BlobID  string `json:"blobId"`
	Size    int64  `json:"size"`
	// Shards is the shard count of a real (RS2) blob id, whose quilts
	// are laid out as QuiltV1; 0 for the simulated ids of earlier
	// versions, whose quilts have the old local layout.
	Shards        int            `json:"shards,omitempty"`
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
func (st *store) commit(tmpPath string, id [32]byte, blobID string, size int64, shards int, now uint32, p putParams) (putOutcome, error) {
	key := hex.EncodeToString(id[:])
	st.mu.Lock()
	defer st.mu.Unlock()
	defer os.Remove(tmpPath) // no-op after the rename below

	m, err := st.loadMeta(key)
	if err != nil {
		return putOutcome{}, err
	}
	if m == nil {
		m = &blobMeta{Version: 1, BlobID: blobID, Size: size, Shards: shards}
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

// contentHasher digests an upload while it streams in: the key of the
// cache of blob ids, so that bytes stored again (a retry, a re-store) are
// not encoded again. BLAKE3: this server shares its host with the client
// it stands in for.
type contentHasher struct {
	h *blake3.Hasher
	n int64
}

func newContentHasher() *contentHasher { return &contentHasher{h: blake3.New()} }

func (c *contentHasher) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

// key is the cache key of the content over shards shards.
func (c *contentHasher) key(shards int) idKey {
	var k idKey
	c.h.Sum(k.digest[:0])
	k.size, k.shards = c.n, shards
	return k
}

type idKey struct {
	digest [32]byte
	size   int64
	shards int
}

// idCacheSize bounds the ids remembered (about 100 bytes each).
const idCacheSize = 4096

// idCache remembers the blob ids of recent content, oldest evicted first.
type idCache struct {
	mu    sync.Mutex
	ids   map[idKey][32]byte
	order []idKey
}

func (c *idCache) get(k idKey) ([32]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids[k]
	return id, ok
}

func (c *idCache) put(k idKey, id [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[idKey][32]byte{}
	}
	if _, ok := c.ids[k]; ok {
		return
	}
	if len(c.order) == idCacheSize {
		delete(c.ids, c.order[0])
		c.order = c.order[1:]
	}
	c.ids[k] = id
	c.order = append(c.order, k)
}

// computeID is the blob id of the size bytes r holds (whose digest is k),
// from the cache or computed (redstuff).
func computeID(ctx context.Context, cache *idCache, k idKey, r io.ReaderAt) ([32]byte, error) {
	if id, ok := cache.get(k); ok {
		return id, nil
	}
	m, err := redstuff.Compute(ctx, r, k.size, k.shards)
	if err != nil {
		return [32]byte{}, err
	}
	cache.put(k, m.ID)
	return m.ID, nil
}

// ids caches the ids BlobID computes.
var ids idCache

// BlobID returns the blob id of content at 1000 shards (the server's
// default, mainnet's and testnet's): Walrus's own id.
func BlobID(content []byte) string {
	h := newContentHasher()
	h.Write(content)
	id, err := computeID(context.Background(), &ids, h.key(walruscost.DefaultShards), bytes.NewReader(content))
	if err != nil {
		panic(fmt.Sprintf("localwalrus: blob id of %d bytes: %v", len(content), err)) // content over 13 GiB
	}
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
