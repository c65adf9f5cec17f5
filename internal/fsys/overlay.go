package fsys

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Overlay changes what a Root shows at a few paths: a substituted path
// shows another file (Open, Stat and Lstat reach the substitute, and the
// path is listed as a regular file even if the tree has nothing there), a
// hidden path does not exist, and nothing exists below either. Every other
// path is the tree's own.
//
// hermesd hashes and archives a brain through an Overlay that substitutes
// copies of its SQLite databases, taken under SQLite's own locks, for the
// live files a writer keeps changing, and hides the side files those copies
// do not need (package sqlite says which and why).
//
// An Overlay is immutable once made and may be shared by any number of
// Roots and goroutines.
type Overlay struct {
	subst map[string]string   // path → file shown in its place
	hide  map[string]bool     // paths that do not exist
	names map[string][]string // directory ("" for the root) → names substituted in it
}

// NewOverlay returns an Overlay that shows, at each path of subst (relative
// to the root, valid under CheckName), the file at the absolute path it maps
// to, and hides the paths in hide. A substitute must be a regular file when
// it is opened; it is opened without following a symlink in its last
// component, and its Info has Overlay set. A path may not be both
// substituted and hidden, nor lie below another overlaid path.
func NewOverlay(subst map[string]string, hide []string) (*Overlay, error) {
	o := &Overlay{subst: make(map[string]string, len(subst)), hide: make(map[string]bool, len(hide)), names: map[string][]string{}}
	for rel, target := range subst {
		if err := CheckName(rel); err != nil {
			return nil, fmt.Errorf("overlay: %w", err)
		}
		if !filepath.IsAbs(target) {
			return nil, fmt.Errorf("overlay: substitute for %s is not an absolute path: %q", rel, target)
		}
		o.subst[rel] = target
		dir, name := splitPath(rel)
		o.names[dir] = append(o.names[dir], name)
	}
	for _, rel := range hide {
		if err := CheckName(rel); err != nil {
			return nil, fmt.Errorf("overlay: %w", err)
		}
		if _, ok := o.subst[rel]; ok {
			return nil, fmt.Errorf("overlay: %s is both substituted and hidden", rel)
		}
		o.hide[rel] = true
	}
	for _, rel := range o.Paths() {
		if above, ok := o.ancestor(rel); ok {
			return nil, fmt.Errorf("overlay: %s lies below %s, which is overlaid", rel, above)
		}
	}
	for _, names := range o.names {
		slices.Sort(names)
	}
	return o, nil
}

// Paths returns every path the overlay substitutes or hides, sorted.
func (o *Overlay) Paths() []string {
	if o == nil {
		return nil
	}
	out := make([]string, 0, len(o.subst)+len(o.hide))
	for p := range o.subst {
		out = append(out, p)
	}
	for p := range o.hide {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

type overlaid uint8

const (
	live        overlaid = iota // the tree's own
	substituted                 // the file at the returned path
	gone                        // hidden, or below a hidden or substituted path
)

// lookup says what rel ("" for the root) is in the overlaid tree.
func (o *Overlay) lookup(rel string) (string, overlaid) {
	if o == nil || rel == "" {
		return "", live
	}
	if t, ok := o.subst[rel]; ok {
		return t, substituted
	}
	if o.hide[rel] {
		return "", gone
	}
	if _, ok := o.ancestor(rel); ok {
		return "", gone
	}
	return "", live
}

// ancestor returns the nearest overlaid proper ancestor of rel.
func (o *Overlay) ancestor(rel string) (string, bool) {
	for i := len(rel) - 1; i > 0; i-- {
		if rel[i] != '/' {
			continue
		}
		p := rel[:i]
		if _, ok := o.subst[p]; ok || o.hide[p] {
			return p, true
		}
	}
	return "", false
}

// errGone is the error for a path the overlay says does not exist: what
// the tree would report for a missing file, or for a path below a file.
func (o *Overlay) errGone(op, rel string) error {
	if _, k := o.lookup(rel); k == substituted {
		return &fs.PathError{Op: op, Path: rel, Err: syscall.ENOTDIR}
	}
	if above, ok := o.ancestor(rel); ok {
		if _, sub := o.subst[above]; sub {
			return &fs.PathError{Op: op, Path: rel, Err: syscall.ENOTDIR}
		}
	}
	return &fs.PathError{Op: op, Path: rel, Err: syscall.ENOENT}
}

// list applies the overlay to the listing ents of the directory rel: the
// tree's entries at overlaid paths are dropped and the substitutes added as
// regular files.
func (o *Overlay) list(rel string, ents []Entry) []Entry {
	if o == nil {
		return ents
	}
	out := ents[:0]
	for _, e := range ents {
		p := e.Name
		if rel != "" {
			p = rel + "/" + e.Name
		}
		if _, ok := o.subst[p]; ok || o.hide[p] {
			continue
		}
		out = append(out, e)
	}
	for _, name := range o.names[rel] {
		out = append(out, Entry{Name: name})
	}
	return out
}

// substError reports a substitute that cannot be reached. It is not
// IsGone: a walk must fail, not leave out a file the overlay promised.
func substError(op, rel, target string, err error) error {
	return &fs.PathError{Op: op, Path: rel, Err: fmt.Errorf("overlay substitute %s: %v", target, err)}
}

func splitPath(rel string) (dir, name string) {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i], rel[i+1:]
	}
	return "", rel
}
