package seal

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"testing"
)

// Test cases of the Sui TypeScript SDK's ed25519-keypair tests, generated
// against the Rust keytool: exported key and address.
var suiKeyVectors = []struct{ key, address string }{
	{"suiprivkey1qrwsjvr6gwaxmsvxk4cfun99ra8uwxg3c9pl0nhle7xxpe4s80y05ctazer", "0xa2d14fad60c56049ecf75246a481934691214ce413e6a8ae2fe6834c173a6133"},
	{"suiprivkey1qzdvpa77ct272ultqcy20dkw78dysnfyg90fhcxkdm60el0qht9mvzlsh4j", "0x1ada6e6f3f3e4055096f606c746690f1108fcc2ca479055cc434a3e1d3f758aa"},
	{"suiprivkey1qqqscjyyr64jea849dfv9cukurqj2swx0m3rr4hr7sw955jy07tzgcde5ut", "0xe69e896ca10f5a77732769803cc2b5707f0ab9d4407afb5e4b4464b89769af14"},
}

func TestSuiKeyVectors(t *testing.T) {
	for _, v := range suiKeyVectors {
		k, err := ParseSuiKey(v.key)
		if err != nil {
			t.Fatal(err)
		}
		if got := k.Address().String(); got != v.address {
			t.Errorf("address = %s, want %s", got, v.address)
		}
		if got := k.Export(); got != v.key {
			t.Errorf("export = %s, want %s", got, v.key)
		}
		// The same seed in hex, with and without 0x.
		seed := hex.EncodeToString(k.priv.Seed())
		for _, s := range []string{seed, "0x" + seed, " " + seed + "\n", v.key + "\n"} {
			k2, err := ParseSuiKey(s)
			if err != nil || k2.Address() != k.Address() {
				t.Errorf("ParseSuiKey(hex form): %v", err)
			}
		}
	}
	// An all-8 seed, from the same tests: public key E5j2LG0a…
	k, err := NewSuiKeyFromSeed(bytes.Repeat([]byte{8}, 32))
	if err != nil || base64.StdEncoding.EncodeToString(k.PublicKey()) != "E5j2LG0aRXxRumpLXz29L2n8qTIWIY3ImX5Ba9F9k8o=" {
		t.Fatalf("seed 8…8: %v", err)
	}
}

func TestParseSuiKeyErrors(t *testing.T) {
	good := suiKeyVectors[0].key
	secp := bech32Encode("suiprivkey", append([]byte{1}, make([]byte, 32)...))
	for _, c := range []struct {
		name string
		in   string
		want error
	}{
		{"empty", "", ErrInvalidKey},
		{"bad checksum", good[:len(good)-1] + "q", ErrInvalidKey},
		{"mixed case", "SUIPRIVKEY" + good[10:], ErrInvalidKey},
		{"other hrp", bech32Encode("suiprivkex", append([]byte{0}, make([]byte, 32)...)), ErrInvalidKey},
		{"short data", bech32Encode("suiprivkey", []byte{0, 1, 2}), ErrInvalidKey},
		{"secp256k1 flag", secp, ErrUnsupported},
		{"short hex", "abcd", ErrInvalidKey},
		{"not hex", "zz" + good, ErrInvalidKey},
		{"64-byte hex", hex.EncodeToString(make([]byte, 64)), ErrInvalidKey},
	} {
		k, err := ParseSuiKey(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if k != nil {
			t.Errorf("%s: returned a key", c.name)
		}
		if err != nil && len(c.in) > 30 && bytes.Contains([]byte(err.Error()), []byte(c.in[10:30])) {
			t.Errorf("%s: the error repeats the key: %v", c.name, err)
		}
	}
}

// The signature of @mysten/sui 2.33.1's Ed25519Keypair.signPersonalMessage
// for the first key vector over the signed_message regression text (Ed25519
// is deterministic). The interop test recomputes it with the SDK.
const (
	regressionMessage = "Accessing keys of package 0x0000c457b42d48924087ea3f22d35fd2fe9afdf5bdfe38cc51c0f14f3282f6d5 for 30 mins from 1970-01-19 18:42:28 UTC, session key DX2rNYyNrapO+gBJp1sHQ2VVsQo2ghm7aA9wVxNJ13U="
	sdkSignature      = "AHylLHdx8dPjom4dD7HVHW86va3Q2aeVA3o7QwqesZo6lkLh2Ee3sZYraWK5uPZooiyTR7k5VcHYKcfU/kLd4AgiZH/u7zYwYL1CBaFnGhXxChI2dlkYsbX2ONgvM8/EaQ=="
)

func TestPersonalMessageSignature(t *testing.T) {
	k, err := ParseSuiKey(suiKeyVectors[0].key)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := k.SignPersonalMessage([]byte(regressionMessage))
	if err != nil || sig != sdkSignature {
		t.Fatalf("signature = %s (%v), want the SDK's %s", sig, err, sdkSignature)
	}
	if err := VerifyPersonalMessage([]byte(regressionMessage), sig, k.Address()); err != nil {
		t.Fatal(err)
	}
	other := MustParseAddress(suiKeyVectors[1].address)
	for _, c := range []struct {
		name string
		msg  string
		sig  string
		addr Address
		want error
	}{
		{"other address", regressionMessage, sig, other, ErrInvalidSignature},
		{"other message", regressionMessage + ".", sig, k.Address(), ErrInvalidSignature},
		{"not base64", regressionMessage, "!!", k.Address(), ErrMalformed},
		{"truncated", regressionMessage, sig[:40], k.Address(), ErrMalformed},
		{"secp256k1", regressionMessage, base64.StdEncoding.EncodeToString(append([]byte{1}, make([]byte, 97)...)), k.Address(), ErrUnsupported},
	} {
		if err := VerifyPersonalMessage([]byte(c.msg), c.sig, c.addr); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// test_signed_message_regression and test_signed_message_mvr_regression in
// crates/key-server/src/signed_message.rs.
func TestSignedMessageRegression(t *testing.T) {
	vk, _ := base64.StdEncoding.DecodeString("DX2rNYyNrapO+gBJp1sHQ2VVsQo2ghm7aA9wVxNJ13U=")
	pkg := MustParseAddress("0xc457b42d48924087ea3f22d35fd2fe9afdf5bdfe38cc51c0f14f3282f6d5")
	if got := PersonalMessage(pkg.String(), ed25519.PublicKey(vk), 1622548800, 30); got != regressionMessage {
		t.Fatalf("got  %s\nwant %s", got, regressionMessage)
	}
	const mvr = "Accessing keys of package @my/package for 30 mins from 1970-01-19 18:42:28 UTC, session key DX2rNYyNrapO+gBJp1sHQ2VVsQo2ghm7aA9wVxNJ13U="
	if got := PersonalMessage("@my/package", ed25519.PublicKey(vk), 1622548800, 30); got != mvr {
		t.Fatalf("got  %s\nwant %s", got, mvr)
	}
}

// test_signed_request_regression in crates/key-server/src/signed_message.rs:
// a PTB with one MoveCall bla::seal_approve_x and no inputs, and the
// ElGamal keys of a seeded Rust RNG, whose bytes the expected hex carries.
func TestSignedRequestRegression(t *testing.T) {
	const want = "38000100d92bc457b42d48924087ea3f22d35fd2fe9afdf5bdfe38cc51c0f14f3282f6d503626c610e7365616c5f617070726f76655f7800003085946cd4134ecb8f7739bbd3522d1c8fab793c6c431a8b0b77b4f1885d4c096aafab755e7b8bce8688410cee9908fb29608faaf686c0dcbe3f65f1130e8be538d7ea009347d397f517188dfa14417618887a0412e404fff56efbafb63d1fc4970a1187b4ccb6e767a91822312e533fa53dee69f77ef5130be095e147ff3d40e96e8ddc4bf554dae3bcc34048fe9330cccf"
	raw := mustHex(t, want)
	encKey, encVK := raw[1+56+1:1+56+1+48], raw[1+56+1+48+1:]
	// The keys are a valid ElGamal pair: e(g1^x, g2) == e(g1, g2^x).
	k1, err1 := decodeG1(encKey)
	k2, err2 := decodeG2(encVK)
	if err1 != nil || err2 != nil || !pairingEqual(&k1, &g2Gen, &g1Gen, &k2) {
		t.Fatalf("ElGamal keys in the vector: %v %v", err1, err2)
	}
	p := &PTB{Commands: []MoveCall{{Package: MustParseAddress("0xd92bc457b42d48924087ea3f22d35fd2fe9afdf5bdfe38cc51c0f14f3282f6d5"), Module: "bla", Function: "seal_approve_x"}}}
	got := SignedRequest(p.MarshalBCS(), encKey, encVK)
	if hex.EncodeToString(got) != want {
		t.Fatalf("got  %x\nwant %s", got, want)
	}
	back, err := ParsePTB(p.MarshalBCS())
	if err != nil || !bytes.Equal(back.MarshalBCS(), p.MarshalBCS()) {
		t.Fatalf("PTB round trip: %v", err)
	}
}

// The PTB the SDK's Transaction builds (onlyTransactionKind, minus the kind
// byte) for allowlist::seal_approve("agent-7") in package 0xc0ffe.
const sdkPTB = "AQAIB2FnZW50LTcBAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAADA/+CWFsbG93bGlzdAxzZWFsX2FwcHJvdmUAAQEAAA=="

func TestApprovePTB(t *testing.T) {
	pkg := MustParseAddress("0xc0ffe")
	p, err := Approve{Module: "allowlist"}.BuildPTB(pkg, [][]byte{[]byte("agent-7")})
	if err != nil {
		t.Fatal(err)
	}
	b := p.MarshalBCS()
	if base64.StdEncoding.EncodeToString(b) != sdkPTB {
		t.Fatalf("PTB = %s, want the SDK's %s", base64.StdEncoding.EncodeToString(b), sdkPTB)
	}
	back, err := ParsePTB(b)
	if err != nil {
		t.Fatal(err)
	}
	gotPkg, ids, err := back.ApproveIDs()
	if err != nil || gotPkg != pkg || len(ids) != 1 || string(ids[0]) != "agent-7" {
		t.Fatalf("ApproveIDs = %s %q %v", gotPkg, ids, err)
	}

	// With an allowlist shared object, several IDs and an upgraded package.
	allow := MustParseAddress("0xa11")
	latest := MustParseAddress("0xbeef")
	p, err = Approve{Module: "allowlist", Function: "seal_approve_member", Package: latest, Args: []CallArg{SharedObjectArg(allow, 7, false)}}.
		BuildPTB(pkg, [][]byte{[]byte("a"), []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	back, err = ParsePTB(p.MarshalBCS())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.MarshalBCS(), p.MarshalBCS()) || back.Inputs[2].Kind != ArgShared || back.Inputs[2].ObjectID != allow || back.Inputs[2].Version != 7 {
		t.Fatalf("shared-object PTB round trip: %+v", back.Inputs)
	}
	gotPkg, ids, err = back.ApproveIDs()
	if err != nil || gotPkg != latest || len(ids) != 2 || string(ids[1]) != "b" {
		t.Fatalf("ApproveIDs = %s %q %v", gotPkg, ids, err)
	}

	for _, a := range []Approve{{Module: ""}, {Module: "1x"}, {Module: "m", Function: "approve"}, {Module: "m", Function: "seal_approve-x"}} {
		if _, err := a.BuildPTB(pkg, [][]byte{{1}}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", a, err)
		}
	}
}

func TestApproveIDsRules(t *testing.T) {
	pkg := MustParseAddress("0x1")
	id := PureBytesArg([]byte("id"))
	call := func(pkg Address, fn string, args ...Argument) MoveCall {
		return MoveCall{Package: pkg, Module: "m", Function: fn, Args: args}
	}
	in0 := Argument{Kind: ArgInput, Index: 0}
	for _, c := range []struct {
		name string
		p    PTB
	}{
		{"no inputs", PTB{Commands: []MoveCall{call(pkg, "seal_approve", in0)}}},
		{"no commands", PTB{Inputs: []CallArg{id}}},
		{"other function", PTB{Inputs: []CallArg{id}, Commands: []MoveCall{call(pkg, "approve", in0)}}},
		{"two packages", PTB{Inputs: []CallArg{id}, Commands: []MoveCall{call(pkg, "seal_approve", in0), call(Address{2}, "seal_approve", in0)}}},
		{"no arguments", PTB{Inputs: []CallArg{id}, Commands: []MoveCall{call(pkg, "seal_approve")}}},
		{"gas coin", PTB{Inputs: []CallArg{id}, Commands: []MoveCall{call(pkg, "seal_approve", Argument{Kind: ArgGasCoin})}}},
		{"result", PTB{Inputs: []CallArg{id}, Commands: []MoveCall{call(pkg, "seal_approve", in0, Argument{Kind: ArgResult})}}},
		{"input out of range", PTB{Inputs: []CallArg{id}, Commands: []MoveCall{call(pkg, "seal_approve", Argument{Kind: ArgInput, Index: 1})}}},
		{"object first", PTB{Inputs: []CallArg{SharedObjectArg(pkg, 1, false)}, Commands: []MoveCall{call(pkg, "seal_approve", in0)}}},
		{"pure not a vector", PTB{Inputs: []CallArg{{Kind: ArgPure, Pure: []byte{5, 1}}}, Commands: []MoveCall{call(pkg, "seal_approve", in0)}}},
	} {
		if _, _, err := c.p.ApproveIDs(); !errors.Is(err, ErrInvalidPTB) {
			t.Errorf("%s: %v, want ErrInvalidPTB", c.name, err)
		}
	}
}
