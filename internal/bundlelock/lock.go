// Package bundlelock reads and writes bundle.lock.json, the file at the top
// of a brain directory that records the brain's bundle hash and its snapshot
// history (docs/design.md §3).
//
// The format is shared with the reference agent runtime, which rewrites the
// file by parsing it into an object, assigning fields and printing it with
// JSON.stringify(obj, null, 2). So do we: unknown keys and the key order
// survive a rewrite, the output is indented with two spaces and has no
// trailing newline, and a new key goes at the end.
package bundlelock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/headref"
)

// FileName is the lock's name at the top of a brain directory.
const FileName = "bundle.lock.json"

// MaxSize bounds how much of a lock file is read; a lock with a full
// lineage is well under 1 MiB.
const MaxSize = 8 << 20

// MaxLineage is how many earlier snapshots the lineage keeps.
const MaxLineage = 1000

// Keys of the fields hermesd reads and writes.
const (
	KeyBundleHash  = "bundleHash"
	KeyVersion     = "version"
	KeyLastUpdated = "lastUpdated"
	KeyBlobID      = "walrusSnapshotBlobId"
	KeyLineage     = "lineage"
	// KeyHead is hermesd's: walrusSnapshotBlobId's head reference with
	// its digest (docs/format-v3.md §14), beside the plain id the
	// reference runtime reads and writes.
	KeyHead = "walrusSnapshotHead"
)

// ErrMalformed is matched by every parse error.
var ErrMalformed = errors.New("malformed bundle.lock.json")

// Lock is a parsed lock file. The zero value is an empty lock.
type Lock struct {
	members []member
}

type member struct {
	key string
	val json.RawMessage // compact
}

// LineageEntry describes one earlier snapshot of the agent.
type LineageEntry struct {
	// BlobID is the snapshot's head reference (docs/format-v3.md §14): a
	// blob or patch id, for a v3 head with its commit id.
	BlobID     string `json:"blobId"`
	BundleHash string `json:"bundleHash"`
	CreatedAt  int64  `json:"createdAt"` // milliseconds since the epoch
	Size       int64  `json:"size"`      // bytes of the encrypted blob
	EndEpoch   uint64 `json:"endEpoch"`  // Walrus epoch at which it expires
}

// Parse decodes a lock. The top level must be a JSON object, and hermesd's
// own fields must have the right types.
func Parse(b []byte) (*Lock, error) {
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrMalformed, MaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: top level is not an object", ErrMalformed)
	}
	l := &Lock{}
	index := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: object key is not a string", ErrMalformed)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%w: value of %q: %v", ErrMalformed, key, err)
		}
		val, err := jsCanonical(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: value of %q: %v", ErrMalformed, key, err)
		}
		// As with JSON.parse, a repeated key keeps its first position and
		// takes the last value.
		if i, dup := index[key]; dup {
			l.members[i].val = val
			continue
		}
		index[key] = len(l.members)
		l.members = append(l.members, member{key: key, val: val})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the object", ErrMalformed)
	}
	if err := l.check(); err != nil {
		return nil, err
	}
	return l, nil
}

// check validates the types of the fields hermesd uses, so that a lock that
// parses can always be read through the accessors.
func (l *Lock) check() error {
	for _, m := range l.members {
		var err error
		switch m.key {
		case KeyBundleHash, KeyBlobID, KeyHead:
			var s string
			err = json.Unmarshal(m.val, &s)
		case KeyVersion, KeyLastUpdated:
			var n int64
			err = json.Unmarshal(m.val, &n)
		case KeyLineage:
			_, err = decodeLineage(m.val)
		}
		if err != nil {
			return fmt.Errorf("%w: field %q: %v", ErrMalformed, m.key, err)
		}
	}
	return nil
}

func decodeLineage(raw json.RawMessage) ([]LineageEntry, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var es []LineageEntry
	if err := json.Unmarshal(raw, &es); err != nil {
		return nil, err
	}
	for i, e := range es {
		if e.BlobID == "" {
			return nil, fmt.Errorf("entry %d has no blobId", i)
		}
	}
	return es, nil
}

// Read parses the lock file at path. A missing file is reported with an
// error matching os.ErrNotExist.
func Read(path string) (*Lock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	l, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// Write atomically replaces the file at path with l.
func Write(path string, l *Lock) error {
	// The lock lives in the brain, which the agent runtime hashes: its
	// replacement must never be visible there.
	f, err := atomicfile.CreateOutside(path, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(l.Marshal()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// Marshal renders the lock as JSON.stringify(lock, null, 2) would.
func (l *Lock) Marshal() []byte {
	if len(l.members) == 0 {
		return []byte("{}")
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, m := range l.members {
		b.WriteString("  ")
		writeJSString(&b, m.key)
		b.WriteString(": ")
		if err := json.Indent(&b, m.val, "  ", "  "); err != nil {
			// Values are compacted JSON from Parse or from json.Marshal.
			panic("bundlelock: internal error: " + err.Error())
		}
		if i < len(l.members)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteByte('}')
	return b.Bytes()
}

// Clone returns an independent copy.
func (l *Lock) Clone() *Lock {
	c := &Lock{members: make([]member, len(l.members))}
	copy(c.members, l.members)
	return c
}

// Keys returns the top-level keys in file order.
func (l *Lock) Keys() []string {
	ks := make([]string, len(l.members))
	for i, m := range l.members {
		ks[i] = m.key
	}
	return ks
}

// Raw returns the compact JSON value of key.
func (l *Lock) Raw(key string) (json.RawMessage, bool) {
	for _, m := range l.members {
		if m.key == key {
			return m.val, true
		}
	}
	return nil, false
}

// SetRaw sets key to a JSON value, in place if the key exists, else at the
// end.
func (l *Lock) SetRaw(key string, val json.RawMessage) error {
	canon, err := jsCanonical(val)
	if err != nil {
		return fmt.Errorf("value of %q: %w", key, err)
	}
	for i := range l.members {
		if l.members[i].key == key {
			l.members[i].val = canon
			return nil
		}
	}
	l.members = append(l.members, member{key: key, val: canon})
	return nil
}

func (l *Lock) set(key string, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // JSON.stringify does not escape <, > or &
	if err := enc.Encode(v); err != nil {
		panic("bundlelock: internal error: " + err.Error())
	}
	if err := l.SetRaw(key, bytes.TrimRight(b.Bytes(), "\n")); err != nil {
		panic("bundlelock: internal error: " + err.Error())
	}
}

// del removes key, if present.
func (l *Lock) del(key string) {
	for i := range l.members {
		if l.members[i].key == key {
			l.members = append(l.members[:i], l.members[i+1:]...)
			return
		}
	}
}

func (l *Lock) str(key string) string {
	raw, ok := l.Raw(key)
	if !ok {
		return ""
	}
	var s string
	_ = json.Unmarshal(raw, &s) // types are checked by Parse and the setters
	return s
}

func (l *Lock) num(key string) int64 {
	raw, ok := l.Raw(key)
	if !ok {
		return 0
	}
	var n int64
	_ = json.Unmarshal(raw, &n)
	return n
}

// BundleHash is the bundle hash of the state the lock describes ("" when
// absent).
func (l *Lock) BundleHash() string { return l.str(KeyBundleHash) }

// SetBundleHash sets bundleHash.
func (l *Lock) SetBundleHash(h string) { l.set(KeyBundleHash, h) }

// Version counts bundle-hash changes, starting at 1 (0 when absent).
func (l *Lock) Version() int64 { return l.num(KeyVersion) }

// SetVersion sets version.
func (l *Lock) SetVersion(v int64) { l.set(KeyVersion, v) }

// LastUpdated is the time of the last change, in milliseconds.
func (l *Lock) LastUpdated() int64 { return l.num(KeyLastUpdated) }

// SetLastUpdated sets lastUpdated (milliseconds since the epoch).
func (l *Lock) SetLastUpdated(ms int64) { l.set(KeyLastUpdated, ms) }

// BlobID is the head reference of the latest uploaded snapshot
// (walrusSnapshotBlobId, with the digest walrusSnapshotHead records for
// it). Inside a snapshot's own tar it names that snapshot's parent.
// walrusSnapshotHead counts only while it names walrusSnapshotBlobId: the
// reference runtime, which knows only walrusSnapshotBlobId, may have moved
// that on since.
func (l *Lock) BlobID() string {
	id := l.str(KeyBlobID)
	if r, err := headref.Parse(l.str(KeyHead)); err == nil && r.Bound && r.ID == id {
		return r.String()
	}
	return id
}

// SetBlobID records the head reference ref: its id in
// walrusSnapshotBlobId, where the reference runtime reads a blob id, and
// the whole reference in walrusSnapshotHead when it carries a digest (a
// reference without one removes walrusSnapshotHead).
func (l *Lock) SetBlobID(ref string) {
	r, err := headref.Parse(ref)
	if err != nil || !r.Bound {
		l.set(KeyBlobID, ref)
		l.del(KeyHead)
		return
	}
	l.set(KeyBlobID, r.ID)
	l.set(KeyHead, r.String())
}

// Lineage returns the earlier snapshots, newest first.
func (l *Lock) Lineage() []LineageEntry {
	raw, ok := l.Raw(KeyLineage)
	if !ok {
		return nil
	}
	es, _ := decodeLineage(raw)
	return es
}

// SetLineage replaces the lineage, keeping at most MaxLineage entries.
func (l *Lock) SetLineage(es []LineageEntry) {
	if len(es) > MaxLineage {
		es = es[:MaxLineage]
	}
	if es == nil {
		es = []LineageEntry{}
	}
	l.set(KeyLineage, es)
}

// Record moves the lock to a new bundle hash: version is incremented when
// the hash differs from the current one (set to 1 when there was none), and
// lastUpdated is set to nowMS. It reports whether the hash changed.
func (l *Lock) Record(bundleHash string, nowMS int64) bool {
	cur := l.BundleHash()
	changed := cur != bundleHash
	if changed || cur == "" {
		l.SetBundleHash(bundleHash)
	}
	switch {
	case l.Version() < 1:
		l.SetVersion(1)
	case changed && cur != "":
		l.SetVersion(l.Version() + 1)
	}
	l.SetLastUpdated(nowMS)
	return changed
}

// Uploaded records that the snapshot e (of this lock's state) is stored: it
// becomes walrusSnapshotBlobId (and walrusSnapshotHead) and the newest
// lineage entry. A lineage entry with the same blob id is replaced rather
// than repeated.
func (l *Lock) Uploaded(e LineageEntry) {
	l.SetBlobID(e.BlobID)
	old := l.Lineage()
	es := make([]LineageEntry, 0, len(old)+1)
	es = append(es, e)
	id := headref.ID(e.BlobID)
	for _, o := range old {
		if headref.ID(o.BlobID) != id {
			es = append(es, o)
		}
	}
	l.SetLineage(es)
}

// String is the lock as written to disk.
func (l *Lock) String() string { return strings.TrimSpace(string(l.Marshal())) }
