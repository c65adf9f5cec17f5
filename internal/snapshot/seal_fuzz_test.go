package snapshot

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/seal"
)

// fuzzSealing is a fixed Seal configuration (deterministic keys, servers
// that are never asked: the checks run offline).
func fuzzSealing(tb testing.TB) *Sealing {
	tb.Helper()
	user, err := seal.NewSuiKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		tb.Fatal(err)
	}
	cfg := seal.Config{PackageID: seal.MustParseAddress("0x" + strings.Repeat("5e", 32)), Threshold: 2}
	for i := range 3 {
		mk, err := seal.ParseMasterKey(strings.Repeat("0", 62) + string(rune('1'+i)) + "1")
		if err != nil {
			tb.Fatal(err)
		}
		var id seal.Address
		id[31] = byte(i + 1)
		cfg.Servers = append(cfg.Servers, seal.KeyServer{ObjectID: id, URL: "http://127.0.0.1:9", PublicKey: mk.PublicKey()})
	}
	c, err := seal.NewClient(cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &Sealing{Client: c, Signer: user, Policy: SealPolicy{Module: SealAccountBased}, MaxSize: 1 << 20}
}

// FuzzSealCheck: the checks a Seal blob passes before any key server is
// asked never panic, and accept only an object of the configured package
// and servers, sealed to this requester and this agent (or with no
// associated data, as the reference runtime writes).
func FuzzSealCheck(f *testing.F) {
	s := fuzzSealing(f)
	agent := SealAgent{Identity: "alpha.eth", Others: []string{"beta.eth"}}
	good, err := s.sealFor(agent, sealSnapshotAAD, []byte("tar"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, false)
	f.Add(good, true)
	f.Fuzz(func(t *testing.T, b []byte, escrow bool) {
		purpose := sealSnapshotAAD
		if escrow {
			purpose = sealEscrowAAD
		}
		o, err := seal.ParseEncryptedObject(b)
		if err != nil {
			return
		}
		if err := s.check(agent, purpose, o); err != nil {
			_ = err.Error()
			return
		}
		cfg := s.Client.Config()
		addr := s.Signer.Address()
		if o.PackageID != cfg.PackageID || !bytes.Equal(o.ID, addr[:]) || o.DEM == seal.Plain {
			t.Fatalf("accepted package %s id %x DEM %v", o.PackageID, o.ID, o.DEM)
		}
		if string(o.AAD) != purpose+agent.Identity && (len(o.AAD) != 0 || escrow) {
			t.Fatalf("accepted associated data %q for %s", o.AAD, purpose)
		}
		for _, svc := range o.Services {
			if svc.ObjectID[31] < 1 || svc.ObjectID[31] > 3 || svc.ObjectID != (seal.Address{31: svc.ObjectID[31]}) {
				t.Fatalf("accepted key server %s", svc.ObjectID)
			}
		}
	})
}

// FuzzQuoteUntrusted: blob bytes printed in errors are bounded and
// printable.
func FuzzQuoteUntrusted(f *testing.F) {
	f.Add([]byte("alpha.eth"))
	f.Add([]byte{0, 1, 2, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		s := quoteUntrusted(b)
		if len(s) > 2*96+64 {
			t.Fatalf("%d bytes for %d input bytes", len(s), len(b))
		}
		for _, r := range s {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("control character in %q", s)
			}
		}
	})
}
