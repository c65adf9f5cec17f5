package main

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/wait"
)

// syncBuffer is a bytes.Buffer safe for the children's writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSuperviseNodes: the command runs once per node with that node's
// configuration, its lines prefixed with the node's name; a node that
// exits on its own leaves the others running (and is reported); a signal
// reaches every node still running, and their statuses decide ours.
func TestSuperviseNodes(t *testing.T) {
	nodes := []devnet.Node{{Name: "node-1", ConfigPath: "/f/node-1.yml"}, {Name: "node-2", ConfigPath: "/f/node-2.yml"}, {Name: "node-3", ConfigPath: "/f/node-3.yml"}}
	// node-2 exits 9 by itself; the others wait for SIGINT and exit 0,
	// or 7 for node-3 when told so.
	// The trap is set before "ready": the test interrupts once every
	// node said so, and a shell interrupted before its trap dies of it.
	script := `trap 'kill $! 2>/dev/null; case "$HERMESD_CONFIG" in *node-3*) exit $CODE3;; esac; exit 0' INT
echo "ready $HERMESD_CONFIG"
case "$HERMESD_CONFIG" in
*node-2*) exit 9;;
esac
sleep 60 & wait`
	for _, tc := range []struct {
		name  string
		code3 string
		want  int
	}{
		{"clean stop", "0", 0},
		{"a node fails to stop", "7", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CODE3", tc.code3)
			out, errOut := &syncBuffer{}, &syncBuffer{}
			sigs := make(chan os.Signal, 1)
			env := &cmdEnv{stdout: out, stderr: errOut, signals: sigs}
			done := make(chan error, 1)
			go func() { done <- superviseNodes([]string{"/bin/sh", "-c", script}, nodes, env) }()
			for _, n := range nodes {
				line := n.Name + " | ready " + n.ConfigPath
				wait.For(t, "the line "+line, func() bool { return strings.Contains(out.String(), line) })
			}
			wait.For(t, "node-2's exit reported", func() bool { return strings.Contains(errOut.String(), "node-2: ") })
			if !strings.Contains(errOut.String(), "2 node(s) still running") {
				t.Errorf("report: %s", errOut.String())
			}
			select {
			case err := <-done:
				t.Fatalf("returned with two nodes running: %v", err)
			default:
			}
			sigs <- os.Interrupt
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("superviseNodes did not return")
			}
			if code := report(&bytes.Buffer{}, err); code != tc.want {
				t.Fatalf("exit %d (%v), want %d", code, err, tc.want)
			}
		})
	}
}

// TestPrefixWriter: whole lines only, each after its prefix.
func TestPrefixWriter(t *testing.T) {
	var b bytes.Buffer
	p := &prefixWriter{w: &b, mu: &sync.Mutex{}, prefix: []byte("n1 | ")}
	p.Write([]byte("one\ntw"))
	p.Write([]byte("o\nthr"))
	if got := b.String(); got != "n1 | one\nn1 | two\n" {
		t.Fatalf("%q", got)
	}
	p.flush()
	if got := b.String(); got != "n1 | one\nn1 | two\nn1 | thr\n" {
		t.Fatalf("after flush: %q", got)
	}
}
