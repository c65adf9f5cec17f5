package seal

import (
	"bytes"
	"errors"
	"testing"
)

// testConfig is n servers with fresh master keys and the given weights.
func testConfig(t testing.TB, threshold int, weights ...int) (*Config, []*MasterKey) {
	t.Helper()
	cfg := &Config{PackageID: Address{31: 0x77}, Threshold: threshold}
	var mks []*MasterKey
	for i, w := range weights {
		mk, err := GenerateMasterKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		mks = append(mks, mk)
		cfg.Servers = append(cfg.Servers, KeyServer{ObjectID: Address{0: 0xee, 31: byte(i + 1)}, URL: "http://127.0.0.1:1", PublicKey: mk.PublicKey(), Weight: w})
	}
	return cfg, mks
}

// rawObject writes an object's BCS without validation, with the given enum
// and option tags, so tests can build every malformed variant.
func rawObject(o *EncryptedObject, ibeTag, ctTag uint64, aadTag byte, nShares int) []byte {
	w := &bcsWriter{}
	w.u8(o.Version)
	w.raw(o.PackageID[:])
	w.bytes(o.ID)
	w.uleb(uint64(len(o.Services)))
	for _, s := range o.Services {
		w.raw(s.ObjectID[:])
		w.u8(s.Index)
	}
	w.u8(o.Threshold)
	w.uleb(ibeTag)
	w.raw(o.Nonce[:])
	w.uleb(uint64(nShares))
	for i := 0; i < nShares; i++ {
		w.raw(o.EncryptedShares[i%len(o.EncryptedShares)][:])
	}
	w.raw(o.EncryptedRandomness[:])
	w.uleb(ctTag)
	if ctTag != uint64(Plain) {
		w.bytes(o.Blob)
		w.u8(aadTag)
		if aadTag == 1 {
			w.bytes(o.AAD)
		}
		if ctTag == uint64(HMACCTR) {
			w.raw(o.MAC[:])
		}
	}
	return w.b
}

func validObject(t testing.TB) (*EncryptedObject, []byte) {
	t.Helper()
	cfg, _ := testConfig(t, 2, 1, 1, 1)
	o, _, err := EncryptObject(cfg, []byte("agent"), []byte("payload"), &EncryptOptions{AAD: []byte("aad")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return o, b
}

func TestParseEncryptedObjectMalformed(t *testing.T) {
	o, good := validObject(t)
	if _, err := ParseEncryptedObject(good); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(c *EncryptedObject)) *EncryptedObject {
		c := *o
		c.Services = append([]Service(nil), o.Services...)
		f(&c)
		return &c
	}
	bigServices := mod(func(c *EncryptedObject) {
		c.Services = nil
		for i := 0; i < 256; i++ {
			c.Services = append(c.Services, Service{Index: byte(i)})
		}
	})
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"trailing byte", append(append([]byte{}, good...), 0), ErrMalformed},
		{"version 1", rawObject(mod(func(c *EncryptedObject) { c.Version = 1 }), 0, 0, 1, 3), ErrUnsupported},
		{"no services", rawObject(mod(func(c *EncryptedObject) { c.Services = nil; c.Threshold = 0 }), 0, 0, 1, 0), ErrMalformed},
		{"256 services", rawObject(bigServices, 0, 0, 1, 256), ErrMalformed},
		{"threshold 0", rawObject(mod(func(c *EncryptedObject) { c.Threshold = 0 }), 0, 0, 1, 3), ErrMalformed},
		{"threshold above n", rawObject(mod(func(c *EncryptedObject) { c.Threshold = 4 }), 0, 0, 1, 3), ErrMalformed},
		{"share index 0", rawObject(mod(func(c *EncryptedObject) { c.Services[1].Index = 0 }), 0, 0, 1, 3), ErrMalformed},
		{"duplicate index", rawObject(mod(func(c *EncryptedObject) { c.Services[2].Index = 1 }), 0, 0, 1, 3), ErrMalformed},
		{"KEM IdMlKemMntru", rawObject(o, 1, 0, 1, 3), ErrUnsupported},
		{"unknown KEM", rawObject(o, 2, 0, 1, 3), ErrMalformed},
		{"fewer shares than services", rawObject(o, 0, 0, 1, 2), ErrMalformed},
		{"more shares than services", rawObject(o, 0, 0, 1, 4), ErrMalformed},
		{"unknown ciphertext", rawObject(o, 0, 3, 1, 3), ErrMalformed},
		{"bad option tag", rawObject(o, 0, 0, 2, 3), ErrMalformed},
		{"Plain with payload left over", append(rawObject(o, 0, 2, 0, 3), 0, 0), ErrMalformed},
		{"nonce not compressed", rawObject(mod(func(c *EncryptedObject) { c.Nonce = [G2Size]byte{} }), 0, 0, 1, 3), ErrMalformed},
		{"nonce identity", rawObject(mod(func(c *EncryptedObject) { c.Nonce = [G2Size]byte{0: 0xc0} }), 0, 0, 1, 3), ErrMalformed},
		{"nonce off curve", rawObject(mod(func(c *EncryptedObject) { c.Nonce[G2Size-1] ^= 1 }), 0, 0, 1, 3), ErrMalformed},
		{"non-canonical ID length", append(append(append([]byte{0}, o.PackageID[:]...), 0x85, 0x00), good[1+32+1+5:]...), ErrMalformed},
		{"ID length past the end", append(append([]byte{0}, o.PackageID[:]...), 0xff, 0xff, 0xff, 0xff, 0x0f), ErrMalformed},
		{"6-byte ULEB", append(append([]byte{0}, o.PackageID[:]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseEncryptedObject(c.in)
			if !errors.Is(err, c.want) || got != nil {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	// Every strict prefix fails.
	for n := 0; n < len(good); n++ {
		if _, err := ParseEncryptedObject(good[:n]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("prefix %d: %v", n, err)
		}
	}
	// Early SDKs drew random distinct share indices; they stay readable.
	legacy := rawObject(mod(func(c *EncryptedObject) { c.Services[0].Index = 42; c.Services[2].Index = 200 }), 0, 0, 1, 3)
	if _, err := ParseEncryptedObject(legacy); err != nil {
		t.Fatalf("indices above n: %v", err)
	}
}

func TestMarshalRoundTripAndAAD(t *testing.T) {
	cfg, _ := testConfig(t, 1, 1)
	for _, c := range []struct {
		name string
		dem  DEM
		aad  []byte
	}{
		{"AES None", AESGCM, nil}, {"AES Some([])", AESGCM, []byte{}}, {"AES Some", AESGCM, []byte("x")},
		{"HMAC None", HMACCTR, nil}, {"HMAC Some", HMACCTR, []byte("y")}, {"Plain", Plain, nil},
	} {
		msg := []byte("m")
		if c.dem == Plain {
			msg = nil
		}
		b, _, err := Encrypt(cfg, []byte{1}, msg, &EncryptOptions{DEM: c.dem, AAD: c.aad})
		if err != nil {
			t.Fatal(err)
		}
		o, err := ParseEncryptedObject(b)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (o.AAD == nil) != (c.aad == nil) || !bytes.Equal(o.AAD, c.aad) || o.DEM != c.dem {
			t.Fatalf("%s: AAD %v (nil %v), DEM %v", c.name, o.AAD, o.AAD == nil, o.DEM)
		}
		if re, err := o.MarshalBinary(); err != nil || !bytes.Equal(re, b) {
			t.Fatalf("%s: re-marshal differs (%v)", c.name, err)
		}
	}
}

func TestLooks(t *testing.T) {
	_, good := validObject(t)
	header := 1 + 32 + 1 + 5 + 1 + 3*33 + 1
	for _, c := range []struct {
		name string
		in   []byte
		want bool
	}{
		{"object", good, true},
		{"header and KEM tag only", good[:header+1], true},
		{"header without KEM tag", good[:header], false},
		{"empty", nil, false},
		{"hermesd v1 envelope", append([]byte{1, 0, 0, 0}, good[4:]...), false},
		{"hermesd v2 envelope", append([]byte("HRMS\x02\x00\x00\x00"), good...), false},
		{"version 1", append([]byte{1}, good[1:]...), false},
		{"KEM tag 1", append(append([]byte{}, good[:header]...), 1), false},
	} {
		if got := Looks(c.in); got != c.want {
			t.Errorf("%s: Looks = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMarshalValidates(t *testing.T) {
	o, _ := validObject(t)
	for _, f := range []func(c *EncryptedObject){
		func(c *EncryptedObject) { c.Version = 2 },
		func(c *EncryptedObject) { c.Threshold = 0 },
		func(c *EncryptedObject) { c.EncryptedShares = c.EncryptedShares[:1] },
		func(c *EncryptedObject) { c.Services = []Service{{Index: 1}, {Index: 1}, {Index: 2}} },
		func(c *EncryptedObject) { c.DEM = 9 },
	} {
		c := *o
		f(&c)
		if _, err := c.MarshalBinary(); err == nil {
			t.Errorf("marshalled an invalid object %+v", c)
		}
	}
}
