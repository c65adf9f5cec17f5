package sqlite

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/tarball"
)

// The tests drive a real SQLite: python3's sqlite3 module, in processes of
// their own (SQLite's POSIX locks are per process), through
// testdata/driver.py.

// replyTimeout bounds every wait for the driver; generous, for a loaded
// machine.
const replyTimeout = 60 * time.Second

var (
	pythonOnce sync.Once
	pythonErr  error
	pythonOut  []byte
	pythonExe  string
)

// python returns the python3 interpreter, failing the test loudly when it
// or its sqlite3 module is missing: these tests must not be skipped. It is
// the interpreter itself, not a launcher (pyenv's shim costs a second or
// more per process).
func python(t testing.TB) string {
	t.Helper()
	pythonOnce.Do(func() {
		pythonOut, pythonErr = exec.Command("python3", "-c", "import sqlite3, sys; print(sys.executable)").CombinedOutput()
		pythonExe = strings.TrimSpace(string(pythonOut))
	})
	if pythonErr != nil || pythonExe == "" {
		t.Fatalf("these tests need python3 with its sqlite3 module, as a real SQLite writer; install it "+
			"(Debian/Ubuntu: apt-get install python3; Alpine: apk add python3; Fedora: dnf install python3): %v: %s", pythonErr, pythonOut)
	}
	return pythonExe
}

func driver(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "driver.py"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// proc is a running driver process: JSON lines in, JSON lines out.
type proc struct {
	t     testing.TB
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan []byte
	done  chan struct{} // closed once the process has exited
	err   error         // its exit status, set before done is closed
}

func start(t testing.TB, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(python(t), append([]string{driver(t)}, args...)...)
	cmd.Stderr = &testWriter{t: t}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, in: in, lines: make(chan []byte, 64), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			p.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		in.Close()
		select {
		case <-p.done:
		case <-time.After(replyTimeout):
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// next decodes the next line into v.
func (p *proc) next(v any) {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			<-p.done
			p.t.Fatalf("driver exited: %v", p.err)
		}
		if err := json.Unmarshal(line, v); err != nil {
			p.t.Fatalf("driver said %q: %v", line, err)
		}
	case <-time.After(replyTimeout):
		p.t.Fatal("driver did not answer")
	}
}

func (p *proc) send(v any) {
	p.t.Helper()
	b, _ := json.Marshal(v)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatal(err)
	}
}

// reply is the shell's answer to one statement.
type reply struct {
	OK   bool    `json:"ok"`
	MS   float64 `json:"ms"`
	Rows [][]any `json:"rows"`
	Err  string  `json:"err"`
}

// shell is a driver connection that runs one statement at a time.
type shell struct{ *proc }

func openShell(t testing.TB, db string) shell { return shell{start(t, "shell", db)} }

// exec runs sql and fails the test if SQLite refused it.
func (s shell) exec(sql string, args ...any) reply {
	s.t.Helper()
	s.send(map[string]any{"sql": sql, "args": append([]any{}, args...)})
	var r reply
	s.next(&r)
	if !r.OK {
		s.t.Fatalf("%s: %s", sql, r.Err)
	}
	return r
}

// crash ends the process without rolling back or unlocking anything.
func (s shell) crash() {
	s.t.Helper()
	s.send(map[string]string{"op": "crash"})
	select {
	case <-s.done:
	case <-time.After(replyTimeout):
		s.t.Fatal("driver did not exit")
	}
}

// checked is what driver.py check reports.
type checked struct {
	Integrity   string `json:"integrity"`
	JournalMode string `json:"journal_mode"`
	Rows        *int64 `json:"rows"`
	N           *int64 `json:"n"`
}

func check(t testing.TB, db string) checked {
	t.Helper()
	out, err := exec.Command(python(t), driver(t), "check", db).Output()
	if err != nil {
		t.Fatalf("check %s: %v", db, err)
	}
	var c checked
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatalf("check %s said %q: %v", db, out, err)
	}
	return c
}

// restored is one snapshot of a brain taken through the frozen copies and
// restored: the overlay's bundle hash and the extracted tree.
type restored struct {
	digest hash.Digest
	dir    string
	files  int
}

// snapshotAndRestore does what the daemon does with frozen databases:
// hash the brain through the overlay (with cache when given), archive it
// through the same overlay, extract the archive into a fresh directory,
// and check that the extracted tree hashes to the same bundle hash.
func snapshotAndRestore(t testing.TB, ctx context.Context, brain string, cache *hash.Cache, frozen ...*Frozen) restored {
	t.Helper()
	ov, err := Overlay(frozen...)
	if err != nil {
		t.Fatal(err)
	}
	var want hash.Digest
	if cache != nil {
		res, err := cache.UpdateOverlay(ctx, []string{}, ov)
		if err != nil {
			t.Fatal(err)
		}
		want = res.Digest
	}
	dir, err := hash.Dir(ctx, brain, hash.Options{Overlay: ov})
	if err != nil {
		t.Fatal(err)
	}
	if cache != nil && dir.Digest != want {
		t.Fatalf("cache with overlay = %s, Dir with overlay = %s", want, dir.Digest)
	}
	want = dir.Digest

	target := filepath.Join(t.TempDir(), "restored")
	pr, pw := io.Pipe()
	written := make(chan tarball.Manifest, 1)
	go func() {
		m, err := tarball.Write(ctx, pw, brain, tarball.WriteOptions{Overlay: ov})
		pw.CloseWithError(err)
		written <- m
	}()
	if _, err := tarball.Extract(ctx, pr, target, tarball.ExtractOptions{}); err != nil {
		pr.CloseWithError(err)
		<-written
		t.Fatalf("archive and extract: %v", err)
	}
	man := <-written
	files := make([]hash.File, len(man.Files))
	for i, f := range man.Files {
		files[i] = hash.File{Path: f.Path, Size: f.Size, Mode: f.Mode, SHA256: f.SHA256}
	}
	if got := hash.FromFiles(files); got != want {
		t.Fatalf("the archive holds %s, the overlay hashed %s", got, want)
	}
	got, err := hash.Dir(ctx, target, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != want {
		t.Fatalf("restored tree hashes to %s, the snapshot's hash is %s", got.Digest, want)
	}
	return restored{digest: want, dir: target, files: got.Count}
}

// testWriter sends a process's stderr to the test log.
type testWriter struct {
	t  testing.TB
	mu sync.Mutex
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Logf("driver: %s", b)
	return len(b), nil
}

func writeFile(t testing.TB, root, rel string, data []byte) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// mode names the two journal modes the tests cover.
var modes = []struct {
	name, pragma string
	wal          bool
}{
	{"rollback", "DELETE", false},
	{"wal", "WAL", true},
}

// newDB creates brain/memory.db in the given journal mode with n rows,
// through a shell that stays connected (so in WAL mode the -wal and -shm
// exist), plus a file that is not a database.
func newDB(t *testing.T, journalMode string, n int) (brain string, sh shell) {
	t.Helper()
	brain = t.TempDir()
	writeFile(t, brain, "system.md", []byte("You are a test agent.\n"))
	sh = openShell(t, filepath.Join(brain, "memory.db"))
	if got := sh.exec("PRAGMA journal_mode=" + journalMode).Rows[0][0]; got != map[string]string{"DELETE": "delete", "WAL": "wal"}[journalMode] {
		t.Fatalf("journal_mode = %v", got)
	}
	sh.exec("CREATE TABLE rows(id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
	sh.exec("CREATE TABLE meta(k TEXT PRIMARY KEY, n INTEGER NOT NULL)")
	sh.exec("INSERT INTO meta VALUES('rows', 0)")
	insert(sh, n)
	return brain, sh
}

// insert commits n rows of 100 to 8,000 random bytes in one transaction.
func insert(sh shell, n int) {
	sh.exec("BEGIN IMMEDIATE")
	for i := range n {
		sh.exec("INSERT INTO rows(body) VALUES(randomblob(?))", 100+(i*997)%7900)
	}
	sh.exec("UPDATE meta SET n = n + ? WHERE k = 'rows'", n)
	sh.exec("COMMIT")
}

func wantRows(t *testing.T, db string, n int64) {
	t.Helper()
	c := check(t, db)
	if c.Integrity != "ok" || c.Rows == nil || *c.Rows != n || c.N == nil || *c.N != n {
		t.Errorf("%s: integrity %q, %v rows, meta %v; want ok and %d", db, c.Integrity, deref(c.Rows), deref(c.N), n)
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
