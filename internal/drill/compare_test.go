package drill

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/bundlelock"
)

func TestLineHashes(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	tests := []struct {
		name string
		in   string
		n    int
	}{
		{"empty", "", 0},
		{"one line, no newline", `{"a":1}`, 1},
		{"two lines", "{\"a\":1}\n{\"b\":2}", 2},
		{"trailing newline and blank lines", "a\n\nb\n", 2},
		{"line longer than the buffer", long + "\n" + long, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, n, err := lineHashes(strings.NewReader(tc.in))
			if err != nil || n != tc.n {
				t.Fatalf("n = %d, %v; want %d", n, err, tc.n)
			}
			total := 0
			for _, c := range m {
				total += c
			}
			if total != n {
				t.Errorf("multiset holds %d, n = %d", total, n)
			}
		})
	}
	// A long line is hashed whole: two different long lines differ.
	a, _, _ := lineHashes(strings.NewReader(long + "a"))
	b, _, _ := lineHashes(strings.NewReader(long + "b"))
	for h := range a {
		if b[h] != 0 {
			t.Error("long lines that differ at the end hash the same")
		}
	}
}

// lockPair returns the lock as tarred into a snapshot of blob and as the
// live brain holds it after the upload.
func lockPair(t *testing.T, blob string) (tarred, live *bundlelock.Lock) {
	t.Helper()
	l, err := bundlelock.Parse([]byte(`{"bundleHash": "0x01", "version": 3, "lastUpdated": 5, "custom": {"kept": true}, ` +
		`"walrusSnapshotBlobId": "parent", "lineage": [{"blobId": "parent", "bundleHash": "0x00", "createdAt": 1, "size": 10, "endEpoch": 4}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tarred = l.Clone()
	live = l.Clone()
	live.Uploaded(bundlelock.LineageEntry{BlobID: blob, BundleHash: "0x01", CreatedAt: 5, Size: 20, EndEpoch: 9})
	return tarred, live
}

func TestCheckLock(t *testing.T) {
	const blob = "new"
	tests := []struct {
		name     string
		edit     func(tarred, live *bundlelock.Lock)
		blob     string
		mismatch string // substring of the mismatch; "" = none
		note     string
	}{
		{name: "upload record only", blob: blob, note: "names the parent (parent)"},
		{name: "bundle hash differs", blob: blob, mismatch: "bundleHash",
			edit: func(tr, _ *bundlelock.Lock) { tr.SetBundleHash("0x02") }},
		{name: "version differs", blob: blob, mismatch: "version",
			edit: func(tr, _ *bundlelock.Lock) { tr.SetVersion(2) }},
		{name: "another key differs", blob: blob, mismatch: "beyond the upload record",
			edit: func(_, l *bundlelock.Lock) { l.SetLastUpdated(6) }},
		{name: "older lineage differs", blob: blob, mismatch: "beyond the upload record",
			edit: func(tr, _ *bundlelock.Lock) { tr.SetLineage(nil) }},
		{name: "another blob than the newest upload", blob: "other", note: "only bundleHash"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, live := lockPair(t, blob)
			if tc.edit != nil {
				tc.edit(tr, live)
			}
			m, note := checkLock(live.Marshal(), tr.Marshal(), tc.blob)
			switch {
			case tc.mismatch == "" && m != nil:
				t.Fatalf("unexpected mismatch %v", m)
			case tc.mismatch != "" && (m == nil || !strings.Contains(m.String(), tc.mismatch)):
				t.Fatalf("mismatch %v, want one about %q", m, tc.mismatch)
			case tc.note != "" && !strings.Contains(note, tc.note):
				t.Fatalf("note %q, want %q", note, tc.note)
			}
		})
	}
}

// writeTree creates files (path → content) with mode 0644 under a new
// directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		writeFile(t, filepath.Join(dir, p), []byte(c), 0o644)
	}
	return dir
}

func TestCompare(t *testing.T) {
	base := map[string]string{
		"a.md":            "alpha\n",
		"sub/b.md":        "bravo\n",
		"receipts.ndjson": "{\"callId\":\"1\"}\n{\"callId\":\"2\"}",
	}
	link := func(t *testing.T, d string) {
		if err := os.Link(filepath.Join(d, "a.md"), filepath.Join(d, "sub/c.md")); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		both  func(t *testing.T, dir string) // applied to both trees first
		edit  func(t *testing.T, restored string)
		kinds []string // mismatch kinds, in path order
		note  string   // in the notes
	}{
		{name: "identical"},
		// What a restore gives back by policy, or an older snapshot
		// does not record, is a note.
		{name: "a stripped setuid bit", note: "a.md: special bits differ (live 4755, restored 0755): a restore never sets setuid",
			both: func(t *testing.T, d string) { os.Chmod(filepath.Join(d, "a.md"), 0o755|fs.ModeSetuid) },
			edit: func(t *testing.T, d string) { os.Chmod(filepath.Join(d, "a.md"), 0o755) }},
		{name: "a sticky bit not recorded", note: "sub: special bits differ (live 1755, restored 0755): the snapshot may not record them",
			both: func(t *testing.T, d string) { os.Chmod(filepath.Join(d, "sub"), 0o755|fs.ModeSticky) },
			edit: func(t *testing.T, d string) { os.Chmod(filepath.Join(d, "sub"), 0o755) }},
		{name: "a link restored as a link", both: link},
		{name: "a link restored as a file of its own", both: link,
			note: "sub/c.md: a hard link of a.md in the live brain, a file of its own restored",
			edit: func(t *testing.T, d string) {
				os.Remove(filepath.Join(d, "sub/c.md"))
				writeFile(t, filepath.Join(d, "sub/c.md"), []byte("alpha\n"), 0o644)
			}},
		{name: "content, same size", kinds: []string{"content"},
			edit: func(t *testing.T, d string) { writeFile(t, filepath.Join(d, "a.md"), []byte("alphA\n"), 0o644) }},
		{name: "size", kinds: []string{"size"},
			edit: func(t *testing.T, d string) { writeFile(t, filepath.Join(d, "a.md"), []byte("alpha!\n"), 0o644) }},
		{name: "file mode", kinds: []string{"mode"},
			edit: func(t *testing.T, d string) { os.Chmod(filepath.Join(d, "sub/b.md"), 0o600) }},
		{name: "directory mode", kinds: []string{"mode"},
			edit: func(t *testing.T, d string) { os.Chmod(filepath.Join(d, "sub"), 0o700) }},
		{name: "missing and extra", kinds: []string{"extra", "missing"},
			edit: func(t *testing.T, d string) {
				os.Remove(filepath.Join(d, "a.md"))
				writeFile(t, filepath.Join(d, "0-new.md"), nil, 0o644)
			}},
		{name: "type", kinds: []string{"type"},
			edit: func(t *testing.T, d string) {
				os.Remove(filepath.Join(d, "a.md"))
				os.Mkdir(filepath.Join(d, "a.md"), 0o755)
			}},
		{name: "fewer receipts restored is fine", note: "the rest arrived after the snapshot",
			edit: func(t *testing.T, d string) {
				writeFile(t, filepath.Join(d, "receipts.ndjson"), []byte("{\"callId\":\"2\"}"), 0o644)
			}},
		{name: "a receipt the live brain lacks", kinds: []string{"receipts"},
			edit: func(t *testing.T, d string) {
				writeFile(t, filepath.Join(d, "receipts.ndjson"), []byte("{\"callId\":\"3\"}"), 0o644)
			}},
	}
	for _, tc := range tests {
		for _, sums := range []bool{false, true} {
			name := tc.name + map[bool]string{false: "/literal", true: "/sha256"}[sums]
			t.Run(name, func(t *testing.T) {
				live, restored := writeTree(t, base), writeTree(t, base)
				if tc.both != nil {
					tc.both(t, live)
					tc.both(t, restored)
				}
				if tc.edit != nil {
					tc.edit(t, restored)
				}
				lm, err := scan(t.Context(), live, sums)
				if err != nil {
					t.Fatal(err)
				}
				gm, err := scan(t.Context(), restored, sums)
				if err != nil {
					t.Fatal(err)
				}
				var same contentFunc
				if !sums {
					same = literal(live, restored)
				}
				c, err := compare(lm, gm, "blob", same)
				if err != nil {
					t.Fatal(err)
				}
				var kinds []string
				for _, m := range c.mismatches {
					kinds = append(kinds, m.Kind)
				}
				if !slices.Equal(kinds, tc.kinds) {
					t.Errorf("mismatches %v, want kinds %v", c.mismatches, tc.kinds)
				}
				if notes := strings.Join(c.notes, "\n"); tc.note != "" && !strings.Contains(notes, tc.note) || tc.note == "" && notes != "" {
					t.Errorf("notes %q, want %q", notes, tc.note)
				}
				if e := exact(lm, gm); sums && (len(e) == 0) != (tc.edit == nil) {
					t.Errorf("exact: %v", e)
				}
			})
		}
	}
}

func TestSameBytes(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("0123456789", 100_000) // spans several chunks
	tests := []struct {
		a, b string
		want bool
	}{
		{"", "", true},
		{big, big, true},
		{big, big[:len(big)-1] + "X", false},
		{big, big + "0", false},
		{big + "0", big, false},
	}
	for i, tc := range tests {
		pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		os.WriteFile(pa, []byte(tc.a), 0o644)
		os.WriteFile(pb, []byte(tc.b), 0o644)
		if got, err := sameBytes(pa, pb); err != nil || got != tc.want {
			t.Errorf("case %d: %v, %v; want %v", i, got, err, tc.want)
		}
	}
}

// TestMovedOn: a difference the live brain explains by having changed
// since the snapshot — the entry itself, or for one it no longer holds
// the nearest directory above it — is the brain moving on; anything else
// is unexplained, and so are receipts and re-hash differences and every
// difference when the snapshot's time is not known.
func TestMovedOn(t *testing.T) {
	taken := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	before, after := taken.Add(-time.Hour), taken.Add(time.Minute)
	live := &manifest{rootChanged: before, entries: map[string]entry{
		"new.md":        {kind: kindFile, changed: after},
		"old.md":        {kind: kindFile, changed: before},
		"touched.md":    {kind: kindFile, changed: taken.Add(-time.Second)}, // within the grace
		"skills":        {kind: kindDir, changed: after},
		"notes":         {kind: kindDir, changed: before},
		"notes/deep":    {kind: kindDir, changed: before},
		"receipts.json": {kind: kindFile, changed: after},
	}}
	ms := []Mismatch{
		{Path: "new.md", Kind: "missing"},           // added since
		{Path: "old.md", Kind: "content"},           // changed behind its timestamp
		{Path: "touched.md", Kind: "mode"},          // changed as the snapshot began
		{Path: "skills/gone.md", Kind: "extra"},     // removed since: its directory changed
		{Path: "notes/deep/gone.md", Kind: "extra"}, // gone, its directories not changed
		{Path: "gone/x/y.md", Kind: "extra"},        // gone with its directories: the root did not change
		{Path: "receipts.ndjson", Kind: "receipts"},
		{Path: ".", Kind: "hash"},
	}
	moved, rest := movedOn(ms, live, taken)
	paths := func(ms []Mismatch) string {
		var ps []string
		for _, m := range ms {
			ps = append(ps, m.Path)
		}
		return strings.Join(ps, ",")
	}
	if got, want := paths(moved), "new.md,touched.md,skills/gone.md"; got != want {
		t.Errorf("moved on: %s, want %s", got, want)
	}
	if got, want := paths(rest), "old.md,notes/deep/gone.md,gone/x/y.md,receipts.ndjson,."; got != want {
		t.Errorf("unexplained: %s, want %s", got, want)
	}
	live.rootChanged = after
	if moved, _ := movedOn([]Mismatch{{Path: "gone/x/y.md", Kind: "extra"}}, live, taken); len(moved) != 1 {
		t.Error("a tree removed from the root since the snapshot is not the brain moving on")
	}
	if moved, _ := movedOn(ms, live, time.Time{}); len(moved) != 0 {
		t.Errorf("without the snapshot's time: %v moved on", moved)
	}
}

// TestCompareSymlinks: a symlink is compared as a symlink (its target);
// one the restore lacks is a note (a symlink alone changes no bundle
// hash, so a snapshot may predate it), one with another target a
// difference, in the read-only comparison and the destructive drill's
// exact one. A directory restored less o+w is a note, not a difference.
func TestCompareSymlinks(t *testing.T) {
	m := func(entries map[string]entry) *manifest {
		return &manifest{entries: entries, sums: true}
	}
	live := m(map[string]entry{
		"same":  {kind: kindSymlink, mode: 0o777, target: "a"},
		"moved": {kind: kindSymlink, mode: 0o777, target: "/etc/passwd"},
		"gone":  {kind: kindSymlink, mode: 0o777, target: "../x"},
		"pub":   {kind: kindDir, mode: 0o777 | fs.ModeSticky},
	})
	got := m(map[string]entry{
		"same":  {kind: kindSymlink, mode: 0o777, target: "a"},
		"moved": {kind: kindSymlink, mode: 0o777, target: "/etc/shadow"},
		"pub":   {kind: kindDir, mode: 0o775 | fs.ModeSticky},
	})
	c, err := compare(live, got, "blob", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.mismatches) != 1 || c.mismatches[0] != (Mismatch{Path: "moved", Kind: "symlink", Want: "-> /etc/passwd", Got: "-> /etc/shadow"}) {
		t.Errorf("mismatches %v", c.mismatches)
	}
	notes := strings.Join(c.notes, "\n")
	if c.symlinks != 1 || c.dirs != 1 || !strings.Contains(notes, "gone is a symlink (-> ../x) the snapshot does not hold") || !strings.Contains(notes, "pub: restored at mode 1775") {
		t.Errorf("symlinks %d, dirs %d, notes %q", c.symlinks, c.dirs, notes)
	}
	ms := exact(live, got)
	kinds := map[string]string{}
	for _, x := range ms {
		kinds[x.Path] = x.Kind
	}
	if kinds["moved"] != "symlink" || kinds["gone"] != "missing" || kinds["same"] != "" || len(ms) != 3 {
		t.Errorf("exact: %v", ms)
	}
}
