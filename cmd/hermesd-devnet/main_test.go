package main

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestUsage: mistakes exit 2 with one line on stderr before anything
// starts; -h prints the usage on stdout and exits 0.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // in stdout for 0, in stderr otherwise
	}{
		{[]string{"-h"}, exitOK, "Usage: hermesd-devnet"},
		{[]string{"-nosuchflag"}, exitUsage, "flag provided but not defined"},
		{[]string{"-format", "v9"}, exitUsage, `-format "v9" is not one of`},
		{[]string{"-format", "seal", "-seal-servers", "0"}, exitUsage, "needs -seal-servers"},
		{[]string{"-seal-servers", "17"}, exitUsage, "between 0 and 16"},
		{[]string{"-agent", "a", "-agents-from", "x.yml"}, exitUsage, "exclude each other"},
		{[]string{"hermesd", "run"}, exitUsage, "goes after --"},
		{[]string{"--"}, exitUsage, "no command after --"},
		{[]string{"-nodes", "-1"}, exitUsage, "-nodes must be between 0 and 64"},
		{[]string{"-nodes", "65"}, exitUsage, "-nodes must be between 0 and 64"},
		{[]string{"-nodes", "3", "-lease-ttl", "-1s"}, exitUsage, "-lease-ttl must not be negative"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(t.Context(), tc.args, &cmdEnv{stdout: &stdout, stderr: &stderr})
			code := report(&stderr, err)
			out := stderr.String()
			if tc.code == exitOK {
				out = stdout.String()
				if stderr.Len() > 0 {
					t.Errorf("stderr: %s", stderr.String())
				}
			}
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, output %q; want %d and %q", code, out, tc.code, tc.want)
			}
		})
	}
}

// TestSupervise: the child gets the configuration in HERMESD_CONFIG, every
// signal is passed on to it, and its exit status becomes ours (128+N when
// signal N killed it, as a shell reports it).
func TestSupervise(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		signal bool // send SIGINT once the child says ready
		code   int
	}{
		{"exit 0", `echo "ready $HERMESD_CONFIG"`, false, 0},
		{"exit 5", `echo "ready $HERMESD_CONFIG"; exit 5`, false, 5},
		{"killed", `echo "ready $HERMESD_CONFIG"; kill -TERM $$`, false, 128 + 15},
		{"signal passed on", `trap 'kill $! 2>/dev/null; exit 7' INT; echo "ready $HERMESD_CONFIG"; sleep 60 & wait`, true, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			sigs := make(chan os.Signal, 1)
			env := &cmdEnv{stdout: w, stderr: w, signals: sigs}
			done := make(chan error, 1)
			go func() {
				done <- supervise([]string{"/bin/sh", "-c", tc.script}, "/devnet/hermesd.yml", env)
				w.Close()
			}()
			lines := bufio.NewScanner(r)
			ready := false
			for !ready && lines.Scan() {
				if l := lines.Text(); strings.HasPrefix(l, "ready") {
					if l != "ready /devnet/hermesd.yml" {
						t.Errorf("the child saw %q", l)
					}
					ready = true
				}
			}
			if !ready {
				t.Fatal("the child never said ready")
			}
			if tc.signal {
				sigs <- os.Interrupt
			}
			var err2 error
			select {
			case err2 = <-done:
			case <-time.After(time.Minute):
				t.Fatal("supervise did not return")
			}
			if code := report(&bytes.Buffer{}, err2); code != tc.code {
				t.Fatalf("exit %d (%v), want %d", code, err2, tc.code)
			}
		})
	}
}
