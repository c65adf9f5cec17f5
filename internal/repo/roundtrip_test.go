package repo

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermesd/hermesd/internal/hash"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"empty", func(t *testing.T, dir string) {}},
		{"one file", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"system.md": "You are a test agent.\n"})
		}},
		{"mixed", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{
				"system.md":               "You are a test agent.\n",
				"skills/reentrancy.md":    "---\nname: reentrancy\n---\nLook for re-entrant calls.\n",
				"skills/deep/a/b/c.md":    "deep",
				"notes/":                  "",
				"empty/inner/":            "",
				"ünïcødé/日本語.md":          "こんにちは",
				"emoji/🦀.txt":             "crab",
				".hidden":                 "dot",
				"zero":                    "",
				"skills/bundle.lock.json": "not the lock: it is nested",
				"bundle.lock.json":        `{"bundleHash":"0x00","version":1}`,
				"receipts.ndjson":         `{"callId":"a"}`,
			})
			if err := os.WriteFile(filepath.Join(dir, "memory.db"), randomBytes(1, 3<<20+12345), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chmod(filepath.Join(dir, "skills/reentrancy.md"), 0o444)
			os.Chmod(filepath.Join(dir, "notes"), 0o700)
			os.Chmod(filepath.Join(dir, "empty/inner"), 0o555)
			os.Symlink("system.md", filepath.Join(dir, "link.md"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			brain := t.TempDir()
			tt.setup(t, brain)
			f := newFx(t, 4<<20)
			res := f.snap(brain, nil)
			want, err := hash.Dir(context.Background(), brain, hash.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Commit.BundleHash != want.Digest || res.Commit.Files != int64(want.Count) || res.Commit.Bytes != want.Bytes {
				t.Fatalf("commit says %s, %d files, %d bytes; hasher says %s, %d, %d",
					res.Commit.BundleHash, res.Commit.Files, res.Commit.Bytes, want.Digest, want.Count, want.Bytes)
			}
			dir, rr := f.restore()
			// The symlink comes back as the same symlink, though it counts
			// toward no hash, count or size (like the hasher).
			mustEqualTree(t, brain, dir)
			if _, err := os.Lstat(filepath.Join(brain, "link.md")); err == nil && rr.Symlinks != 1 {
				t.Errorf("restored %d symlinks, want 1", rr.Symlinks)
			}
			if rr.BundleHash != want.Digest {
				t.Errorf("restore verified %s, want %s", rr.BundleHash, want.Digest)
			}
			got, err := hash.Dir(context.Background(), dir, hash.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Digest != want.Digest {
				t.Errorf("restored tree hashes to %s, want %s", got.Digest, want.Digest)
			}
		})
	}
}
