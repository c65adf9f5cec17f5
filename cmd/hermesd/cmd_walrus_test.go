package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// notifyBuffer is a concurrency-safe buffer that signals every write.
type notifyBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newNotifyBuffer() *notifyBuffer { return &notifyBuffer{wrote: make(chan struct{}, 1)} }

func (b *notifyBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (b *notifyBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the buffer matches re, or fails the test.
func (b *notifyBuffer) waitFor(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if m := re.FindStringSubmatch(b.String()); m != nil {
			return m
		}
		select {
		case <-b.wrote:
		case <-deadline:
			t.Fatalf("no %v in output:\n%s", re, b.String())
		}
	}
}

func TestWalrusServe(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := newNotifyBuffer()
	done := make(chan error, 1)
	dir := t.TempDir()
	go func() {
		done <- Run(ctx, []string{"walrus", "serve", "--dir", dir, "--listen", "127.0.0.1:0", "--epoch", "2h", "--max-body", "1KiB",
			"--shards", "10", "--storage-price", "7", "--write-price", "3"},
			strings.NewReader(""), io.Discard, stderr)
	}()
	url := stderr.waitFor(t, regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+)`))[1]

	resp, err := http.Get(url + "/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, url+"/v1/blobs", bytes.NewReader(make([]byte, 2048)))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("--max-body not applied: %d", resp.StatusCode)
	}
	// The store's charge: 29 bytes over 10 shards (p=4, s=7) encode to
	// 10·(2·11 + 10·64 + 32) = 6,940 bytes, one unit, at 7 per epoch + 3.
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodPut, url+"/v1/blobs?epochs=2", bytes.NewReader(make([]byte, 29)))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(answer, []byte(`"storageSize":6940}`)) || !bytes.Contains(answer, []byte(`"cost":17}`)) {
		t.Errorf("--shards and prices not applied: %s", answer)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	if n := strings.Count(stderr.String(), "listening"); n != 1 {
		t.Errorf("listen address logged %d times", n)
	}
}

func TestWalrusServeUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"walrus", "serve", "--dir", "x", "--listen", "0.0.0.0:31415"}, "--allow-remote"},
		{[]string{"walrus", "serve", "--listen", "127.0.0.1:0"}, "--dir DIR is required"},
		{[]string{"walrus", "serve", "--dir", "x", "--max-body", "lots"}, ""},
		{[]string{"walrus", "serve", "--dir", "x", "--shards", "0"}, "--shards"},
		{[]string{"walrus", "serve", "--dir", "x", "--storage-price", "0", "--write-price", "0"}, "cannot both be 0"},
		{[]string{"walrus", "bogus"}, "unknown subcommand"},
	}
	for _, tt := range tests {
		err := Run(t.Context(), tt.args, strings.NewReader(""), io.Discard, io.Discard)
		if exitCode(err) != exitUsage || !strings.Contains(errString(err), tt.want) {
			t.Errorf("%v: exit %d, %v", tt.args, exitCode(err), err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
