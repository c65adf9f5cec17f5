package seal

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"testing"
)

// The walkthrough of docs/content/SealCLI.mdx in MystenLabs/seal: three
// master keys, package 0x0, ID 53e66d756e6472206672f3f069, threshold 2,
// key servers 0x1, 0x2, 0x3.
var cliVector = struct {
	masterKeys, publicKeys, userKeys []string
	object, symmetricKey, message    string
	id                               string
}{
	masterKeys: []string{
		"6b2eb410ad729f5b2ffa54ca5a2186ef95a1e31df3cccdd346b24f2262279440",
		"54152de3b08708b18ce5cd69b0c4d732f093cba2ba5c102c4f26e0f210daab75",
		"2ea9ccdaa224e9fc34ef1458fced17562b2d3757c1ebb223c627173ac6f93806",
	},
	publicKeys: []string{
		"aeb258b9fb9a2f29f74eb0a1a895860bb1c6ba3f9ea7075366de159e4764413e9ec0597ac9c0dad409723935440a45f40eee4728630ae3ea40a68a819375bba1d78d7810f901d8a469d785d00cfed6bd28f01d41e49c5652d924e9d19fddcf62",
		"b1076a26f4f82f39d0e767fcd2118659362afe40bce4e8d553258c86756bb74f888bca79f2d6b71edf6e25af89efa83713a223b48a19d2e551897ac92ac7458336cd489be3be025e348ca93f4c94d22594f96f0e08990e51a7de9da8ff29c98f",
		"95fcb465af3791f31d53d80db6c8dcf9f83a419b2570614ecfbb068f47613da17cb9ffc66bb052b9546f17196929538f0bd2d38e1f515d9916e2db13dc43e0ccbd4cb3d7cbb13ffecc0b68b37481ebaaaa17cad18096a9c2c27a797f17d78623",
	},
	userKeys: []string{
		"b882fccc1f021c3b995e63a1f7329fcf71f750844195125e6a6b319dde9a7afc24b0c1a29d5a55f5908cf440dd7b3da3",
		"97c30ec9dd6dafa187b732004a4d33414446115af35a1b1c0eb78af094f6e0d4d06830d5d7be9140cbcb05c63aaf7e28",
		"8547bf7a70f7c1f3ad4070af8bc969f4afb82eddfcdca129fcedd6b7df1c91527ccd8d35dd33d0552cd95ba302ee6166",
	},
	id:           "53e66d756e6472206672f3f069",
	object:       "0000000000000000000000000000000000000000000000000000000000000000000d53e66d756e6472206672f3f069030000000000000000000000000000000000000000000000000000000000000001010000000000000000000000000000000000000000000000000000000000000002020000000000000000000000000000000000000000000000000000000000000003030200841b3a59241e099e8b8d9cec1d531b1e8fe4b4170433e30d9aaa9fc764201f69e589a0b2a0e65bfb279d4b25ee1ce8141812bfb785abdb05134c3958f53c2e81e7bc06e5c1f1ebd7e489b5cf652216b13e6b7c2b13da70a4a7c05c3544a1ddf703b627cb3268d74c74ead83fb827c60fa23c1d192fb8a7db50ea8721bf7c95bd1748b5ed7da6873f4a5b539cb16085e5cd174206db776c04902c7d8c02d6fa47aada89c2fa0692973a83a7a900f2b0dd7f7475e55095d0df7b0483ae1192761d368985e51d72597df02764c654536130c905a8de4a6c9169643e9dd01efab17a9200723b7d7b2ede8924cfb3687a0c41599b87bebc9d913d8eb81a2027ba8286a7b2cd9f5303b6b551fa545189e2f13cb65642b66595ca4256f42cdda2ac78af39abde06184da29131437e1417ebb35c7136d2c74b8ab9fa4147077bbcdbfafc2b05458792eefe0424fedef10247b8b3c787e7772800",
	symmetricKey: "e39651e5aa01949ba5174c67a2c37f58ee8217392ba2275a5789f0ac2c3540d8",
	message:      "The difference between a Miracle and a Fact is exactly the difference between a mermaid and a seal",
}

func cliServers(t *testing.T) ([]Address, []*MasterKey, map[Address]PublicKey) {
	t.Helper()
	var ids []Address
	var mks []*MasterKey
	pks := map[Address]PublicKey{}
	for i, s := range cliVector.masterKeys {
		mk, err := ParseMasterKey(s)
		if err != nil {
			t.Fatal(err)
		}
		id := Address{31: byte(i + 1)}
		pk := mk.PublicKey()
		if pk.String() != cliVector.publicKeys[i] {
			t.Fatalf("public key %d = %s, want %s", i, pk, cliVector.publicKeys[i])
		}
		ids, mks, pks[id] = append(ids, id), append(mks, mk), pk
	}
	return ids, mks, pks
}

// TestSealCLIVector asserts the documented walkthrough exactly where the
// current Seal scheme (crypto crate and TypeScript SDK) can: the object's
// bytes, the public keys of the master keys, and the symmetric-key
// decryption. The documented user secret keys predate the current identity
// hash: they are the master keys times H1(len ‖ "SUI-SEAL-IBE-BLS12381-00" ‖
// package ‖ id) (checked below by pairing), an early derivation the shares
// of this object also use, so neither this package nor the official SDK
// (see TestInteropSealCLIKeys) accepts them; Decrypt refuses them with
// ErrInvalidKey instead of returning garbage.
func TestSealCLIVector(t *testing.T) {
	ids, mks, pks := cliServers(t)
	o, err := ParseEncryptedObject(mustHex(t, cliVector.object))
	if err != nil {
		t.Fatal(err)
	}
	if o.PackageID != (Address{}) || hex.EncodeToString(o.ID) != cliVector.id || o.Threshold != 2 || len(o.Services) != 3 || o.DEM != AESGCM || o.AAD != nil {
		t.Fatalf("parsed header: %+v", o)
	}
	for i, s := range o.Services {
		if s.ObjectID != ids[i] || s.Index != uint8(i+1) {
			t.Fatalf("service %d = %v", i, s)
		}
	}
	if hex.EncodeToString(o.Nonce[:]) != "841b3a59241e099e8b8d9cec1d531b1e8fe4b4170433e30d9aaa9fc764201f69e589a0b2a0e65bfb279d4b25ee1ce8141812bfb785abdb05134c3958f53c2e81e7bc06e5c1f1ebd7e489b5cf652216b13e6b7c2b13da70a4a7c05c3544a1ddf7" ||
		hex.EncodeToString(o.EncryptedShares[1][:]) != "48b5ed7da6873f4a5b539cb16085e5cd174206db776c04902c7d8c02d6fa47aa" {
		t.Fatal("nonce or shares differ from the documented parse output")
	}
	// Re-encoding is byte-identical.
	if b, err := o.MarshalBinary(); err != nil || hex.EncodeToString(b) != cliVector.object {
		t.Fatalf("re-marshal differs (%v)", err)
	}
	// The symmetric key decrypts alone, to the documented message.
	pt, err := DecryptWithKey(o, Key(mustHex(t, cliVector.symmetricKey)))
	if err != nil || string(pt) != cliVector.message {
		t.Fatalf("symmetric decrypt = %q, %v", pt, err)
	}

	legacyDST := []byte("SUI-SEAL-IBE-BLS12381-00")
	legacyH1 := hashToG1([]byte{byte(len(legacyDST))}, legacyDST, o.FullID())
	docKeys := map[Address]*UserSecretKey{}
	for i, mk := range mks {
		usk, err := ParseUserSecretKey(mustHex(t, cliVector.userKeys[i]))
		if err != nil {
			t.Fatal(err)
		}
		pk := pks[ids[i]]
		if !pairingEqual(&usk.p, &g2Gen, &legacyH1, &pk.p) {
			t.Fatalf("documented key %d is not master key %d times the legacy H1", i, i)
		}
		if err := usk.Verify(o.FullID(), pk); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("documented key %d verifies under the current H1: %v", i, err)
		}
		if cur := mk.Extract(o.FullID()); cur.Verify(o.FullID(), pk) != nil {
			t.Fatalf("current extraction %d does not verify", i)
		}
		docKeys[ids[i]] = usk
	}
	if _, err := Decrypt(o, docKeys, pks, nil); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("decrypt with the documented keys: %v, want ErrInvalidKey", err)
	}
	cur := map[Address]*UserSecretKey{}
	for i, mk := range mks {
		cur[ids[i]] = mk.Extract(o.FullID())
	}
	if _, err := Decrypt(o, cur, pks, nil); !errors.Is(err, ErrNonceMismatch) {
		t.Fatalf("decrypt with current-scheme keys: %v, want ErrNonceMismatch", err)
	}
}

// typescript_test_vector in crates/crypto/src/lib.rs: an object written by
// the TypeScript SDK (AES with Some([]) AAD), package 0x0, ID 01020304.
func TestTypeScriptVector(t *testing.T) {
	masterKeys := []string{
		"GpR7SBGd3si0yeCtH/Zf5SbMT8b7wwTi532/NPGNCZI=",
		"bbcjgCVjr8bl3To5S7cQdYEA/o1Tnr4jTk+uZ1ifs8A=",
		"QHBhV16RiH4JfZBofMLa4yHS4qX6Nv8Je0MlB4W2BV0=",
	}
	const object = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABAECAwQDAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAEqAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAALCAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAMeAgCEy0p0JVyGZjTiAwvuhfbZgRbVf6B/7mt4YBW+QVwzyxJvwg7EWKC3fsVYdwiazbEZrmUt+DVDuTiiIvecSoBHN0eOW5WN77xC9ZX5IDVDqyLgP0/CzLPZav3kQES7HlkDUTPTRQGs51AtW3VBP7XW8eVDynrkuNBIAlmK8VpacwqhfgGc9jEeEyI8Radr3vFWawYpBc9NHdRgvD9GRmqhg0aGM4iKmAvnny2XR2i+O59QCk8K77YYsMPCSybazYjQGnUB2DGYvu/mXWg1dle5PPqH004F0vjlyHbNU+IQ+j4AJ2JiOXauUC7qc6NHcDrPkrdwyo4vMO7sxDK54lb719lK5r0M86MwXQEEAQIDBA=="
	raw, err := base64.StdEncoding.DecodeString(object)
	if err != nil {
		t.Fatal(err)
	}
	o, err := ParseEncryptedObject(raw)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := o.MarshalBinary(); err != nil || !bytes.Equal(b, raw) {
		t.Fatalf("re-marshal differs (%v)", err)
	}
	keys := map[Address]*UserSecretKey{}
	pks := map[Address]PublicKey{}
	for i, s := range masterKeys {
		b, _ := base64.StdEncoding.DecodeString(s)
		mk, err := ParseMasterKey(hex.EncodeToString(b))
		if err != nil {
			t.Fatal(err)
		}
		id := Address{31: byte(i + 1)}
		keys[id], pks[id] = mk.Extract(o.FullID()), mk.PublicKey()
	}
	pt, err := Decrypt(o, keys, pks, &DecryptOptions{CheckShareConsistency: true})
	if err != nil || string(pt) != "My super secret message" {
		t.Fatalf("decrypt = %q, %v", pt, err)
	}
}

// regression_test_aes_gcm and regression_test_hmac_ctr in crates/crypto/src/dem.rs.
func TestDEMRegression(t *testing.T) {
	msg := []byte("The difference between a Miracle and a Fact is exactly the difference between a mermaid and a seal.")
	aad := []byte("Mark Twain")

	aesKey := [KeySize]byte(mustHex(t, "43041389faab1f789fa56722b1def4c3ec6da22675e9bd8ad7329cd931bc840a"))
	aesCT := mustHex(t, "a3a5c857ee27937f43ccfb42b41ca2155c9a4a77a8e54af35f78a78ff102206142d1be22dfc39a6374463255934ae640adceeffb17e56b9190d8c5f6456e9e7ff1c4eaa45114b640b407efd371f26b1f7d7e48bd86d742a01c0ad7dbe18b86df188e27cb029978b7fd243d9a63bdabd76aa478")
	if got := aesEncrypt(&aesKey, msg, aad); !bytes.Equal(got, aesCT) {
		t.Fatalf("AES-GCM = %x", got)
	}
	if pt, err := aesDecrypt(&aesKey, aesCT, aad); err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("AES-GCM decrypt: %v", err)
	}
	if _, err := aesDecrypt(&aesKey, aesCT, []byte("Mark Twain.")); !errors.Is(err, ErrAuth) {
		t.Fatalf("AES-GCM wrong AAD: %v", err)
	}

	hKey := [KeySize]byte(mustHex(t, "5bfdfd7c814903f1311bebacfffa3c001cbeb1cbb3275baa9aafe21fadd9f396"))
	hCT := mustHex(t, "feadb8c8f781036f86b6a9f436cac6f9f68ba8fc8b8444f0331a5820f78580f32034f698f7ce15f25defae1749f0131c0a8b8c5e751b96aacf507d0dbd4d7790440d196a339fcb8498ca7dd236014e353729b7aa2cf524284a8d2305d2378494eadd6f")
	hMAC := [KeySize]byte(mustHex(t, "85d498365972c3dc7a53f94232f9cb10dcc94eff064d6835d41d7a7536b47b51"))
	c, mac := hmacEncrypt(&hKey, msg, aad)
	if !bytes.Equal(c, hCT) || mac != hMAC {
		t.Fatalf("HMAC-CTR = %x / %x", c, mac)
	}
	if pt, err := hmacDecrypt(&hKey, hCT, aad, &hMAC); err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("HMAC-CTR decrypt: %v", err)
	}
	bad := hMAC
	bad[0] ^= 1
	if _, err := hmacDecrypt(&hKey, hCT, aad, &bad); !errors.Is(err, ErrAuth) {
		t.Fatalf("HMAC-CTR bad MAC: %v", err)
	}
}
