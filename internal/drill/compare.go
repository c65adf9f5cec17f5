package drill

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// Mismatch is one difference between the live brain and the restore.
type Mismatch struct {
	Path string `json:"path"`
	// Kind is missing (in the live brain, not restored), extra (restored,
	// not in the live brain), type, mode, size, content, lock, receipts,
	// hash (the re-hash disagrees), trees (v3: not as the snapshot's
	// trees list it), link (a hard link that is not one) or symlink (a
	// symlink with another target).
	Kind string `json:"kind"`
	Want string `json:"want,omitempty"` // the live brain's side
	Got  string `json:"got,omitempty"`  // the restore's side
}

func (m Mismatch) String() string {
	s := m.Path + ": " + m.Kind
	if m.Want != "" || m.Got != "" {
		s += fmt.Sprintf(" (live %s, restored %s)", orNone(m.Want), orNone(m.Got))
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// comparison is the outcome of comparing two trees.
type comparison struct {
	mismatches []Mismatch
	notes      []string
	files      int // identical regular files (lock and receipts included)
	dirs       int // identical directories
	symlinks   int // identical symlinks (the same target)
}

// contentFunc reports whether the file rel has the same bytes on both
// sides. Nil compares the manifests' SHA-256.
type contentFunc func(rel string) (bool, error)

// compare checks got (the restore) against live. blob is the snapshot that
// was restored (for the lock rule).
func compare(live, got *manifest, blob string, same contentFunc) (comparison, error) {
	var c comparison
	union := map[string]bool{}
	for p := range live.entries {
		union[p] = true
	}
	for p := range got.entries {
		union[p] = true
	}
	paths := make([]string, 0, len(union))
	for p := range union {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	for _, p := range paths {
		l, inLive := live.entries[p]
		g, inGot := got.entries[p]
		switch {
		case inLive && !inGot:
			switch l.kind {
			case kindOther:
				c.notes = append(c.notes, fmt.Sprintf("%s is a %s: not part of snapshots (by design), not compared", p, l.kind))
				continue
			case kindSymlink:
				// A symlink changes no bundle hash, so no snapshot is taken
				// for one alone; and snapshots before 2026-11-29 hold none.
				c.notes = append(c.notes, fmt.Sprintf("%s is a symlink (-> %s) the snapshot does not hold: a restore of it would lose the link; "+
					"a symlink alone changes no bundle hash, so it is kept from the next snapshot on (taken when the brain's files change)", p, l.target))
				continue
			}
			c.add(p, "missing", l.kind.String(), "")
			continue
		case !inLive && inGot:
			c.add(p, "extra", "", g.kind.String())
			continue
		case l.kind != g.kind:
			c.add(p, "type", l.kind.String(), g.kind.String())
			continue
		}
		switch l.kind {
		case kindOther:
			c.notes = append(c.notes, fmt.Sprintf("%s is a %s in both trees; not compared", p, l.kind))
			continue
		case kindSymlink:
			// A symlink is its target (its mode means nothing).
			if l.target != g.target {
				c.add(p, "symlink", "-> "+l.target, "-> "+g.target)
			} else {
				c.symlinks++
			}
			continue
		}
		if l.kind == kindDir && l.mode&0o002 != 0 && g.mode == l.mode&^0o002 {
			c.notes = append(c.notes, fmt.Sprintf("%s: restored at mode %s, the live directory's %s less o+w: a restore makes no directory of a brain writable by everyone unless allow_unsafe_dirs is set; not a failure",
				p, modeString(g.mode), modeString(l.mode)))
			c.dirs++
			continue
		}
		if l.mode.Perm() != g.mode.Perm() {
			c.add(p, "mode", modeString(l.mode), modeString(g.mode))
			continue
		}
		if l.mode != g.mode {
			c.notes = append(c.notes, specialNote(p, l, g))
		}
		if l.kind == kindFile && l.target != g.target {
			c.notes = append(c.notes, linkNote(p, l, g))
		}
		if l.kind == kindDir {
			c.dirs++
			continue
		}
		switch p {
		case bundlelock.FileName:
			if m, note := checkLock(live.lock, got.lock, blob); m != nil {
				c.mismatches = append(c.mismatches, *m)
				continue
			} else if note != "" {
				c.notes = append(c.notes, note)
			}
			c.files++
			continue
		case snapshot.ReceiptsFile:
			if m, note := checkReceipts(live, got); m != nil {
				c.mismatches = append(c.mismatches, *m)
				continue
			} else if note != "" {
				c.notes = append(c.notes, note)
			}
			c.files++
			continue
		}
		if l.size != g.size {
			c.add(p, "size", fmt.Sprintf("%d bytes", l.size), fmt.Sprintf("%d bytes", g.size))
			continue
		}
		eq := l.sum == g.sum
		if same != nil {
			var err error
			if eq, err = same(p); err != nil {
				return c, fmt.Errorf("compare %s: %w", p, err)
			}
		}
		if !eq {
			if live.sums && got.sums {
				c.add(p, "content", fmt.Sprintf("sha256 %x", l.sum[:8]), fmt.Sprintf("sha256 %x", g.sum[:8]))
			} else {
				c.add(p, "content", "", "")
			}
			continue
		}
		c.files++
	}
	return c, nil
}

// modeString is a mode as chmod writes it: permission and special bits.
func modeString(m fs.FileMode) string { return fmt.Sprintf("%04o", fsys.UnixMode(m)) }

// specialNote describes a difference in special bits alone, which is not a
// failure: a restore never sets setuid or setgid on a file (the restore
// lists each), and snapshots older than revision 2 trees and hermesd's
// archives before 2026-11-27 record no special bits at all. What a v3
// snapshot records is checked against its trees (the trees stage).
func specialNote(p string, l, g entry) string {
	why := "the snapshot may not record them"
	if l.kind == kindFile && l.mode&^g.mode&^(fs.ModeSetuid|fs.ModeSetgid) == 0 && g.mode&^l.mode == 0 {
		why = "a restore never sets setuid or setgid on a file"
	}
	return fmt.Sprintf("%s: special bits differ (live %s, restored %s): %s; not a failure",
		p, modeString(l.mode), modeString(g.mode), why)
}

// linkNote describes a file whose hard links differ, which is not a
// failure: its content is compared by itself, and snapshots older than
// revision 2 trees (and hermesd's archives before 2026-11-27) store every
// name of a file as a file of its own. What a v3 snapshot records is
// checked against its trees.
func linkNote(p string, l, g entry) string {
	name := func(e entry) string {
		if e.target == "" {
			return "a file of its own"
		}
		return "a hard link of " + e.target
	}
	return fmt.Sprintf("%s: %s in the live brain, %s restored (the snapshot may not record hard links); not a failure", p, name(l), name(g))
}

func (c *comparison) add(path, kind, want, got string) {
	c.mismatches = append(c.mismatches, Mismatch{Path: path, Kind: kind, Want: want, Got: got})
}

// checkLock applies the lock rule (see the package doc).
func checkLock(liveRaw, gotRaw []byte, blob string) (*Mismatch, string) {
	bad := func(want, got string) (*Mismatch, string) {
		return &Mismatch{Path: bundlelock.FileName, Kind: "lock", Want: want, Got: got}, ""
	}
	if bytes.Equal(liveRaw, gotRaw) {
		return nil, ""
	}
	gl, err := bundlelock.Parse(gotRaw)
	if err != nil {
		return bad("", "unreadable: "+err.Error())
	}
	ll, err := bundlelock.Parse(liveRaw)
	if err != nil {
		return bad("unreadable: "+err.Error(), "")
	}
	if gl.BundleHash() != ll.BundleHash() {
		return bad("bundleHash "+ll.BundleHash(), "bundleHash "+gl.BundleHash())
	}
	lin := ll.Lineage()
	if len(lin) == 0 || lin[0].BlobID != blob || ll.BlobID() != blob {
		return nil, fmt.Sprintf("bundle.lock.json: bundleHash equal; blob %s is not the live lock's newest upload, so only bundleHash was compared", blob)
	}
	if gl.Version() != ll.Version() {
		return bad(fmt.Sprintf("version %d", ll.Version()), fmt.Sprintf("version %d", gl.Version()))
	}
	want := gl.Clone()
	want.Uploaded(lin[0])
	if !bytes.Equal(want.Marshal(), ll.Marshal()) {
		return bad("", "differs beyond the upload record (walrusSnapshotBlobId, lineage[0])")
	}
	parent := gl.BlobID()
	if parent == "" {
		parent = "none"
	}
	return nil, fmt.Sprintf("bundle.lock.json: bundleHash, version and every other key equal; the live lock also records the upload of %s "+
		"(walrusSnapshotBlobId, lineage[0]), the restored one names the parent (%s)", blob, parent)
}

// checkReceipts applies the receipts rule: the restored lines are a
// sub-multiset of the live ones.
func checkReceipts(live, got *manifest) (*Mismatch, string) {
	missing := 0
	for h, n := range got.receipts {
		if d := n - live.receipts[h]; d > 0 {
			missing += d
		}
	}
	if missing > 0 {
		return &Mismatch{Path: snapshot.ReceiptsFile, Kind: "receipts",
			Want: fmt.Sprintf("%d receipts", live.receiptsN),
			Got:  fmt.Sprintf("%d receipts, %d not in the live file", got.receiptsN, missing)}, ""
	}
	le, ge := live.entries[snapshot.ReceiptsFile], got.entries[snapshot.ReceiptsFile]
	if le.size == ge.size && live.receiptsN == got.receiptsN {
		return nil, ""
	}
	return nil, fmt.Sprintf("receipts.ndjson: all %d restored receipts are in the live file, which has %d (the rest arrived after the snapshot)",
		got.receiptsN, live.receiptsN)
}

// exact reports every difference between two summed manifests, the root's
// mode, special bits and hard links included: the destructive drill's
// final check.
func exact(want, got *manifest) []Mismatch {
	var out []Mismatch
	if want.rootMode != got.rootMode {
		out = append(out, Mismatch{Path: ".", Kind: "mode", Want: modeString(want.rootMode), Got: modeString(got.rootMode)})
	}
	for _, p := range want.paths() {
		w := want.entries[p]
		g, ok := got.entries[p]
		switch {
		case !ok:
			out = append(out, Mismatch{Path: p, Kind: "missing", Want: w.kind.String()})
		case w.kind != g.kind:
			out = append(out, Mismatch{Path: p, Kind: "type", Want: w.kind.String(), Got: g.kind.String()})
		case w.kind == kindSymlink:
			if w.target != g.target {
				out = append(out, Mismatch{Path: p, Kind: "symlink", Want: "-> " + w.target, Got: "-> " + g.target})
			}
		case w.mode != g.mode:
			out = append(out, Mismatch{Path: p, Kind: "mode", Want: modeString(w.mode), Got: modeString(g.mode)})
		case w.size != g.size || w.sum != g.sum:
			out = append(out, Mismatch{Path: p, Kind: "content", Want: fmt.Sprintf("sha256 %x", w.sum[:8]), Got: fmt.Sprintf("sha256 %x", g.sum[:8])})
		case w.kind == kindFile && w.target != g.target:
			out = append(out, Mismatch{Path: p, Kind: "link", Want: linkString(w.target), Got: linkString(g.target)})
		}
	}
	for _, p := range got.paths() {
		if _, ok := want.entries[p]; !ok {
			out = append(out, Mismatch{Path: p, Kind: "extra", Got: got.entries[p].kind.String()})
		}
	}
	return out
}

func linkString(target string) string {
	if target == "" {
		return "its own file"
	}
	return "hard link of " + target
}

// timestampGrace allows for the kernel's coarse clock: a change just
// after a snapshot began may carry a timestamp a tick before it.
const timestampGrace = 2 * time.Second

// changedSince reports whether the live brain's entry at rel — or, for a
// path it does not hold, the nearest directory above it, which a removal
// changes — changed at or after t.
func (m *manifest) changedSince(rel string, t time.Time) bool {
	after := func(c time.Time) bool { return !c.Before(t.Add(-timestampGrace)) }
	if e, ok := m.entries[rel]; ok {
		return after(e.changed)
	}
	for dir := path.Dir(rel); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if e, ok := m.entries[dir]; ok && e.kind == kindDir {
			return after(e.changed)
		}
	}
	return after(m.rootChanged)
}

// movedOn splits the differences between the live brain and a restore of
// a snapshot taken at taken: those the live brain explains by having
// changed since (its entry, or the directory a removal changed, is newer
// than the snapshot: the brain moved on), and the rest, which nothing
// explains — a brain changed behind its timestamps, or a snapshot that
// does not hold what the brain was. The receipts rule and a failed
// re-hash are never explained so. A zero taken explains nothing.
func movedOn(ms []Mismatch, live *manifest, taken time.Time) (moved, rest []Mismatch) {
	for _, m := range ms {
		switch {
		case taken.IsZero(), m.Kind == "receipts", m.Kind == "hash":
			rest = append(rest, m)
		case live.changedSince(m.Path, taken):
			moved = append(moved, m)
		default:
			rest = append(rest, m)
		}
	}
	return moved, rest
}

// sameBytes compares two files byte for byte.
func sameBytes(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	const chunk = 256 << 10
	ba, bb := make([]byte, chunk), make([]byte, chunk)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		aEnd := ea == io.EOF || ea == io.ErrUnexpectedEOF
		bEnd := eb == io.EOF || eb == io.ErrUnexpectedEOF
		switch {
		case ea != nil && !aEnd:
			return false, ea
		case eb != nil && !bEnd:
			return false, eb
		case aEnd || bEnd:
			return aEnd && bEnd, nil
		}
	}
}

// literal compares files of two roots byte for byte.
func literal(liveRoot, gotRoot string) contentFunc {
	return func(rel string) (bool, error) {
		return sameBytes(filepath.Join(liveRoot, filepath.FromSlash(rel)), filepath.Join(gotRoot, filepath.FromSlash(rel)))
	}
}
