package hash

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCacheV1Loads: a cache file written before link counts were kept
// loads; its entries count one link each, so a file with more names is
// read again by the next pass, and the others are not.
func TestCacheV1Loads(t *testing.T) {
	// Reads an hour from now: no file is racy.
	defer func(old func() time.Time) { now = old }(now)
	now = func() time.Time { return time.Now().Add(time.Hour) }
	dir := t.TempDir()
	for _, p := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(dir, "c"), filepath.Join(dir, "d")); err != nil {
		t.Fatal(err)
	}
	c := NewCache(dir, Options{})
	if _, err := c.Rescan(context.Background()); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c.Save(&buf); err != nil {
		t.Fatal(err)
	}
	v1 := toV1(t, buf.Bytes())
	c2 := NewCache(dir, Options{})
	if err := c2.Load(bytes.NewReader(v1)); err != nil {
		t.Fatal(err)
	}
	res, err := c2.Rescan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Read != 2 || res.Digest != c.Digest() { // c and d, one file of two names
		t.Fatalf("after loading a v1 cache: read %d, %s (want 2, %s)", res.Read, res.Digest, c.Digest())
	}
}

// toV1 rewrites a v2 cache file as v1: the same entries without their
// link counts (each a single-byte uvarint here).
func toV1(t *testing.T, v2 []byte) []byte {
	t.Helper()
	c := NewCache(t.TempDir(), Options{})
	if err := c.Load(bytes.NewReader(v2)); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum := sha256.New()
	w := func(b []byte) { out.Write(b); sum.Write(b) }
	w([]byte(cacheMagicV1))
	w(uvarint(uint64(len(c.sorted))))
	for _, e := range c.sorted {
		w(uvarint(uint64(len(e.key))))
		w([]byte(e.key))
		w(varint(e.size))
		w(varint(e.st.Mtime))
		w(varint(e.st.Ctime))
		w(uvarint(e.st.Ino))
		w(uvarint(e.st.Dev))
		w(uvarint(uint64(e.st.Mode)))
		var flags byte
		if e.racy {
			flags = 1
		}
		w([]byte{flags})
		w(e.sum[:])
	}
	out.Write(sum.Sum(nil))
	return out.Bytes()
}

// FuzzCacheLoad: any bytes either fail to load or load into a cache that
// saves and loads again to the same entries.
func FuzzCacheLoad(f *testing.F) {
	dir := f.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644)
	os.MkdirAll(filepath.Join(dir, "s"), 0o755)
	os.WriteFile(filepath.Join(dir, "s", "b"), []byte("b"), 0o600)
	c := NewCache(dir, Options{})
	if _, err := c.Rescan(context.Background()); err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	c.Save(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte(cacheMagicV1))
	f.Add([]byte(strings.Repeat("x", 40)))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := NewCache(t.TempDir(), Options{})
		if err := c.Load(bytes.NewReader(b)); err != nil {
			return
		}
		var out bytes.Buffer
		if err := c.Save(&out); err != nil {
			t.Fatal(err)
		}
		c2 := NewCache(t.TempDir(), Options{})
		if err := c2.Load(bytes.NewReader(out.Bytes())); err != nil {
			t.Fatalf("a loaded cache saves to bytes that do not load: %v", err)
		}
		if len(c2.sorted) != len(c.sorted) || c2.Digest() != c.Digest() {
			t.Fatal("save and load changed the cache")
		}
	})
}

func uvarint(v uint64) []byte { return binary.AppendUvarint(nil, v) }
func varint(v int64) []byte   { return binary.AppendVarint(nil, v) }
