package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/hermesd/hermesd/scripts/benchtool/brains"
)

// writerScript is the agents' SQLite writer: one python3 process with its
// sqlite3 module (the SQLite library itself) that every agent's change goes
// through, one command a line on stdin, one answer a line on stdout:
//
//	make PATH ROWS   create memory.db with ROWS memories (one transaction)
//	ins PATH SEED    insert one memory of 4,000 bytes (its own transaction)
//
// Each answer is "ok SIZE" (the database file's size after the write) or
// "err MESSAGE". A memory is 4,000 bytes of text (hex of seeded random
// bytes), so one fits a 4 KiB page: an insert appends a leaf page to the
// table, one to its index, and updates the header and interior pages, as
// an agent appending memories does. synchronous=OFF only skips fsyncs
// (a thousand writes a tick would otherwise wait on the disk); the bytes
// written are the same. Connections are opened per write, as separate
// agents would, so no lock is held between writes: the daemon copies each
// database under SQLite's own locks while no writer holds them.
const writerScript = `
import os, random, sqlite3, sys
SCHEMA = """
PRAGMA page_size=4096;
CREATE TABLE memories(id INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX memories_at ON memories(at);
"""
def body(seed):
    return random.Random(seed).randbytes(2000).hex()
def connect(path):
    con = sqlite3.connect(path, timeout=60, isolation_level=None)
    con.execute("PRAGMA synchronous=OFF")
    return con
for line in sys.stdin:
    parts = line.split()
    try:
        if parts[0] == "make":
            con = connect(parts[1])
            con.executescript(SCHEMA)
            con.execute("BEGIN")
            for i in range(int(parts[2])):
                con.execute("INSERT INTO memories(at, kind, body) VALUES (?, ?, ?)", (i, "seed", body("seed-%d" % i)))
            con.execute("COMMIT")
            con.close()
        elif parts[0] == "ins":
            con = connect(parts[1])
            con.execute("INSERT INTO memories(at, kind, body) VALUES ((SELECT coalesce(max(at), 0) + 1 FROM memories), ?, ?)",
                        ("note", body(parts[2])))
            con.close()
        else:
            raise ValueError("unknown command " + parts[0])
        print("ok", os.path.getsize(parts[1]), flush=True)
    except Exception as e:
        print("err", str(e).replace("\n", " "), flush=True)
`

// writer is the running python3 writer.
type writer struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Scanner
}

func startWriter(ctx context.Context, python string) (*writer, error) {
	cmd := exec.CommandContext(ctx, python, "-c", writerScript)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s (python3 with its sqlite3 module writes the agents' memory.db): %w", python, err)
	}
	return &writer{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// do sends one command and returns the database's size after it.
func (w *writer) do(args ...string) (int64, error) {
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\r\n") {
			return 0, fmt.Errorf("sqlite writer: argument %q", a)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := fmt.Fprintln(w.in, strings.Join(args, " ")); err != nil {
		return 0, fmt.Errorf("sqlite writer: %w", err)
	}
	if !w.out.Scan() {
		return 0, fmt.Errorf("sqlite writer exited: %v", w.out.Err())
	}
	status, rest, _ := strings.Cut(w.out.Text(), " ")
	if status != "ok" {
		return 0, fmt.Errorf("sqlite writer: %s %s: %s", args[0], args[1], rest)
	}
	return strconv.ParseInt(rest, 10, 64)
}

// insert appends one memory of about 4 KiB to the database at path.
func (w *writer) insert(path, seed string) (int64, error) { return w.do("ins", path, seed) }

func (w *writer) close() error {
	w.in.Close()
	return w.cmd.Wait()
}

// Brain layout: memory.db of templateRows memories (about 5 MiB), a
// system prompt and skill notes.
const (
	templateRows = 1240
	skillFiles   = 8
)

// makeTemplate writes the brain every agent starts from into dir.
func makeTemplate(w *writer, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "skills"), 0o755); err != nil {
		return err
	}
	db := filepath.Join(dir, "memory.db")
	if _, err := w.do("make", db, strconv.Itoa(templateRows)); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(26, 4))
	if _, err := brains.WriteMarkdown(filepath.Join(dir, "system.md"), 2048, rng); err != nil {
		return err
	}
	for i := range skillFiles {
		if _, err := brains.WriteMarkdown(filepath.Join(dir, "skills", fmt.Sprintf("skill-%02d.md", i)), 2048+rng.IntN(6*1024), rng); err != nil {
			return err
		}
	}
	return nil
}

// copyBrain copies the template into dir, then makes the brain the
// agent's own with one write through SQLite.
func copyBrain(w *writer, template, dir, id string) error {
	err := filepath.WalkDir(template, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(template, p)
		dst := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		return copyFile(p, dst)
	})
	if err != nil {
		return err
	}
	_, err = w.insert(filepath.Join(dir, "memory.db"), id+"-own")
	return err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// otherFiles counts the files of a brain besides memory.db, and their
// bytes: with the database's size, what one whole-brain blob holds.
func otherFiles(dir string) (files int, bytes int64, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == filepath.Join(dir, "memory.db") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files++
		bytes += info.Size()
		return nil
	})
	return files, bytes, err
}
