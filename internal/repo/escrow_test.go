package repo

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"
)

// escrowFx is a repository whose head packs carry a key escrow.
func escrowFx(t *testing.T, escrow []byte) *fx {
	f := newFx(t, 4<<20)
	if err := f.keys.SetEscrow(escrow); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestEscrowPack(t *testing.T) {
	escrow := bytes.Repeat([]byte{0xe5}, 345)
	f := escrowFx(t, escrow)
	brain := t.TempDir()
	writeFiles(t, brain, map[string]string{"system.md": "You are a test agent.\n", "notes/": ""})
	f.snap(brain, nil)
	first := f.head
	writeFiles(t, brain, map[string]string{"skills/a.md": "a new skill"})
	res := f.snap(brain, nil)
	if res.Commit.Pack(first) == nil {
		t.Fatalf("the second commit does not list the first head %s; the test needs an escrow pack as a listed pack", first)
	}

	// A keyless reader finds the escrow from the head's first bytes.
	blob := f.store.blob(t, f.head)
	h, got, err := ParseEscrow(blob[:HeaderSize+len(escrow)])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, escrow) || h.EscrowLength != int64(len(escrow)) || h.Size() != int64(len(blob)) {
		t.Fatalf("escrow %d bytes (header %+v), want %d; blob %d bytes", len(got), h, len(escrow), len(blob))
	}
	// The key holder restores through it, the listed earlier head too.
	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)

	// A pack without escrow: no flag, no bytes.
	plain := newFx(t, 4<<20)
	plain.snap(brain, nil)
	if _, e, err := ParseEscrow(plain.store.blob(t, plain.head)); err != nil || e != nil {
		t.Fatalf("a pack without escrow: escrow %x, error %v", e, err)
	}
}

// Tampering with the escrow or its header fields fails the index for a
// reader holding the key; the keyless parser refuses what is malformed.
func TestEscrowTampered(t *testing.T) {
	escrow := bytes.Repeat([]byte{0x5e}, 300)
	f := escrowFx(t, escrow)
	brain := t.TempDir()
	writeFiles(t, brain, map[string]string{"system.md": "You are a test agent.\n"})
	f.snap(brain, nil)
	orig := f.store.blob(t, f.head)

	tests := []struct {
		name string
		mod  func(b []byte) []byte
		want error
	}{
		{"escrow byte flipped", func(b []byte) []byte { b[HeaderSize+10] ^= 1; return b }, ErrAuth},
		{"escrow swapped", func(b []byte) []byte {
			copy(b[HeaderSize:], bytes.Repeat([]byte{0x77}, len(escrow)))
			return b
		}, ErrAuth},
		{"escrow stripped", func(b []byte) []byte {
			// Flag and length cleared, the escrow cut out, L shortened:
			// a well-formed pack without escrow, whose index no longer
			// authenticates.
			out := append([]byte{}, b[:HeaderSize]...)
			out[5] &^= flagEscrow
			out[6], out[7] = 0, 0
			binary.BigEndian.PutUint32(out[16:], binary.BigEndian.Uint32(b[16:])-uint32(len(escrow)))
			return append(out, b[HeaderSize+len(escrow):]...)
		}, ErrAuth},
		{"escrow flag on a pack that is no head", func(b []byte) []byte { b[5] = flagEscrow; return b }, ErrCorrupt},
		{"escrow length over the cap", func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[6:], MaxEscrowLen+1)
			return b
		}, ErrCorrupt},
		{"escrow length without flag", func(b []byte) []byte { b[5] = flagHead; return b }, ErrCorrupt},
		{"unknown flag bit 2", func(b []byte) []byte { b[5] |= 0x04; return b }, ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mod(bytes.Clone(orig))
			f.store.put(t, f.head, b)
			defer f.store.put(t, f.head, orig)
			_, err := Open(context.Background(), f.store, f.keys, f.head, ReadOptions{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("open: %v, want %v", err, tt.want)
			}
		})
	}

	short := orig[:HeaderSize+len(escrow)-1]
	if _, _, err := ParseEscrow(short); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated escrow: %v, want ErrCorrupt", err)
	}
	if err := f.keys.SetEscrow(make([]byte, MaxEscrowLen+1)); err == nil {
		t.Fatal("SetEscrow took an escrow over the cap")
	}
}

func FuzzParseEscrow(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		h, escrow, err := ParseEscrow(b)
		if err != nil {
			return
		}
		if !h.Head || int64(len(escrow)) != h.EscrowLength || h.EscrowLength > MaxEscrowLen || h.IndexLength < minIndexStored+h.EscrowLength {
			t.Fatalf("accepted header %+v with a %d-byte escrow", h, len(escrow))
		}
		if len(escrow) > 0 && !bytes.Equal(escrow, b[HeaderSize:HeaderSize+len(escrow)]) {
			t.Fatal("escrow is not the bytes after the header")
		}
	})
}

// The independent reader restores snapshots whose head packs carry a key
// escrow, the listed earlier head included: it skips the escrow and
// authenticates it with the index.
func TestEscrowIndependentReader(t *testing.T) {
	node := nodeBin(t)
	brain := richBrain(t)
	f := escrowFx(t, bytes.Repeat([]byte{0xe5}, 476))
	ws := localWalrus(t)
	f.b.Sink = ws
	first := f.snap(brain, nil)
	editBrain(t, brain)
	second := f.snap(brain, nil)
	if second.Commit.Pack(first.Head.BlobID) == nil {
		t.Fatal("the second commit does not list the first head pack")
	}
	out := filepath.Join(t.TempDir(), "v3reader")
	runReader(t, node, ws.url, f.head, testMaster, false, out)
	mustEqualTreeNode(t, brain, out)
}
