package tarball

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/fsys"
)

// TestWriteOverlay: Write through an overlay archives exactly the tree the
// overlay shows: byte for byte the archive of that tree written out.
func TestWriteOverlay(t *testing.T) {
	live := filepath.Join(t.TempDir(), "live")
	want := filepath.Join(t.TempDir(), "want")
	subs := t.TempDir()
	big := strings.Repeat("frozen ", 50_000) // > smallMax: streamed
	build(t, live, append(testTree(),
		entry{path: "memory.db", mode: 0o644, content: "live, changing"},
		entry{path: "memory.db-shm", mode: 0o644, content: "index"},
		entry{path: "skills/notes.db-journal", mode: 0o600, content: "journal"},
	))
	build(t, want, append(testTree(),
		entry{path: "memory.db", mode: 0o644, content: big},
		entry{path: "memory.db-wal", mode: 0o640, content: "frozen wal"},
	))
	for name, c := range map[string]struct {
		content string
		mode    os.FileMode
	}{"db": {big, 0o644}, "wal": {"frozen wal", 0o640}} {
		p := filepath.Join(subs, name)
		if err := os.WriteFile(p, []byte(c.content), c.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, c.mode); err != nil {
			t.Fatal(err)
		}
	}
	ov, err := fsys.NewOverlay(map[string]string{
		"memory.db":     filepath.Join(subs, "db"),
		"memory.db-wal": filepath.Join(subs, "wal"), // absent from the live tree
	}, []string{"memory.db-shm", "skills/notes.db-journal"})
	if err != nil {
		t.Fatal(err)
	}
	got, gm := writeTar(t, live, WriteOptions{Overlay: ov})
	exp, em := writeTar(t, want, WriteOptions{})
	if !bytes.Equal(got, exp) {
		t.Fatalf("archive through the overlay (%d bytes) differs from the archive of the tree it shows (%d bytes):\n%+v\n%+v",
			len(got), len(exp), gm.Files, em.Files)
	}
	if plain, _ := writeTar(t, live, WriteOptions{}); bytes.Equal(plain, got) {
		t.Error("the overlay changed nothing")
	}
}
