package seal

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
)

func keysFor(o *EncryptedObject, cfg *Config, mks []*MasterKey, which ...int) map[Address]*UserSecretKey {
	out := map[Address]*UserSecretKey{}
	for _, i := range which {
		out[cfg.Servers[i].ObjectID] = mks[i].Extract(o.FullID())
	}
	return out
}

func pksOf(cfg *Config) map[Address]PublicKey {
	out := map[Address]PublicKey{}
	for _, s := range cfg.Servers {
		out[s.ObjectID] = s.PublicKey
	}
	return out
}

func TestEncryptDecryptDEMs(t *testing.T) {
	cfg, mks := testConfig(t, 2, 1, 1, 1)
	msg := bytes.Repeat([]byte("brain "), 1000)
	for _, dem := range []DEM{AESGCM, HMACCTR, Plain} {
		t.Run(dem.String(), func(t *testing.T) {
			in := msg
			if dem == Plain {
				in = nil
			}
			o, key, err := EncryptObject(cfg, []byte("id"), in, &EncryptOptions{DEM: dem, AAD: []byte("ctx")})
			if err != nil {
				t.Fatal(err)
			}
			want := in
			if dem == Plain {
				want = key[:]
			}
			for _, subset := range [][]int{{0, 1}, {1, 2}, {0, 2}, {0, 1, 2}} {
				pt, err := Decrypt(o, keysFor(o, cfg, mks, subset...), pksOf(cfg), &DecryptOptions{CheckShareConsistency: true})
				if err != nil || !bytes.Equal(pt, want) {
					t.Fatalf("servers %v: %v", subset, err)
				}
			}
			if pt, err := DecryptWithKey(o, key); err != nil || !bytes.Equal(pt, want) {
				t.Fatalf("symmetric key: %v", err)
			}
			if _, err := Decrypt(o, keysFor(o, cfg, mks, 2), pksOf(cfg), nil); !errors.Is(err, ErrNotEnoughKeys) {
				t.Fatalf("one key: %v", err)
			}
		})
	}
}

func TestEncryptRejects(t *testing.T) {
	cfg, _ := testConfig(t, 2, 1, 1)
	for _, c := range []struct {
		name string
		cfg  Config
		opts *EncryptOptions
		msg  []byte
		want error
	}{
		{"threshold 0", Config{PackageID: cfg.PackageID, Threshold: 0, Servers: cfg.Servers}, nil, nil, ErrInvalidConfig},
		{"threshold above weight", Config{PackageID: cfg.PackageID, Threshold: 3, Servers: cfg.Servers}, nil, nil, ErrInvalidConfig},
		{"no servers", Config{Threshold: 1}, nil, nil, ErrInvalidConfig},
		{"duplicate server", Config{Threshold: 1, Servers: []KeyServer{cfg.Servers[0], cfg.Servers[0]}}, nil, nil, ErrInvalidConfig},
		{"no public key", Config{Threshold: 1, Servers: []KeyServer{{ObjectID: Address{1}}}}, nil, nil, ErrInvalidConfig},
		{"weight above 255", Config{Threshold: 1, Servers: []KeyServer{{ObjectID: Address{1}, PublicKey: cfg.Servers[0].PublicKey, Weight: 256}}}, nil, nil, ErrInvalidConfig},
		{"negative weight", Config{Threshold: 1, Servers: []KeyServer{{ObjectID: Address{1}, PublicKey: cfg.Servers[0].PublicKey, Weight: -1}}}, nil, nil, ErrInvalidConfig},
		{"Plain with payload", *cfg, &EncryptOptions{DEM: Plain}, []byte("x"), ErrInvalidConfig},
		{"unknown DEM", *cfg, &EncryptOptions{DEM: 7}, nil, ErrUnsupported},
	} {
		if _, _, err := Encrypt(&c.cfg, []byte("id"), c.msg, c.opts); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestWeightedServers(t *testing.T) {
	cfg, mks := testConfig(t, 3, 3, 1)
	o, _, err := EncryptObject(cfg, []byte("id"), []byte("msg"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Services) != 4 || o.Services[0].ObjectID != o.Services[2].ObjectID || o.Weights()[cfg.Servers[0].ObjectID] != 3 {
		t.Fatalf("services %v", o.Services)
	}
	if pt, err := Decrypt(o, keysFor(o, cfg, mks, 0), pksOf(cfg), &DecryptOptions{CheckShareConsistency: true}); err != nil || string(pt) != "msg" {
		t.Fatalf("the weight-3 server alone: %v", err)
	}
	if _, err := Decrypt(o, keysFor(o, cfg, mks, 1), pksOf(cfg), nil); !errors.Is(err, ErrNotEnoughKeys) {
		t.Fatalf("the weight-1 server alone: %v", err)
	}
}

// encryptTampered is EncryptObject with the first encrypted share modified
// before the keys are derived, so the object is internally consistent except
// that share 1 is off the polynomial (Rust's
// seal_encrypt_and_modify_first_share).
func encryptTampered(t *testing.T, cfg *Config, id, msg []byte) *EncryptedObject {
	t.Helper()
	o := &EncryptedObject{PackageID: cfg.PackageID, ID: id, Threshold: uint8(cfg.Threshold), DEM: AESGCM}
	for i, s := range cfg.Servers {
		o.Services = append(o.Services, Service{ObjectID: s.ObjectID, Index: uint8(i + 1)})
	}
	var base [KeySize]byte
	rand.Read(base[:])
	shares, err := split(nil, &base, cfg.Threshold, len(o.Services))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := randomScalar(nil)
	nonce := g2Base(&r)
	o.Nonce = nonce.Bytes()
	gid := hashID(o.FullID())
	gb := gid.Bytes()
	gidR := g1Mul(&gid, &r)
	for i, s := range o.Services {
		x := pair(&gidR, &cfg.Servers[i].PublicKey.p)
		pad := kdf(&x, &o.Nonce, &gb, s.ObjectID, s.Index)
		o.EncryptedShares = append(o.EncryptedShares, xor32(&shares[i].value, &pad))
	}
	o.EncryptedShares[0][0]++
	rk := deriveKey(purposeRandomness, &base, o.Threshold, o.EncryptedShares, o.Services)
	rb := r.Bytes()
	o.EncryptedRandomness = xor32(&rb, &rk)
	dk := deriveKey(purposeDEM, &base, o.Threshold, o.EncryptedShares, o.Services)
	o.Blob = aesEncrypt(&dk, msg, nil)
	return o
}

func TestInconsistentShares(t *testing.T) {
	cfg, mks := testConfig(t, 2, 1, 1, 1)
	o := encryptTampered(t, cfg, []byte("id"), []byte("msg"))
	// All three shares, one off the polynomial: the base key is wrong.
	if _, err := Decrypt(o, keysFor(o, cfg, mks, 0, 1, 2), pksOf(cfg), nil); !errors.Is(err, ErrNonceMismatch) {
		t.Fatalf("all shares: %v, want ErrNonceMismatch", err)
	}
	// The two good shares decrypt without the check…
	if pt, err := Decrypt(o, keysFor(o, cfg, mks, 1, 2), pksOf(cfg), nil); err != nil || string(pt) != "msg" {
		t.Fatalf("good shares: %v", err)
	}
	// …but the check sees that servers 1+2 and 1+3 would disagree.
	_, err := Decrypt(o, keysFor(o, cfg, mks, 1, 2), pksOf(cfg), &DecryptOptions{CheckShareConsistency: true})
	if !errors.Is(err, ErrInconsistentShares) {
		t.Fatalf("consistency check: %v, want ErrInconsistentShares", err)
	}
	// The check needs every public key.
	pks := pksOf(cfg)
	delete(pks, cfg.Servers[0].ObjectID)
	if _, err := Decrypt(o, keysFor(o, cfg, mks, 1, 2), pks, &DecryptOptions{CheckShareConsistency: true}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("check without all public keys: %v", err)
	}
}

func TestDecryptHostile(t *testing.T) {
	cfg, mks := testConfig(t, 2, 1, 1, 1)
	other, _ := GenerateMasterKey(nil)
	o, _, err := EncryptObject(cfg, []byte("id"), []byte("msg"), &EncryptOptions{AAD: []byte("a")})
	if err != nil {
		t.Fatal(err)
	}
	good := keysFor(o, cfg, mks, 0, 1)
	tamper := func(f func(c *EncryptedObject)) *EncryptedObject {
		c := *o
		c.EncryptedShares = append([][KeySize]byte(nil), o.EncryptedShares...)
		f(&c)
		return &c
	}
	otherNonce := g2Base(&other.s)
	cases := []struct {
		name string
		o    *EncryptedObject
		keys map[Address]*UserSecretKey
		pks  map[Address]PublicKey
		want error
	}{
		{"key from another master key", o, map[Address]*UserSecretKey{cfg.Servers[0].ObjectID: other.Extract(o.FullID()), cfg.Servers[1].ObjectID: good[cfg.Servers[1].ObjectID]}, pksOf(cfg), ErrInvalidKey},
		{"key for another identity", o, map[Address]*UserSecretKey{cfg.Servers[0].ObjectID: mks[0].Extract([]byte("other")), cfg.Servers[1].ObjectID: good[cfg.Servers[1].ObjectID]}, pksOf(cfg), ErrInvalidKey},
		{"no public key for a key", o, good, map[Address]PublicKey{cfg.Servers[0].ObjectID: cfg.Servers[0].PublicKey}, ErrInvalidConfig},
		{"blob tampered", tamper(func(c *EncryptedObject) { c.Blob = append([]byte{c.Blob[0] ^ 1}, c.Blob[1:]...) }), good, pksOf(cfg), ErrAuth},
		{"AAD tampered", tamper(func(c *EncryptedObject) { c.AAD = []byte("b") }), good, pksOf(cfg), ErrAuth},
		{"share tampered", tamper(func(c *EncryptedObject) { c.EncryptedShares[0][5] ^= 1 }), good, pksOf(cfg), ErrNonceMismatch},
		{"randomness tampered", tamper(func(c *EncryptedObject) { c.EncryptedRandomness[31] ^= 1 }), good, pksOf(cfg), ErrNonceMismatch},
		{"nonce replaced", tamper(func(c *EncryptedObject) { c.Nonce = otherNonce.Bytes() }), good, pksOf(cfg), ErrNonceMismatch},
		{"threshold raised", tamper(func(c *EncryptedObject) { c.Threshold = 3 }), good, pksOf(cfg), ErrNotEnoughKeys},
		{"no keys", o, nil, pksOf(cfg), ErrNotEnoughKeys},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pt, err := Decrypt(c.o, c.keys, c.pks, nil)
			if !errors.Is(err, c.want) || pt != nil {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestShamir(t *testing.T) {
	// FIPS-197 §4.2: {57}·{83} = {c1}; {53}·{ca} = {01}.
	if gfMul(0x57, 0x83) != 0xc1 || gfMul(0x53, 0xca) != 0x01 || gfDiv(1, 0x53) != 0xca {
		t.Fatal("GF(256) multiplication is not Rijndael's")
	}
	for a := 1; a < 256; a++ {
		for _, b := range []byte{1, 2, 3, 0x53, 0xff} {
			if gfMul(gfDiv(byte(a), b), b) != byte(a) {
				t.Fatalf("(%d/%d)*%d != %d", a, b, b, a)
			}
		}
	}
	var secret [KeySize]byte
	rand.Read(secret[:])
	for _, c := range []struct{ t, n int }{{1, 1}, {1, 3}, {2, 3}, {3, 5}, {5, 5}, {7, 255}} {
		shares, err := split(nil, &secret, c.t, c.n)
		if err != nil {
			t.Fatal(err)
		}
		// Any t shares (taken from the end) and all n recover the secret.
		for _, sub := range [][]share{shares[c.n-c.t:], shares} {
			got, err := combine(sub)
			if err != nil || got != secret {
				t.Fatalf("%d-of-%d with %d shares: %v", c.t, c.n, len(sub), err)
			}
		}
		// The interpolation through t shares predicts every other share.
		for _, s := range shares {
			if v, _ := interpolateAt(shares[:c.t], s.index); v != s.value {
				t.Fatalf("%d-of-%d: share %d off the polynomial", c.t, c.n, s.index)
			}
		}
		if c.t > 1 {
			if got, _ := combine(shares[:c.t-1]); got == secret {
				t.Fatalf("%d-of-%d: t-1 shares recovered the secret", c.t, c.n)
			}
		}
	}
	if _, err := split(nil, &secret, 0, 3); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal(err)
	}
	if _, err := split(nil, &secret, 2, 256); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal(err)
	}
	if _, err := combine([]share{{index: 1}, {index: 1}}); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
	if _, err := combine([]share{{index: 0}}); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
}

func TestProofOfPossession(t *testing.T) {
	mk, _ := GenerateMasterKey(nil)
	id := Address{9}
	pop := mk.ProofOfPossession(id)
	pk := mk.PublicKey()
	if err := pk.VerifyProofOfPossession(id, pop[:]); err != nil {
		t.Fatal(err)
	}
	if err := pk.VerifyProofOfPossession(Address{8}, pop[:]); !errors.Is(err, ErrInvalidSignature) {
		t.Fatalf("other object ID: %v", err)
	}
	other, _ := GenerateMasterKey(nil)
	if err := other.PublicKey().VerifyProofOfPossession(id, pop[:]); !errors.Is(err, ErrInvalidSignature) {
		t.Fatalf("other key: %v", err)
	}
}

func TestKeyParsing(t *testing.T) {
	mk, _ := GenerateMasterKey(nil)
	back, err := ParseMasterKey("0x" + mk.Hex())
	if err != nil || back.PublicKey() != mk.PublicKey() {
		t.Fatalf("master key round trip: %v", err)
	}
	for _, s := range []string{"", "zz", "00", fmt.Sprintf("%064x", 0), "73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001"} {
		if _, err := ParseMasterKey(s); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParseMasterKey(%q): %v", s, err)
		}
	}
	pk := mk.PublicKey()
	var pk2 PublicKey
	if err := pk2.UnmarshalText([]byte(pk.String())); err != nil || pk2 != pk {
		t.Fatalf("public key text round trip: %v", err)
	}
	g1 := g1Gen.Bytes()
	for name, b := range map[string][]byte{"short": pk.b[:95], "G1 point": g1[:], "uncompressed flag": append([]byte{pk.b[0] &^ 0x80}, pk.b[1:]...), "identity": append([]byte{0xc0}, make([]byte, 95)...)} {
		if _, err := ParsePublicKey(b); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParsePublicKey(%s): %v", name, err)
		}
	}
	// A G1 point off the prime-order subgroup: x = 0 is on the curve only
	// for y² = 4; search a small x that decodes to a point, then check
	// decodeG1 refuses it when it is outside the subgroup.
	found := false
	for x := byte(1); x < 200 && !found; x++ {
		b := make([]byte, G1Size)
		b[0], b[G1Size-1] = 0x80, x
		if _, err := decodeG1(b); err != nil && bytes.Contains([]byte(err.Error()), []byte("subgroup")) {
			found = true
		}
	}
	if !found {
		t.Fatal("no off-subgroup G1 point was refused")
	}
	if _, err := ParseUserSecretKey(make([]byte, G1Size)); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("zero user secret key: %v", err)
	}
}

func TestSecretsRedacted(t *testing.T) {
	mk, _ := GenerateMasterKey(nil)
	sk, _ := GenerateSuiKey(nil)
	usk := mk.Extract([]byte("x"))
	var key Key
	rand.Read(key[:])
	api := NewSecret("sk-live-123456")
	ks := KeyServer{ObjectID: Address{1}, URL: "https://h", PublicKey: mk.PublicKey(), APIKeyHeader: "X-API-Key", APIKey: api}
	secrets := []string{mk.Hex(), sk.Export(), fmt.Sprintf("%x", usk.Bytes()), fmt.Sprintf("%x", [KeySize]byte(key)), api.Reveal()}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		for _, v := range []any{mk, sk, usk, key, api, ks, &ks} {
			out := fmt.Sprintf(verb, v)
			for _, s := range secrets {
				if bytes.Contains([]byte(out), []byte(s)) || bytes.Contains([]byte(out), []byte(fmt.Sprintf("%x", s))) {
					t.Fatalf("%s of %T leaks a secret: %s", verb, v, out)
				}
			}
		}
	}
	if fmt.Sprint(mk) != "[REDACTED]" || fmt.Sprintf("%v", sk) != "[REDACTED]" || fmt.Sprintf("%x", key) != "[REDACTED]" {
		t.Fatal("secrets do not print as [REDACTED]")
	}
}
