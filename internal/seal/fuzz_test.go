package seal

import (
	"bytes"
	"testing"
)

// FuzzParseEncryptedObject: the parser never panics, anything it accepts
// re-encodes to the same bytes (BCS is canonical), and Looks accepts it.
func FuzzParseEncryptedObject(f *testing.F) {
	f.Add(mustHex(f, cliVector.object))
	f.Fuzz(func(t *testing.T, b []byte) {
		looks := Looks(b)
		o, err := ParseEncryptedObject(b)
		if err != nil {
			return
		}
		if !looks {
			t.Fatal("Looks rejects a parsable object")
		}
		re, err := o.MarshalBinary()
		if err != nil || !bytes.Equal(re, b) {
			t.Fatalf("re-marshal differs (%v)", err)
		}
	})
}

// FuzzParsePTB: the PTB parser never panics, what it accepts re-encodes
// identically, and the seal_approve rules never panic on it.
func FuzzParsePTB(f *testing.F) {
	f.Add(mustHex(f, "000100d92bc457b42d48924087ea3f22d35fd2fe9afdf5bdfe38cc51c0f14f3282f6d503626c610e7365616c5f617070726f76655f780000"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePTB(b)
		if err != nil {
			return
		}
		if re := p.MarshalBCS(); !bytes.Equal(re, b) {
			t.Fatalf("re-marshal differs:\n%x\n%x", re, b)
		}
		p.ApproveIDs()
	})
}

// FuzzParseSuiKey: key parsing never panics and accepted keys round-trip
// through their exported form.
func FuzzParseSuiKey(f *testing.F) {
	for _, v := range suiKeyVectors {
		f.Add(v.key)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseSuiKey(s)
		if err != nil {
			return
		}
		k2, err := ParseSuiKey(k.Export())
		if err != nil || k2.Address() != k.Address() {
			t.Fatalf("export round trip: %v", err)
		}
	})
}

// FuzzKeyServerResponse: a hostile key-server answer never panics the
// client, and whatever it caches verifies.
func FuzzKeyServerResponse(f *testing.F) {
	f.Add([]byte(`{"decryption_keys":[{"id":[1,2],"encrypted_key":["",""]}]}`))
	f.Add([]byte(`{"decryption_keys":[{"id":[256],"encrypted_key":[]}]}`))
	mk, err := GenerateMasterKey(nil)
	if err != nil {
		f.Fatal(err)
	}
	ks := KeyServer{ObjectID: Address{1}, URL: "http://127.0.0.1:1", PublicKey: mk.PublicKey()}
	c, err := NewClient(Config{Threshold: 1, Servers: []KeyServer{ks}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	esk, _ := randomScalar(nil)
	ek := &elgamalKey{sk: esk}
	fullID := []byte{1, 2}
	f.Fuzz(func(t *testing.T, body []byte) {
		if err := c.acceptKeys(&c.cfg.Servers[0], body, ek, [][]byte{fullID}); err != nil {
			return
		}
		if k := c.cached(fullID, ks.ObjectID); k == nil || k.Verify(fullID, ks.PublicKey) != nil {
			t.Fatal("accepted a key that does not verify")
		}
	})
}
