package repo

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Every parser of untrusted bytes: what it accepts must re-encode to the
// same bytes (the encodings are canonical) and it must never panic.

func FuzzDecodeHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b)
		if err != nil {
			return
		}
		enc := h.Encode()
		if !bytes.Equal(enc[:], b[:HeaderSize]) {
			t.Fatalf("header %x re-encodes as %x", b[:HeaderSize], enc)
		}
		if h.Size() > MaxPackLen || h.IndexLength < minIndexStored {
			t.Fatalf("accepted out-of-range header %+v", h)
		}
	})
}

func FuzzDecodePackIndex(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte, dataLen int64) {
		ix, err := DecodePackIndex(b, dataLen)
		if err != nil {
			return
		}
		if enc := ix.Encode(); !bytes.Equal(enc, b) {
			t.Fatalf("index re-encodes differently")
		}
		var end int64
		for _, e := range ix.Entries {
			if e.Offset != end || e.Length < Overhead {
				t.Fatalf("accepted entry %+v at %d", e, end)
			}
			end += e.Length
		}
		if end != dataLen {
			t.Fatalf("entries cover %d of %d", end, dataLen)
		}
	})
}

func FuzzDecodeTree(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := DecodeTree(b)
		if err != nil {
			return
		}
		enc, err := tr.Encode()
		if err != nil {
			t.Fatalf("decoded tree does not encode: %v", err)
		}
		if !bytes.Equal(enc, b) {
			t.Fatalf("tree re-encodes differently")
		}
	})
}

func FuzzDecodeCommit(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommit(b)
		if err != nil {
			return
		}
		enc, err := c.Encode()
		if err != nil {
			t.Fatalf("decoded commit does not encode: %v", err)
		}
		c2, err := DecodeCommit(enc)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("commit does not round-trip: %v", err)
		}
	})
}

func FuzzReadIndex(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		ix, err := ReadIndex(bytes.NewReader(b))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if _, err := ix.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadIndex(&buf); err != nil {
			t.Fatalf("written index does not read back: %v", err)
		}
	})
}

var writeCorpus = flag.Bool("writecorpus", false, "write the fuzz seed corpora into testdata/fuzz")

// TestCorpus checks that the checked-in seed corpora are those made from
// the document's vectors and a few damaged variants; -writecorpus
// rewrites them.
func TestCorpus(t *testing.T) {
	dec := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pack := dec(vecPack)
	index := dec(vecIndex)
	cut := func(b []byte, n int) []byte { return bytes.Clone(b[:min(n, len(b))]) }
	flip := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i%len(c)] ^= 0x80; return c }
	write := func(target, name string, args ...any) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.WriteString("go test fuzz v1\n")
		for _, a := range args {
			switch v := a.(type) {
			case []byte:
				fmt.Fprintf(&buf, "[]byte(%s)\n", strconv.Quote(string(v)))
			case int64:
				fmt.Fprintf(&buf, "int64(%d)\n", v)
			}
		}
		p := filepath.Join(dir, name)
		if *writeCorpus {
			if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, buf.Bytes()) {
			t.Errorf("seed %s is missing or out of date (%v): go test ./internal/repo -run TestCorpus -writecorpus", p, err)
		}
	}
	write("FuzzDecodeHeader", "vector", cut(pack, HeaderSize))
	write("FuzzDecodeHeader", "vector-rev1", cut(dec(vecPack1), HeaderSize))
	write("FuzzDecodeHeader", "v2-prefix", []byte("HRMS\x02\x00\x00\x00"))
	write("FuzzDecodeHeader", "short", cut(pack, 20))
	write("FuzzDecodeHeader", "flags", flip(cut(pack, HeaderSize), 6))
	esc := cut(pack, HeaderSize)
	esc[5] |= flagEscrow
	binary.BigEndian.PutUint16(esc[6:], 4)
	binary.BigEndian.PutUint32(esc[16:], binary.BigEndian.Uint32(esc[16:])+4)
	esc = append(esc, "ESCR"...)
	write("FuzzDecodeHeader", "escrow", cut(esc, HeaderSize))
	write("FuzzParseEscrow", "vector-no-escrow", cut(pack, 64))
	write("FuzzParseEscrow", "escrow", esc)
	write("FuzzParseEscrow", "escrow-truncated", cut(esc, HeaderSize+2))
	notHead := bytes.Clone(esc)
	notHead[5] = flagEscrow
	write("FuzzParseEscrow", "escrow-not-head", notHead)
	write("FuzzDecodePackIndex", "vector", index, int64(527))
	write("FuzzDecodePackIndex", "vector-rev1", dec(vecIndex1), int64(495))
	write("FuzzDecodePackIndex", "empty", []byte{0, 0, 0, 0, 0, 0, 0, 0}, int64(0))
	write("FuzzDecodePackIndex", "wrong-datalen", index, int64(526))
	write("FuzzDecodePackIndex", "truncated", cut(index, 100), int64(527))
	write("FuzzDecodePackIndex", "huge-count", append([]byte{0xff, 0xff, 0xff, 0xff}, index[4:]...), int64(527))
	// Revision 2 trees, revision 1 trees (every older snapshot's), and the
	// tree of special bits and a hard link.
	for id, tree := range vecTrees {
		write("FuzzDecodeTree", "vector-"+id[:8], dec(tree))
	}
	for id, tree := range vecTrees1 {
		write("FuzzDecodeTree", "vector-"+id[:8], dec(tree))
	}
	meta := dec(vecMetaTreeHex)
	write("FuzzDecodeTree", "meta-link", meta)
	write("FuzzDecodeTree", "meta-link-target-cut", cut(meta, len(meta)-1))
	write("FuzzDecodeTree", "truncated", cut(dec(vecTrees[vecRootID]), 50))
	write("FuzzDecodeTree", "flipped", flip(dec(vecTrees[vecRootID]), 9))
	write("FuzzDecodeTree", "rev1-flipped", flip(dec(vecTrees1[vecRootID1]), 9))
	write("FuzzDecodeCommit", "vector", []byte(vecCommit))
	write("FuzzDecodeCommit", "vector-rev1", []byte(vecCommit1))
	write("FuzzDecodeCommit", "root-mode-alone", []byte(strings.Replace(vecCommit, `,"rootMtime":"1700000004250000000"`, "", 1)))
	write("FuzzDecodeCommit", "with-refs", []byte(`{"format":"hermesd/v3","identity":"a.eth","keyId":"0011223344556677","root":"`+vecRootID+`","parent":"abc_DEF-1","parentFormat":"v2","time":1,"bundleHash":"`+vecBundle+`","lockVersion":2,"files":1,"bytes":5,"added":9,"lock":{"mode":420,"size":2,"sha256":"`+vecNotesID+`","chunks":["`+vecNotesID+`"]},"receipts":null,"packs":[{"blobId":"A","size":100,"endEpoch":7,"indexLength":36}]}`))
	write("FuzzDecodeCommit", "legacy-pack-sha256", []byte(`{"format":"hermesd/v3","identity":"a.eth","keyId":"0011223344556677","root":"`+vecRootID+`","parent":"abc_DEF-1","parentFormat":"v2","time":1,"bundleHash":"`+vecBundle+`","lockVersion":2,"files":1,"bytes":5,"added":9,"lock":null,"receipts":null,"packs":[{"blobId":"A","size":100,"endEpoch":7,"indexLength":36,"sha256":"`+vecNotesID+`"}]}`))
	write("FuzzDecodeCommit", "unknown-field", []byte(`{"format":"hermesd/v3","extra":1}`))
	write("FuzzDecodeCommit", "trailing", []byte(vecCommit+` {}`))
	ix := NewIndex()
	var buf bytes.Buffer
	if _, err := ix.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	write("FuzzReadIndex", "empty-index", buf.Bytes())
	write("FuzzReadIndex", "garbage", []byte(indexMagic+"garbage"))
}
