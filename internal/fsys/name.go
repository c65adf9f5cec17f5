package fsys

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Name length bounds. Linux, macOS (APFS, HFS+) and most file systems stop
// at 255 bytes per name, and a longer relative path than PATH_MAX-1 cannot
// be handed to openat(2) in one piece, so the hasher could not open a file
// the extractor had created under such a name. Bounding both here makes
// the extractor refuse what the hasher would fail on.
const (
	MaxNameLen = 255
	MaxPathLen = 4095
)

var (
	// ErrName matches every name the policy refuses.
	ErrName = errors.New("unsupported file name")
	// ErrEscape matches, in addition to ErrName, a name that climbs out of
	// its root: an absolute path or one with a ".." component.
	ErrEscape = errors.New("file name leaves the root")
)

// NameError says why a name was refused.
type NameError struct {
	Path   string // the refused path (clipped to a few hundred bytes)
	Reason string
	escape bool
}

func (e *NameError) Error() string {
	return fmt.Sprintf("%v %q: %s", ErrName, e.Path, e.Reason)
}

// Is matches ErrName, and ErrEscape for names that leave the root.
func (e *NameError) Is(target error) bool {
	return target == ErrName || (e.escape && target == ErrEscape)
}

// maxShown bounds the name quoted in an error: a GNU long name may be a
// megabyte.
const maxShown = 200

func nameError(path, reason string, escape bool) error {
	if len(path) > maxShown {
		// Cut on a rune boundary when there is one nearby; %q escapes the rest.
		n := maxShown
		for i := 0; i < utf8.UTFMax && n > 0 && !utf8.RuneStart(path[n]); i++ {
			n--
		}
		path = path[:n] + "..."
	}
	return &NameError{Path: path, Reason: reason, escape: escape}
}

// backslashReason explains the one rule that is about hashing rather than
// the file system: the reference runtime replaces every '\' with '/' in
// keys, even on POSIX, so "a\b" would hash exactly like the file b in
// directory a. Two trees would share a hash, so such names are refused.
const backslashReason = `contains a backslash (the reference runtime hashes '\' as '/', so "a\b" would collide with "a/b")`

// CheckName reports whether rel is a valid relative path ('/'-separated,
// "" is not valid) under the policy described in the package
// documentation. The error is a *NameError.
func CheckName(rel string) error {
	switch {
	case rel == "":
		return nameError(rel, "is empty", false)
	case rel[0] == '/':
		return nameError(rel, "is absolute", true)
	case len(rel) > MaxPathLen:
		return nameError(rel, fmt.Sprintf("is %d bytes long, more than %d", len(rel), MaxPathLen), false)
	}
	// A ".." anywhere is the most important finding: report it first.
	for c := range strings.SplitSeq(rel, "/") {
		if c == ".." {
			return nameError(rel, `has a ".." component`, true)
		}
	}
	for c := range strings.SplitSeq(rel, "/") {
		if reason := checkComponent(c); reason != "" {
			return nameError(rel, reason, false)
		}
	}
	return nil
}

// Join returns the path of name inside the directory parent ("" for the
// root), after checking name as one component and the length of the
// result. parent must already be valid. Walkers call it for every entry
// they keep, so the walk applies exactly CheckName's policy.
func Join(parent, name string) (string, error) {
	p := name
	if parent != "" {
		p = parent + "/" + name
	}
	if reason := checkComponent(name); reason != "" {
		return "", nameError(p, reason, name == "..")
	}
	if len(p) > MaxPathLen {
		return "", nameError(p, fmt.Sprintf("is %d bytes long, more than %d", len(p), MaxPathLen), false)
	}
	return p, nil
}

// checkComponent returns why c is not a valid path component, or "".
func checkComponent(c string) string {
	switch c {
	case "":
		return "has an empty component"
	case ".":
		return `has a "." component`
	case "..":
		return `has a ".." component`
	}
	if len(c) > MaxNameLen {
		return fmt.Sprintf("has a component of %d bytes, more than %d", len(c), MaxNameLen)
	}
	if !utf8.ValidString(c) {
		return "is not valid UTF-8"
	}
	for i := 0; i < len(c); i++ {
		switch c[i] {
		case 0:
			return "contains a NUL byte"
		case '\\':
			return backslashReason
		case '/':
			return "has a name containing '/'"
		}
	}
	return ""
}
