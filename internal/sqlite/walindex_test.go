package sqlite

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// liveWAL makes a WAL database with an open connection and returns its
// -shm header bytes and its WAL.
func liveWAL(t *testing.T) (shm, wal []byte) {
	t.Helper()
	brain, sh := newDB(t, "WAL", 20)
	insert(sh, 3)
	shm, err := os.ReadFile(filepath.Join(brain, "memory.db-shm"))
	if err != nil {
		t.Fatal(err)
	}
	wal, err = os.ReadFile(filepath.Join(brain, "memory.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	return shm, wal
}

// TestWALIndex reads what SQLite itself wrote: the index names the WAL's
// last commit, and every damage is noticed.
func TestWALIndex(t *testing.T) {
	shm, wal := liveWAL(t)
	ix, ok := parseIndex(shm)
	if !ok {
		t.Fatal("SQLite's own index did not parse")
	}
	if ix.pageSize != 4096 || ix.mxFrame == 0 {
		t.Fatalf("index %+v", ix)
	}
	if nb := nBackfill(shm); nb > ix.mxFrame {
		t.Errorf("nBackfill %d > mxFrame %d", nb, ix.mxFrame)
	}
	off := frameOffset(ix, ix.mxFrame)
	n, ok := walPrefix(ix, wal, wal[off:])
	if !ok || n != int64(len(wal)) {
		t.Fatalf("walPrefix = %d, %v; want the whole %d-byte WAL (the last frame is the last commit)", n, ok, len(wal))
	}

	for name, damage := range map[string]func(shm, wal []byte){
		"copies differ":   func(shm, _ []byte) { shm[60] ^= 1 },
		"both checksums":  func(shm, _ []byte) { shm[40] ^= 1; shm[88] ^= 1 },
		"not initialized": func(shm, _ []byte) { shm[12], shm[60] = 0, 0 },
		"version":         func(shm, _ []byte) { shm[0] ^= 1; shm[48] ^= 1 },
		"short":           nil,
		"WAL salt":        func(_, wal []byte) { wal[17] ^= 1 },
		"WAL magic":       func(_, wal []byte) { wal[0] ^= 1 },
		"WAL page size":   func(_, wal []byte) { wal[10] ^= 1 },
		"frame checksum":  func(_, wal []byte) { wal[off+17] ^= 1 },
		"frame salt":      func(_, wal []byte) { wal[off+9] ^= 1 },
		"not a commit":    func(_, wal []byte) { copy(wal[off+4:off+8], []byte{0, 0, 0, 0}) },
		"no frames at all": func(shm, _ []byte) {
			binary.NativeEndian.PutUint32(shm[16:], 0)
			binary.NativeEndian.PutUint32(shm[64:], 0)
		},
	} {
		s, w := append([]byte(nil), shm...), append([]byte(nil), wal...)
		if damage == nil {
			s = s[:2*indexHeaderSize-1]
		} else {
			damage(s, w)
		}
		ix, ok := parseIndex(s)
		if !ok {
			continue
		}
		if ix.mxFrame == 0 {
			if _, ok := walPrefix(ix, w, w[off:]); ok {
				t.Errorf("%s: walPrefix accepted an index without frames", name)
			}
			continue
		}
		if _, ok := walPrefix(ix, w, w[frameOffset(ix, ix.mxFrame):]); ok {
			t.Errorf("%s: not noticed", name)
		}
	}
}

// FuzzWALIndex: hostile -shm and -wal bytes never crash the parsers, and
// whatever they accept is self-consistent.
func FuzzWALIndex(f *testing.F) {
	index := make([]byte, 2*indexHeaderSize)
	ne := binary.NativeEndian
	ne.PutUint32(index[0:], indexVersion)
	index[12] = 1
	ne.PutUint16(index[14:], 4096)
	ne.PutUint32(index[16:], 1)
	var s1, s2 uint32
	for i := 0; i < 40; i += 8 {
		s1 += ne.Uint32(index[i:]) + s2
		s2 += ne.Uint32(index[i+4:]) + s1
	}
	ne.PutUint32(index[40:], s1)
	ne.PutUint32(index[44:], s2)
	copy(index[48:], index[:48])
	f.Add(index, make([]byte, walHeaderSize), make([]byte, frameHeaderSize))
	f.Add([]byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, shm, hdr, frame []byte) {
		ix, ok := parseIndex(shm)
		if !ok {
			return
		}
		if !validPageSize(ix.pageSize) {
			t.Fatalf("accepted page size %d", ix.pageSize)
		}
		if n, ok := walPrefix(ix, hdr, frame); ok && n != frameOffset(ix, ix.mxFrame)+frameHeaderSize+int64(ix.pageSize) {
			t.Fatalf("prefix %d for %+v", n, ix)
		}
	})
}
