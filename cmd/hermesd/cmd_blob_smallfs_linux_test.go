package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/diskspace"
	"github.com/hermesd/hermesd/internal/smallfstest"
)

// TestBlobGetEndlessBodyStopsAtMargin: blob get of a body without
// Content-Length that never ends, onto a 16 MiB filesystem, stops at the
// free-space margin (not at ENOSPC) and leaves nothing behind.
func TestBlobGetEndlessBodyStopsAtMargin(t *testing.T) {
	smallfstest.Run(t, 16<<20, func(t *testing.T, small string) {
		t.Setenv(config.EnvPath, "")
		chunk := make([]byte, 64<<10)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK) // chunked: no Content-Length
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}))
		defer srv.Close()
		out := filepath.Join(small, "blob.bin")
		_, stderr, code := runCmd(t, "blob", "get", strings.Repeat("A", 43), "-o", out, "--aggregator", srv.URL)
		if code != exitFailure || !strings.Contains(stderr, diskspace.ErrNoSpace.Error()) || strings.Contains(stderr, "no space left on device") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if ents, _ := os.ReadDir(small); len(ents) != 0 {
			t.Errorf("left behind: %v", ents)
		}
		// The partial download is gone with its temporary file.
		var st unix.Statfs_t
		if err := unix.Statfs(small, &st); err != nil {
			t.Fatal(err)
		}
		if free := st.Bavail * uint64(st.Bsize); free < 15<<20 {
			t.Errorf("%d bytes free after the refusal", free)
		}
	})
}
