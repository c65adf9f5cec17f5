package watch

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseSysctl: /proc contents never panic the parser, and what it
// accepts is a non-negative decimal equal to the trimmed text.
func FuzzParseSysctl(f *testing.F) {
	for _, s := range []string{"8192\n", "128", "", "-1\n", "1e9\n", "00012\n", "9223372036854775808\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, ok := parseSysctl(b)
		if !ok {
			if v != 0 {
				t.Fatalf("rejected %q but returned %d", b, v)
			}
			return
		}
		want, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if v < 0 || err != nil || want != v {
			t.Fatalf("parseSysctl(%q) = %d, want %d (%v)", b, v, want, err)
		}
	})
}

// FuzzLookup: an event path reaches exactly the roots it lies in, by path
// element: the root itself or anything under root plus a separator.
func FuzzLookup(f *testing.F) {
	f.Add("/srv/brains/a", "/srv/brains/a/skills/x.md")
	f.Add("/srv/brains/a", "/srv/brains/ab/x.md")
	f.Add("/", "/etc")
	f.Add("/srv", "/srv")
	f.Add("/srv/a", "/srv")
	f.Fuzz(func(t *testing.T, root, name string) {
		if !clean(root) || !clean(name) {
			return
		}
		h := &Hub{roots: map[string][]*Watcher{root: {{root: root}}}}
		got := false
		h.lookup(name, func(w *Watcher) {
			if got {
				t.Fatalf("root %q matched twice for %q", root, name)
			}
			got = w.root == root
		})
		want := name == root || strings.HasPrefix(name, dirPrefix(root))
		if got != want {
			t.Fatalf("lookup(%q) with root %q: matched %v, want %v", name, root, got, want)
		}
	})
}

// clean reports a clean absolute path, as the hub's roots and event names
// are.
func clean(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p && !strings.ContainsRune(p, 0)
}
