package repo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
)

// Format is the commit's format string.
const Format = "hermesd/v3"

// Parent formats a v3 commit may continue from.
const (
	ParentV1 = "v1"
	ParentV2 = "v2"
	ParentV3 = "v3"
)

// Bounds on a commit (docs/format-v3.md §7).
const (
	// MaxCommitLen bounds a commit's encoding.
	MaxCommitLen = 16 << 20
	// MaxPacks bounds a commit's live pack list; a commit's own contents
	// bound it further (PackBound).
	MaxPacks = 100_000
	// MaxBlobIDLen bounds a blob id (Walrus ids are 43 characters).
	MaxBlobIDLen = 128
	// maxJSONInt: every number fits a JavaScript number exactly.
	maxJSONInt = 1<<53 - 1
)

// The pack list's bound from what a commit declares (PackBound). A writer
// lists only packs holding objects the commit references, merges the
// least used ones once they are more than repository.max_packs (at most
// MaxWriterPacks), and fills every other pack it writes to at least
// MinPackSize: so it never lists more than packAllowance packs besides
// one per MiB of the files, lock and receipts it declares and one per
// 1,024 files (their trees).
const (
	// MaxWriterPacks bounds repository.max_packs.
	MaxWriterPacks = 512
	packAllowance  = 2 * MaxWriterPacks
	bytesPerPack   = 1 << 20
	filesPerPack   = 1 << 10
)

// PackBound is the most packs a commit declaring files files of bytes
// bytes (lock and receipts included) may list. Every listed pack costs a
// range read before a restore can start: a head listing 5,000 packs
// behind a 1 MiB brain would cost 5,004 reads; such a commit is refused
// after the head's two.
func PackBound(files, bytes int64) int64 {
	return packAllowance + files/filesPerPack + bytes/bytesPerPack
}

// Commit is one snapshot of an agent's brain: the root tree, the lock and
// receipts files beside it, the lineage link, and every pack (other than
// the head pack carrying the commit) that holds an object it references.
// It is encoded as JSON inside the head pack's index.
type Commit struct {
	Format   string `json:"format"`   // "hermesd/v3"
	Identity string `json:"identity"` // the agent identity
	KeyID    string `json:"keyId"`    // AgentKey.ID of the key that wrote it
	Root     ID     `json:"root"`     // root tree id
	// RootMode and RootMtime (since 2026-11-27, with revision 2 trees)
	// are the brain directory's own permission and special bits (in the
	// layout of stat(2): setuid 04000, setgid 02000, sticky 01000) and its
	// mtime in nanoseconds since the epoch, as a decimal string (a JSON
	// number would not hold it exactly). Both or neither.
	RootMode     *uint32     `json:"rootMode,omitempty"`
	RootMtime    string      `json:"rootMtime,omitempty"`
	Parent       string      `json:"parent"`       // previous head blob id; "" for the first snapshot
	ParentFormat string      `json:"parentFormat"` // "v1", "v2" or "v3"; "" iff Parent is ""
	Time         int64       `json:"time"`         // ms since the Unix epoch
	BundleHash   hash.Digest `json:"bundleHash"`   // of the root tree's files
	LockVersion  int64       `json:"lockVersion"`  // the lock's version field
	Files        int64       `json:"files"`        // regular files in the root tree
	Bytes        int64       `json:"bytes"`        // their total size
	Added        int64       `json:"added"`        // stored bytes of the objects this snapshot wrote
	Lock         *FileRef    `json:"lock"`         // bundle.lock.json; null if absent
	Receipts     *FileRef    `json:"receipts"`     // receipts.ndjson; null if absent
	Packs        []PackRef   `json:"packs"`        // live packs except the head, by blob id
}

// FileRef is a file kept beside the root tree (the lock, the receipts).
type FileRef struct {
	Mode   fs.FileMode `json:"mode"` // permission bits, as a decimal number
	Size   int64       `json:"size"`
	SHA256 ID          `json:"sha256"` // of the whole content
	Chunks []ID        `json:"chunks"`
}

// PackRef is a live pack: its blob, size, end epoch (exclusive) and the
// length of its encrypted index (so one range read gets header and index).
type PackRef struct {
	BlobID      string `json:"blobId"`
	Size        int64  `json:"size"`
	EndEpoch    uint64 `json:"endEpoch"`
	IndexLength int64  `json:"indexLength"`
}

// UnmarshalJSON reads a pack entry strictly. Commits written before
// 2026-11-26 also carry "sha256", the SHA-256 of the whole blob, which no
// reader can use (docs/format-v3.md §7); it is accepted when well-formed
// and dropped.
func (p *PackRef) UnmarshalJSON(b []byte) error {
	var v struct {
		BlobID      string `json:"blobId"`
		Size        int64  `json:"size"`
		EndEpoch    uint64 `json:"endEpoch"`
		IndexLength int64  `json:"indexLength"`
		SHA256      *ID    `json:"sha256"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	*p = PackRef{BlobID: v.BlobID, Size: v.Size, EndEpoch: v.EndEpoch, IndexLength: v.IndexLength}
	return nil
}

// Encode returns the commit's JSON encoding after validating it.
func (c *Commit) Encode() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("repo: encode commit: %w", err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > MaxCommitLen {
		return nil, fmt.Errorf("%w: commit of %d bytes exceeds %d", ErrTooLarge, len(b), MaxCommitLen)
	}
	return b, nil
}

// DecodeCommit parses and validates a commit. Unknown fields, trailing
// data and out-of-range values are refused with ErrCorrupt.
func DecodeCommit(b []byte) (*Commit, error) {
	if len(b) > MaxCommitLen {
		return nil, corruptf("commit of %d bytes exceeds %d", len(b), MaxCommitLen)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Commit
	if err := dec.Decode(&c); err != nil {
		return nil, corruptf("commit: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, corruptf("commit: trailing data")
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return &c, nil
}

// Validate checks every field's range and the pack list's order.
func (c *Commit) Validate() error {
	switch {
	case c.Format != Format:
		return fmt.Errorf("commit: format %q, want %q", clip(c.Format), Format)
	case checkIdentity(c.Identity) != nil:
		return fmt.Errorf("commit: %w", checkIdentity(c.Identity))
	case !isKeyID(c.KeyID):
		return fmt.Errorf("commit: key id %q: want %d hex digits", clip(c.KeyID), 2*KeyIDSize)
	case c.Root.IsZero():
		return fmt.Errorf("commit: no root tree")
	case c.Parent == "" && c.ParentFormat != "":
		return fmt.Errorf("commit: parent format %q without a parent", clip(c.ParentFormat))
	case c.Parent != "" && !slices.Contains([]string{ParentV1, ParentV2, ParentV3}, c.ParentFormat):
		return fmt.Errorf("commit: parent format %q: want v1, v2 or v3", clip(c.ParentFormat))
	case c.Parent != "" && !ValidBlobID(c.Parent):
		return fmt.Errorf("commit: parent %q is not a blob id", clip(c.Parent))
	case (c.RootMode == nil) != (c.RootMtime == ""):
		return fmt.Errorf("commit: rootMode and rootMtime go together")
	case c.RootMode != nil && *c.RootMode&^0o7777 != 0:
		return fmt.Errorf("commit: rootMode %#o has more than permission and special bits", *c.RootMode)
	}
	if c.RootMtime != "" {
		if _, err := parseNanos(c.RootMtime); err != nil {
			return fmt.Errorf("commit: rootMtime: %w", err)
		}
	}
	for _, v := range []struct {
		name string
		n    int64
	}{{"time", c.Time}, {"lockVersion", c.LockVersion}, {"files", c.Files}, {"bytes", c.Bytes}, {"added", c.Added}} {
		if v.n < 0 || v.n > maxJSONInt {
			return fmt.Errorf("commit: %s %d out of range", v.name, v.n)
		}
	}
	if err := c.Lock.validate("lock"); err != nil {
		return err
	}
	if err := c.Receipts.validate("receipts"); err != nil {
		return err
	}
	if len(c.Packs) > MaxPacks {
		return fmt.Errorf("commit: %d packs, more than %d", len(c.Packs), MaxPacks)
	}
	if n, max := int64(len(c.Packs)), PackBound(c.Files, c.declared()); n > max {
		return fmt.Errorf("commit: %d packs for %d files of %d bytes, more than the %d it can need", n, c.Files, c.declared(), max)
	}
	for i, p := range c.Packs {
		if err := p.validate(); err != nil {
			return err
		}
		if i > 0 && c.Packs[i-1].BlobID >= p.BlobID {
			return fmt.Errorf("commit: pack list out of order or duplicate at %q", p.BlobID)
		}
	}
	return nil
}

// declared is what the commit says a whole restore writes: its files,
// lock and receipts. Validate has checked every size is at most 2^53-1.
func (c *Commit) declared() int64 {
	n := c.Bytes
	for _, f := range []*FileRef{c.Lock, c.Receipts} {
		if f != nil {
			n += f.Size
		}
	}
	return n
}

func (r *FileRef) validate(what string) error {
	if r == nil {
		return nil
	}
	switch n := int64(len(r.Chunks)); {
	case r.Mode&^0o777 != 0:
		return fmt.Errorf("commit: %s: mode %#o has more than permission bits", what, uint32(r.Mode))
	case r.Size < 0 || r.Size > maxJSONInt:
		return fmt.Errorf("commit: %s: size %d out of range", what, r.Size)
	case (r.Size == 0) != (n == 0) || n > r.Size:
		return fmt.Errorf("commit: %s: %d chunks cannot hold %d bytes", what, n, r.Size)
	}
	return nil
}

func (p *PackRef) validate() error {
	switch {
	case !ValidBlobID(p.BlobID):
		return fmt.Errorf("commit: pack %q is not a blob id", clip(p.BlobID))
	case p.IndexLength < minIndexStored || p.IndexLength > MaxIndexLen:
		return fmt.Errorf("commit: pack %s: index length %d out of range", p.BlobID, p.IndexLength)
	case p.Size < HeaderSize+p.IndexLength || p.Size > MaxPackLen:
		return fmt.Errorf("commit: pack %s: size %d out of range", p.BlobID, p.Size)
	case p.EndEpoch > maxJSONInt:
		return fmt.Errorf("commit: pack %s: end epoch %d out of range", p.BlobID, p.EndEpoch)
	}
	return nil
}

// ValidBlobID reports whether s can be a blob id: 1 to MaxBlobIDLen
// characters of the URL-safe base64 alphabet (Walrus ids are 43).
func ValidBlobID(s string) bool {
	if s == "" || len(s) > MaxBlobIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func isKeyID(s string) bool {
	if len(s) != 2*KeyIDSize {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

// parseNanos reads a decimal int64 without a plus sign or leading zeros.
func parseNanos(s string) (int64, error) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || len(digits) > 1 && digits[0] == '0' || strings.Trim(digits, "0123456789") != "" || s == "-0" {
		return 0, fmt.Errorf("%q is not a decimal integer", clip(s))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", clip(s))
	}
	return n, nil
}

// SetRoot records the brain directory's own mode (permission and special
// bits) and mtime (ns since the epoch).
func (c *Commit) SetRoot(mode fs.FileMode, mtime int64) {
	m := fsys.UnixMode(mode)
	c.RootMode, c.RootMtime = &m, strconv.FormatInt(mtime, 10)
}

// RootMeta returns the brain directory's recorded mode and mtime; ok is
// false for a commit written before they were recorded.
func (c *Commit) RootMeta() (mode fs.FileMode, mtime int64, ok bool) {
	if c.RootMode == nil {
		return 0, NoTime, false
	}
	mtime, err := parseNanos(c.RootMtime)
	if err != nil {
		return 0, NoTime, false
	}
	return fsys.FromUnixMode(*c.RootMode), mtime, true
}

// Pack returns the commit's pack entry for blobID, or nil.
func (c *Commit) Pack(blobID string) *PackRef {
	i, ok := slices.BinarySearchFunc(c.Packs, blobID, func(p PackRef, id string) int { return strings.Compare(p.BlobID, id) })
	if !ok {
		return nil
	}
	return &c.Packs[i]
}

// MinEndEpoch returns the earliest end epoch of the commit's listed packs
// (0 when it lists none): the commit is restorable until then, provided
// its head pack also lives.
func (c *Commit) MinEndEpoch() uint64 {
	var m uint64
	for i, p := range c.Packs {
		if i == 0 || p.EndEpoch < m {
			m = p.EndEpoch
		}
	}
	return m
}

// Expiring returns the blob ids of the listed packs whose end epoch is at
// most epoch+margin: the packs a repack should rewrite now.
func (c *Commit) Expiring(epoch, margin uint64) []string {
	var ids []string
	for _, p := range c.Packs {
		if p.EndEpoch <= epoch+margin {
			ids = append(ids, p.BlobID)
		}
	}
	return ids
}
