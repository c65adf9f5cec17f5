package sqlite

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestFind(t *testing.T) {
	brain := t.TempDir()
	db := append([]byte(Magic), make([]byte, 84)...)
	for rel, data := range map[string][]byte{
		"memory.db":          db,
		"notes.txt":          []byte("not a database, but at the top"),
		"short.db":           []byte("SQLite"),
		"sub/x.db":           db,
		"sub/y":              db, // found through its -wal
		"sub/y-wal":          nil,
		"sub/z":              db, // no extension, no side file: not looked at
		"sub/fake.sqlite":    []byte("SQLite format 2\x00 and more bytes"),
		"sub/orphan.db3":     db,
		"sub/orphan.db3-shm": nil,
		"deep/a/b/c.sqlite3": db,
	} {
		writeFile(t, brain, rel, data)
	}
	if err := os.Symlink("memory.db", filepath.Join(brain, "link.db")); err != nil {
		t.Fatal(err)
	}
	paths := []string{"memory.db", "notes.txt", "short.db", "sub/x.db", "sub/y", "sub/y-wal", "sub/z",
		"sub/fake.sqlite", "sub/orphan.db3-shm", "deep/a/b/c.sqlite3", "link.db", "gone.db", "-wal"}
	got, err := Find(brain, paths)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"deep/a/b/c.sqlite3", "memory.db", "sub/orphan.db3", "sub/x.db", "sub/y"}
	if !slices.Equal(got, want) {
		t.Errorf("Find = %q, want %q", got, want)
	}
	if got, err := Find(filepath.Join(brain, "missing"), paths); err != nil || got != nil {
		t.Errorf("Find in a missing tree = %q, %v", got, err)
	}
}
