package handover

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/repo"
)

// testKey is the agent key of the fixture: bytes 0x01..0x20.
func testKey() repo.AgentKey {
	var k [repo.KeySize]byte
	for i := range k {
		k[i] = byte(i + 1)
	}
	return repo.NewAgentKey(k)
}

func fixture() Handover {
	token := uint64(7)
	return Handover{
		Agent:      "auditor",
		Identity:   "auditor.hermes.eth",
		ENSName:    "auditor.hermes.eth",
		TokenID:    &token,
		Head:       "Wl7n3Oa9sPjY0Yb1mDqXJ2rF4tU8vKc5eH6gZiA1BCd",
		BundleHash: hash.Digest{0xab, 0xcd, 31: 0xef},
		Key:        testKey(),
		Created:    time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC),
		Seller:     common.HexToAddress("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"),
	}
}

func newIdentity(t testing.TB) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func seal(t testing.TB, h Handover, id *age.X25519Identity) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Seal(&buf, h, id.Recipient().String()); err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return buf.Bytes()
}

func equal(t *testing.T, got, want Handover) {
	t.Helper()
	if got.Key.Bytes() != want.Key.Bytes() {
		t.Errorf("key differs")
	}
	g, w := got, want
	g.Key, w.Key = repo.AgentKey{}, repo.AgentKey{}
	if (g.TokenID == nil) != (w.TokenID == nil) || g.TokenID != nil && *g.TokenID != *w.TokenID {
		t.Errorf("token id %v, want %v", g.TokenID, w.TokenID)
	}
	g.TokenID, w.TokenID = nil, nil
	if !g.Created.Equal(w.Created) {
		t.Errorf("created %v, want %v", g.Created, w.Created)
	}
	g.Created, w.Created = time.Time{}, time.Time{}
	if g != w {
		t.Errorf("got %+v\nwant %+v", g, w)
	}
}

func TestSealOpen(t *testing.T) {
	id := newIdentity(t)
	for _, tc := range []struct {
		name string
		edit func(*Handover)
	}{
		{"token", func(*Handover) {}},
		{"no token", func(h *Handover) { h.TokenID = nil }},
		{"subname", func(h *Handover) { h.ENSName, h.Identity = "a.b.c.eth", "a.b.c.eth" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fixture()
			tc.edit(&h)
			got, err := Open(bytes.NewReader(seal(t, h, id)), id)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			equal(t, got, h)
		})
	}
}

func TestOpenTriesEveryIdentity(t *testing.T) {
	id, other := newIdentity(t), newIdentity(t)
	if _, err := Open(bytes.NewReader(seal(t, fixture(), id)), other, id); err != nil {
		t.Fatalf("Open with the right identity second: %v", err)
	}
}

func TestWrongIdentity(t *testing.T) {
	file := seal(t, fixture(), newIdentity(t))
	_, err := Open(bytes.NewReader(file), newIdentity(t))
	if !errors.Is(err, ErrWrongIdentity) {
		t.Fatalf("Open with another identity: %v, want ErrWrongIdentity", err)
	}
}

// TestEveryBitFlipIsRefused flips one bit in every byte of a sealed
// handover: each must fail, as damaged or (in the recipient stanza, which
// age cannot tell from another recipient's) as not for this identity.
func TestEveryBitFlipIsRefused(t *testing.T) {
	id := newIdentity(t)
	file := seal(t, fixture(), id)
	payload := bytes.Index(file, []byte("\n--- ")) // the header ends with "--- mac\n"
	if payload < 0 {
		t.Fatal("no header MAC line in the sealed file")
	}
	for i := range file {
		c := bytes.Clone(file)
		c[i] ^= 0x01
		_, err := Open(bytes.NewReader(c), id)
		switch {
		case err == nil:
			t.Fatalf("byte %d flipped: Open succeeded", i)
		case i > payload && !errors.Is(err, ErrCorrupt):
			t.Fatalf("byte %d (after the header) flipped: %v, want ErrCorrupt", i, err)
		case !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrWrongIdentity):
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
}

func TestTruncatedAndExtended(t *testing.T) {
	id := newIdentity(t)
	file := seal(t, fixture(), id)
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"magic only", []byte(ageMagic)},
		{"half", file[:len(file)/2]},
		{"last byte cut", file[:len(file)-1]},
		{"trailing byte", append(bytes.Clone(file), 0)},
		{"two files", append(bytes.Clone(file), file...)},
		{"plain json", mustEncode(t, fixture())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(bytes.NewReader(tc.b), id)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestTooLarge(t *testing.T) {
	big := append([]byte(ageMagic), bytes.Repeat([]byte{'x'}, MaxSize)...)
	_, err := Open(bytes.NewReader(big), newIdentity(t))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Open of %d bytes: %v, want ErrTooLarge", len(big), err)
	}
	// A valid age file for the identity whose plaintext is too large.
	id := newIdentity(t)
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, id.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	w.Write(bytes.Repeat([]byte{' '}, MaxSize-500)) // compresses nothing: ciphertext stays under MaxSize
	w.Close()
	if buf.Len() > MaxSize {
		t.Fatalf("test file of %d bytes is over MaxSize", buf.Len())
	}
	if _, err := Open(&buf, id); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open of blank plaintext: %v, want ErrInvalid", err)
	}
}

func TestSealRefusesBadInput(t *testing.T) {
	id := newIdentity(t)
	var buf bytes.Buffer
	bad := fixture()
	bad.Head = "not a blob id!"
	if err := Seal(&buf, bad, id.Recipient().String()); err == nil || !strings.Contains(err.Error(), "head") {
		t.Fatalf("Seal of a bad head: %v", err)
	}
	for _, r := range []string{"", "age1", "AGE-SECRET-KEY-1QQQ", "ssh-ed25519 AAAA", id.String()} {
		if err := Seal(&buf, fixture(), r); err == nil || !strings.Contains(err.Error(), "not an age X25519 recipient") {
			t.Fatalf("Seal to %q: %v", r, err)
		}
	}
	if buf.Len() != 0 {
		t.Fatalf("a refused Seal wrote %d bytes", buf.Len())
	}
	if err := Seal(&buf, fixture(), " "+id.Recipient().String()+"\n"); err != nil {
		t.Fatalf("Seal to a recipient with surrounding space: %v", err)
	}
}

func TestSecretsNeverPrint(t *testing.T) {
	h := fixture()
	key := h.Key.Bytes()
	for _, s := range []string{fmt.Sprintf("%v", h), fmt.Sprintf("%+v", h), fmt.Sprintf("%#v", h)} {
		for _, enc := range []string{base64.RawURLEncoding.EncodeToString(key[:]), fmt.Sprintf("%x", key[:]), fmt.Sprint(key[:])} {
			if strings.Contains(s, enc) {
				t.Fatalf("formatted handover shows the key: %s", s)
			}
		}
	}
	// Errors about a wrong key id never show the key either.
	doc := strings.Replace(string(mustEncode(t, h)), h.Key.ID(), "0000000000000000", 1)
	_, err := Decode([]byte(doc))
	if err == nil || strings.Contains(err.Error(), base64.RawURLEncoding.EncodeToString(key[:])) {
		t.Fatalf("Decode with a wrong key id: %v", err)
	}
}

func mustEncode(t testing.TB, h Handover) []byte {
	t.Helper()
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVector pins the document's encoding: testdata/handover-v1.json is the
// fixture's encoding, byte for byte.
func TestVector(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "handover-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustEncode(t, fixture()); !bytes.Equal(got, want) {
		t.Fatalf("encoding changed (a format change is a new version):\n%s\nwant\n%s", got, want)
	}
	h, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, h, fixture())
	// The key id is the format's (docs/format-v3.md §2), computed here
	// from the document rather than through repo.
	key := h.Key.Bytes()
	id, err := hkdf.Key(sha256.New, key[:], nil, "hermesd/v3 key id", 8)
	if err != nil {
		t.Fatal(err)
	}
	if h.KeyID() != hex.EncodeToString(id) || h.KeyID() != "93296ddb349d06a6" {
		t.Fatalf("key id %s, want %x", h.KeyID(), id)
	}
}
