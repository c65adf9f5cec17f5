package sqlite

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/hermesd/hermesd/internal/fsys"
)

// Magic is the first 16 bytes of every SQLite 3 database file.
const Magic = "SQLite format 3\x00"

// Side-file suffixes of a database family (SQLite's unix VFS names them
// after the database: memory.db-wal, memory.db-shm, memory.db-journal).
const (
	walSuffix     = "-wal"
	shmSuffix     = "-shm"
	journalSuffix = "-journal"
)

// dbExtensions are names that mark a database wherever it lives.
var dbExtensions = []string{".db", ".sqlite", ".sqlite3", ".db3"}

// Find returns, sorted, the SQLite databases of the tree at root among
// paths (relative, '/'-separated, as hash.Cache.Files lists them).
//
// Only likely names are opened, so that a brain of many files costs a few
// opens: files at the top level, files with a database extension (.db,
// .sqlite, .sqlite3, .db3), and files that have (or are named by) a -wal,
// -journal or -shm side file in paths. A database being written always has
// a side file; the others catch idle ones that may start being written.
// A candidate is a database if it is a regular file (never a symlink) whose
// first 16 bytes are SQLite's magic; candidates that are missing, or are
// not regular files, are skipped.
func Find(root string, paths []string) ([]string, error) {
	cands := map[string]bool{}
	for _, p := range paths {
		if db, ok := sideFileOf(p); ok {
			cands[db] = true
			continue
		}
		if !strings.Contains(p, "/") || slices.Contains(dbExtensions, path.Ext(p)) {
			cands[p] = true
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	r, err := fsys.OpenRoot(root)
	if err != nil {
		if fsys.IsGone(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	defer r.Close()
	var dbs []string
	for p := range cands {
		if fsys.CheckName(p) != nil {
			continue
		}
		ok, err := isDatabase(r, p)
		if err != nil {
			return nil, err
		}
		if ok {
			dbs = append(dbs, p)
		}
	}
	slices.Sort(dbs)
	return dbs, nil
}

// sideFileOf returns the database a side file belongs to.
func sideFileOf(p string) (string, bool) {
	for _, s := range []string{walSuffix, shmSuffix, journalSuffix} {
		if db, ok := strings.CutSuffix(p, s); ok && db != "" && !strings.HasSuffix(db, "/") {
			return db, true
		}
	}
	return "", false
}

// isDatabase reports whether rel is a regular file that starts with Magic.
func isDatabase(r fsys.Root, rel string) (bool, error) {
	f, err := r.Open(rel)
	if err != nil {
		if fsys.IsGone(err) {
			return false, nil
		}
		return false, fmt.Errorf("sqlite: open %s: %w", rel, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("sqlite: stat %s: %w", rel, err)
	}
	if !st.Mode.IsRegular() || st.Size < int64(len(Magic)) {
		return false, nil
	}
	var head [len(Magic)]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return false, nil // shrank since the stat
		}
		return false, fmt.Errorf("sqlite: read %s: %w", rel, err)
	}
	return bytes.Equal(head[:], []byte(Magic)), nil
}
