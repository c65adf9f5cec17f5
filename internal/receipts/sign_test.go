package receipts

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// designVector is the receipt of docs/design.md §8.
var designVector = DigestFields{
	CallID:         "call-1",
	TokenID:        "3",
	Subscriber:     "0x0000000000000000000000000000000000000abc",
	OutputHash:     "0x" + strings.Repeat("bb", 32),
	StateDeltaHash: "0x" + strings.Repeat("33", 32),
	TS:             1700000000,
}

func TestDigestDesignVector(t *testing.T) {
	d := Digest(designVector)
	if got, want := d.Hex(), "0x77b23d5fbb0b756cc41ac98c12812bfb14ab6bd8124a70164e5f352d45f1da80"; got != want {
		t.Fatalf("digest = %s, want %s", got, want)
	}
	if got, want := PersonalHash(d).Hex(), "0x35a55bfc1f55de299b8cb58f14a383bdf1df808457b74616ce63c3e371c930de"; got != want {
		t.Fatalf("EIP-191 hash = %s, want %s", got, want)
	}
	// The digest is over the text joined by '|', nothing else.
	text := "call-1|3|0x0000000000000000000000000000000000000abc|0x" + strings.Repeat("bb", 32) + "|0x" + strings.Repeat("33", 32) + "|1700000000"
	if crypto.Keccak256Hash([]byte(text)) != d {
		t.Fatal("digest is not keccak256 of the joined fields")
	}
}

func TestSignRecoverRoundTrip(t *testing.T) {
	key := testKey("operator")
	sig, err := Sign(designVector, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(sig) != 132 || !strings.HasPrefix(sig, "0x") || strings.ToLower(sig) != sig {
		t.Fatalf("signature %q is not 0x + 130 lowercase hex", sig)
	}
	raw, _ := hex.DecodeString(sig[2:])
	if raw[64] != 27 && raw[64] != 28 {
		t.Fatalf("v = %d", raw[64])
	}
	// The signature is over the EIP-191 hash: check with go-ethereum directly.
	h := PersonalHash(Digest(designVector))
	raw[64] -= 27
	pub, err := crypto.SigToPub(h[:], raw)
	if err != nil || crypto.PubkeyToAddress(*pub) != addrOf(key) {
		t.Fatalf("signature does not recover to the key over the EIP-191 hash: %v", err)
	}
	got, err := RecoverSigner(designVector, sig)
	if err != nil || got != addrOf(key) {
		t.Fatalf("RecoverSigner = %s, %v; want %s", got.Hex(), err, addrOf(key).Hex())
	}
	sig2, _ := Sign(designVector, key)
	if sig2 != sig {
		t.Fatal("signing is not deterministic")
	}
}

func TestVerifyRuntimeReceipt(t *testing.T) {
	key := testKey("operator")
	trusted := []common.Address{addrOf(testKey("other")), addrOf(key)}
	raw := runtimeReceipt(runtimeParams{TokenID: 3, CallID: "6f1c1d4e-3b8a-4c55-9f0e-2a7d9c3b1e42", Seq: 1, TS: 1700000000, Key: key})
	r := mustParse(t, raw)
	res, err := Verify(&r, trusted)
	if err != nil || res.Status != StatusTrusted || res.Signer != addrOf(key) {
		t.Fatalf("Verify = %+v, %v", res, err)
	}

	t.Run("unknown signer is flagged", func(t *testing.T) {
		res, err := Verify(&r, []common.Address{addrOf(testKey("other"))})
		if !errors.Is(err, ErrUnknownSigner) || res.Status != StatusUnknownSigner || res.Signer != addrOf(key) {
			t.Fatalf("Verify = %+v, %v", res, err)
		}
		res, err = Verify(&r, nil)
		if res.Status != StatusUnknownSigner || err == nil {
			t.Fatalf("no trusted list: %+v, %v", res, err)
		}
	})

	// Every digest field altered in the JSON must stop the receipt from
	// verifying as trusted.
	tamper := []struct{ name, old, new string }{
		{"callId", `"callId":"6f1c1d4e`, `"callId":"7f1c1d4e`},
		{"tokenId", `"tokenId":3`, `"tokenId":4`},
		{"subscriber case", `"subscriber":"0x9F2d`, `"subscriber":"0x9f2d`},
		{"ts", `"ts":1700000000,"sig`, `"ts":1700000001,"sig`},
	}
	for _, f := range []string{"subscriber", "outputHash", "stateDeltaHash", "signature"} {
		tamper = append(tamper, struct{ name, old, new string }{f, `"` + f + `":"0x`, ""})
	}
	for _, tc := range tamper {
		t.Run("tampered "+tc.name, func(t *testing.T) {
			b := flipAfter(t, raw, tc.old, tc.new)
			tr := mustParse(t, b)
			res, err := Verify(&tr, trusted)
			if err == nil || res.Status == StatusTrusted {
				t.Fatalf("tampered receipt verified: %+v", res)
			}
		})
	}
}

// flipAfter replaces old with new in raw; with new == "" it instead changes
// the hex digit right after old.
func flipAfter(t *testing.T, raw []byte, old, new string) []byte {
	t.Helper()
	i := bytes.Index(raw, []byte(old))
	if i < 0 {
		t.Fatalf("%q not in receipt", old)
	}
	b := append([]byte(nil), raw...)
	if new != "" {
		return append(append(b[:i:i], new...), raw[i+len(old):]...)
	}
	j := i + len(old)
	if b[j] == '0' {
		b[j] = '1'
	} else {
		b[j] = '0'
	}
	return b
}

func TestVerifyFailures(t *testing.T) {
	key := testKey("operator")
	trusted := []common.Address{addrOf(key)}
	sig, _ := Sign(designVector, key)
	raw, _ := hex.DecodeString(sig[2:])
	n := crypto.S256().Params().N
	s := new(big.Int).SetBytes(raw[32:64])
	highS := new(big.Int).Sub(n, s).FillBytes(make([]byte, 32))
	flipV := append([]byte(nil), raw...)
	flipV[64] = 55 - flipV[64] // 27 <-> 28
	malleated := append(append(append([]byte(nil), raw[:32]...), highS...), flipV[64])

	mk := func(sig string) Receipt {
		return mustParse(t, []byte(`{"callId":"call-1","tokenId":3,"subscriber":"0x0000000000000000000000000000000000000abc",`+
			`"outputHash":"0x`+strings.Repeat("bb", 32)+`","stateDeltaHash":"0x`+strings.Repeat("33", 32)+`","ts":1700000000,"signature":"`+sig+`"}`))
	}
	withV := func(v byte) string {
		b := append([]byte(nil), raw...)
		b[64] = v
		return "0x" + hex.EncodeToString(b)
	}
	cases := []struct {
		name string
		r    Receipt
		want Status
		err  error
	}{
		{"valid", mk(sig), StatusTrusted, nil},
		{"uppercase hex signature", mk("0x" + strings.ToUpper(sig[2:])), StatusTrusted, nil},
		{"unsigned 0x", mk("0x"), StatusUnsigned, ErrUnsigned},
		{"no signature", mustParse(t, []byte(`{"callId":"c","tokenId":1,"subscriber":"0xabc","outputHash":"0x1","stateDeltaHash":"0x2","ts":1}`)), StatusUnsigned, ErrUnsigned},
		{"v = 0", mk(withV(raw[64] - 27)), StatusBadSignature, ErrBadSignature},
		{"v = 29", mk(withV(29)), StatusBadSignature, ErrBadSignature},
		{"other v recovers someone else", mk("0x" + hex.EncodeToString(flipV)), StatusUnknownSigner, ErrUnknownSigner},
		{"high s (malleated twin)", mk("0x" + hex.EncodeToString(malleated)), StatusBadSignature, ErrBadSignature},
		{"short", mk(sig[:130]), StatusBadSignature, ErrBadSignature},
		{"no 0x", mk("00" + sig[2:]), StatusBadSignature, ErrBadSignature},
		{"not hex", mk("0x" + strings.Repeat("zz", 65)), StatusBadSignature, ErrBadSignature},
		{"r = 0", mk("0x" + strings.Repeat("00", 32) + sig[66:]), StatusBadSignature, ErrBadSignature},
		{"missing stateDeltaHash (v1 shape)", mustParse(t, []byte(`{"schemaVersion":"stratum/receipt/v1","tokenId":1,"subscriber":"0xabc","callId":"c","outputHash":"0x1","ts":1,"signature":"`+sig+`"}`)), StatusMissingFields, ErrMissingFields},
		{"missing subscriber and outputHash", mustParse(t, []byte(`{"callId":"c","stateDeltaHash":"0x1","ts":1}`)), StatusMissingFields, ErrMissingFields},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Verify(&tc.r, trusted)
			if res.Status != tc.want {
				t.Fatalf("status = %v (%s), want %v", res.Status, res.Reason, tc.want)
			}
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if (err == nil) != (res.Status == StatusTrusted) {
				t.Fatal("error must be nil exactly for trusted receipts")
			}
		})
	}
}

func TestParseAddresses(t *testing.T) {
	got, err := ParseAddresses([]string{"0x0000000000000000000000000000000000000ABC", " 0xabcdefabcdefabcdefabcdefabcdefabcdefabcd "})
	if err != nil || len(got) != 2 || got[0] != common.HexToAddress("0xabc") {
		t.Fatalf("ParseAddresses = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0x123", "abcdefabcdefabcdefabcdefabcdefabcdefabcd", "0xzzcdefabcdefabcdefabcdefabcdefabcdefabcd"} {
		if _, err := ParseAddresses([]string{bad}); err == nil {
			t.Errorf("ParseAddresses(%q) accepted", bad)
		}
	}
}
