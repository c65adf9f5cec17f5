package hash

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A symlink counts in no bundle hash, but its fingerprint moves when one
// is created, retargeted or removed — through Update with the changed
// path named, a directory named, or a Rescan — and agrees with ReadLinks
// and with a fresh cache each time.
func TestLinksFingerprint(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("system.md", "hello\n")
	write("skills/a.md", "a\n")
	c := NewCache(root, Options{})
	first, err := c.Rescan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if first.Links != (Digest{}) {
		t.Fatalf("no symlinks, fingerprint %s", first.Links)
	}
	seen := map[Digest]string{first.Links: "none"}
	step := func(what string, changed []string, change func()) Result {
		t.Helper()
		change()
		res, err := c.Update(t.Context(), changed)
		if err != nil {
			t.Fatal(err)
		}
		if res.Digest != first.Digest {
			t.Fatalf("%s: the bundle hash moved (%s)", what, res.Digest)
		}
		fresh, err := NewCache(root, Options{}).Rescan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ls, err := ReadLinks(t.Context(), root, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Links != fresh.Links || res.Links != ls.Digest() {
			t.Fatalf("%s: the update's fingerprint %s, a rescan's %s, ReadLinks' %s", what, res.Links, fresh.Links, ls.Digest())
		}
		if prev, dup := seen[res.Links]; dup && what != "removed again" {
			t.Fatalf("%s: the fingerprint is %s's", what, prev)
		}
		seen[res.Links] = what
		return res
	}
	link := func(target, rel string) func() {
		return func() {
			p := filepath.Join(root, rel)
			os.Remove(p)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	step("created", []string{"current"}, link("skills/a.md", "current"))
	step("retargeted", []string{"current"}, link("skills/b.md", "current"))
	step("created in a directory", []string{"skills"}, link("../system.md", "skills/sys"))
	step("dangling, long target", []string{filepath.Join(root, "far")}, link(strings.Repeat("x/", 1000), "far"))
	step("a directory with a link removed", []string{"skills"}, func() {
		if err := os.RemoveAll(filepath.Join(root, "skills")); err != nil {
			t.Fatal(err)
		}
		write("skills/a.md", "a\n")
	})
	step("removed", []string{"current"}, func() { os.Remove(filepath.Join(root, "current")) })
	res := step("removed again", []string{"far"}, func() { os.Remove(filepath.Join(root, "far")) })
	if res.Links != (Digest{}) {
		t.Fatalf("every link removed: fingerprint %s", res.Links)
	}
	if got := c.Links(); len(got) != 0 {
		t.Fatalf("links left: %v", got)
	}
}
