package receipts

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

// tokenReceipt is a receipt whose JSON carries tokenId as written (raw
// JSON number text) and whose signature covers signedAs (the digest's
// tokenId field).
func tokenReceipt(t testing.TB, key *ecdsa.PrivateKey, callID, raw, signedAs string) Receipt {
	t.Helper()
	sub := strings.ToLower(addrOf(key).Hex())
	out, delta := hash32(0xbb), hash32(0x33)
	sig, err := Sign(DigestFields{CallID: callID, TokenID: signedAs, Subscriber: sub, OutputHash: out, StateDeltaHash: delta, TS: 1700000000}, key)
	if err != nil {
		t.Fatal(err)
	}
	return mustParse(t, fmt.Appendf(nil, `{"tokenId":%s,"subscriber":%q,"callId":%q,"outputHash":%q,"stateDeltaHash":%q,"ts":1700000000,"signature":%q}`,
		raw, sub, callID, out, delta, sig))
}

func TestJSExact(t *testing.T) {
	for _, tt := range []struct {
		s, reads string
		ok       bool
	}{
		{"0", "0", true},
		{"3", "3", true},
		{"123456789", "123456789", true},
		{"1099511627776", "1099511627776", true},       // 2^40
		{"9007199254740991", "9007199254740991", true}, // 2^53 - 1
		{"9007199254740992", "9007199254740992", true}, // 2^53: a double holds it
		{"9007199254740993", "9007199254740992", false},
		{"18014398509481984", "18014398509481984", true},      // 2^54
		{"1152921504606846977", "1152921504606847000", false}, // 2^60 + 1
		{"18446744073709551615", "18446744073709552000", false},
		{"100000000000000000000", "100000000000000000000", true}, // 10^20
		{"1000000000000000000000", "1e+21", false},               // JavaScript's exponent form
		{"115792089237316195423570985008687907853269984665640564039457584007913129639935", "1.157920892373162e+77", false},
	} {
		reads, ok := JSExact(tt.s)
		if reads != tt.reads || ok != tt.ok {
			t.Errorf("JSExact(%s) = %s, %v; want %s, %v", tt.s, reads, ok, tt.reads, tt.ok)
		}
	}
}

// TestTokenIDBeyondJavaScript: hermesd computes a receipt's digest from
// the tokenId's exact digits, never from a rounded number; and it refuses
// a receipt whose tokenId JavaScript would read as another token, since
// the reference runtime would file it under that token and recover
// another signer.
func TestTokenIDBeyondJavaScript(t *testing.T) {
	key := testKey("operator")
	trusted := []common.Address{addrOf(key)}

	if Digest(DigestFields{TokenID: "9007199254740993"}) == Digest(DigestFields{TokenID: "9007199254740992"}) {
		t.Fatal("the digest does not tell 2^53+1 from 2^53")
	}
	// Exact beyond 2^53 - 1 (2^53 itself): verifies.
	r := tokenReceipt(t, key, "c1", "9007199254740992", "9007199254740992")
	if res, err := Verify(&r, trusted); err != nil || res.Status != StatusTrusted {
		t.Errorf("2^53: %+v, %v", res, err)
	}
	for _, tt := range []struct{ name, raw, signedAs string }{
		{"signed over the exact digits", "9007199254740993", "9007199254740993"},
		{"signed over what JavaScript reads", "9007199254740993", "9007199254740992"},
		{"far beyond", "1152921504606846977", "1152921504606846977"},
	} {
		r := tokenReceipt(t, key, "c-"+tt.name, tt.raw, tt.signedAs)
		res, err := Verify(&r, trusted)
		if !errors.Is(err, ErrAmbiguousToken) || res.Status != StatusAmbiguousToken || !strings.Contains(res.Reason, "reads as") {
			t.Errorf("%s: %+v, %v", tt.name, res, err)
		}
	}
	// An exponent or a fraction is no token id at all.
	for _, raw := range []string{"9.007199254740993e15", "3.0", "3e0"} {
		if _, err := Parse(fmt.Appendf(nil, `{"tokenId":%s,"callId":"x","ts":1}`, raw)); !errors.Is(err, ErrMalformed) {
			t.Errorf("tokenId %s: %v", raw, err)
		}
	}

	// Import quarantines it, with the reason.
	l := openTestLog(t, Options{})
	in := tokenReceipt(t, key, "big", "9007199254740993", "9007199254740993").String()
	rep, err := l.Import(context.Background(), strings.NewReader(in), PolicyQuarantine, trusted)
	if err != nil || rep.Imported != 0 || rep.Quarantined != 1 || rep.Problems[0].Status != StatusAmbiguousToken {
		t.Fatalf("import: %+v, %v", rep, err)
	}
}

// TestImportRouted: a receipt of another configured agent's token goes to
// that agent's log; of a token nobody holds, to quarantine with the
// reason; the agent's own token's and token-less receipts stay; and the
// agent's export (its snapshot's receipts.ndjson) carries only its own
// token's.
func TestImportRouted(t *testing.T) {
	key := testKey("operator")
	trusted := []common.Address{addrOf(key)}
	auditor := openTestLog(t, Options{})
	yield := openTestLog(t, Options{})
	route := &Route{Agent: "auditor", Token: "3", Forward: func(token string) (*Log, string) {
		switch token {
		case "33":
			return yield, "yield"
		case "1":
			return nil, "oracles" // configured, not open here
		}
		return nil, ""
	}}
	var in bytes.Buffer
	for i, tok := range []string{"3", "0", "1", "33", "123456789", "1099511627776", "3", "33"} {
		r := tokenReceipt(t, key, fmt.Sprintf("call-%d", i), tok, tok)
		in.Write(r.Bytes())
		in.WriteByte('\n')
	}
	rep, err := auditor.ImportRouted(context.Background(), bytes.NewReader(in.Bytes()), PolicyQuarantine, trusted, route)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Imported != 2 || rep.Routed != 2 || rep.Quarantined != 4 || rep.Lines != 8 ||
		len(rep.Forwarded) != 1 || rep.Forwarded[0] != (Forwarded{Agent: "yield", TokenID: "33", Imported: 2}) {
		t.Fatalf("report %+v", rep)
	}
	reasons := map[string]string{}
	for _, p := range rep.Problems {
		if p.Status != StatusForeignToken {
			t.Errorf("line %d: %s", p.Line, p.Status)
		}
		reasons[p.CallID] = p.Reason
	}
	if !strings.Contains(reasons["call-2"], "which agent oracles holds") || !strings.Contains(reasons["call-1"], "no configured agent holds") ||
		!strings.Contains(reasons["call-1"], "auditor, which holds token 3") {
		t.Errorf("reasons %q", reasons)
	}
	if auditor.Len() != 2 || yield.Len() != 2 {
		t.Errorf("auditor holds %d, yield %d", auditor.Len(), yield.Len())
	}
	// Posting again: duplicates, here and there.
	rep, err = auditor.ImportRouted(context.Background(), bytes.NewReader(in.Bytes()), PolicyQuarantine, trusted, route)
	if err != nil || rep.Duplicates != 2 || rep.Forwarded[0].Duplicates != 2 || yield.Len() != 2 {
		t.Fatalf("again: %+v, %v", rep, err)
	}

	// Reject: nothing goes anywhere.
	fresh, other := openTestLog(t, Options{}), openTestLog(t, Options{})
	r2 := *route
	r2.Forward = func(token string) (*Log, string) {
		if token == "33" {
			return other, "yield"
		}
		return nil, ""
	}
	rep, err = fresh.ImportRouted(context.Background(), bytes.NewReader(in.Bytes()), PolicyReject, trusted, &r2)
	if !errors.Is(err, ErrRejected) || fresh.Len() != 0 || other.Len() != 0 {
		t.Fatalf("reject: %+v, %v; logs %d, %d", rep, err, fresh.Len(), other.Len())
	}

	// An agent without a token holds none of these.
	none := openTestLog(t, Options{})
	rep, err = none.ImportRouted(context.Background(), bytes.NewReader(in.Bytes()), PolicyQuarantine, trusted, &Route{Agent: "plain"})
	if err != nil || rep.Imported != 0 || rep.Quarantined != 8 || !strings.Contains(rep.Problems[0].Reason, "holds no token") {
		t.Fatalf("no token: %+v, %v", rep, err)
	}
}

// TestExportOwnTokenOnly: a log that took other tokens' receipts before
// hermesd routed them (46 lines, 13 of its own) exports its own 13.
func TestExportOwnTokenOnly(t *testing.T) {
	key := testKey("operator")
	l := openTestLog(t, Options{})
	var own []string
	for i := range 46 {
		tok := []string{"3", "0", "1", "33", "123456789", "1099511627776"}[i%6]
		if i >= 40 {
			tok = "3"
		}
		r := tokenReceipt(t, key, fmt.Sprintf("call-%02d", i), tok, tok)
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
		if tok == "3" {
			own = append(own, r.String())
		}
	}
	if len(own) != 13 {
		t.Fatalf("%d own receipts", len(own))
	}
	path := filepath.Join(t.TempDir(), NDJSONName)
	if err := l.ExportFile(context.Background(), path, "3"); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, path)
	if len(got) != 13 {
		t.Fatalf("exported %d lines, want 13", len(got))
	}
	for _, line := range got {
		if !strings.HasPrefix(line, `{"tokenId":3,`) {
			t.Errorf("exported %s", line)
		}
	}
	// "3" is not "33" nor "03".
	if err := l.ExportFile(context.Background(), path, ""); err != nil || len(readLines(t, path)) != 0 {
		t.Fatalf("no token: %v, %d lines", err, len(readLines(t, path)))
	}
	// The log still holds them all (Iterate lists them).
	if l.Len() != 46 {
		t.Fatalf("log holds %d", l.Len())
	}
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\n")
}
