package receipts

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseRuntimeV2KeepsBytes(t *testing.T) {
	key := testKey("operator")
	raw := runtimeReceipt(runtimeParams{TokenID: 3, CallID: "6f1c1d4e-3b8a-4c55-9f0e-2a7d9c3b1e42", Seq: 7, TS: 1700000000, Key: key})
	r := mustParse(t, raw)
	if !bytes.Equal(r.Bytes(), raw) {
		t.Fatalf("bytes changed:\n got %s\nwant %s", r.Bytes(), raw)
	}
	// All 16 runtime fields, in construction order.
	dec := json.NewDecoder(bytes.NewReader(raw))
	var keys []string
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var v json.RawMessage
		dec.Decode(&v)
	}
	want := "schemaVersion tokenId subscriber callId input outputHash model teeAttestation paymentProof agentRuntime " +
		"computeBackend bundleHashBefore bundleHashAfter stateDeltaHash skillsLoaded skillsCreated transcript ts signature"
	if strings.Join(keys, " ") != want {
		t.Fatalf("key order %v", keys)
	}
	if r.SchemaVersion != SchemaRuntimeV2 || r.TokenID != "3" || r.CallID != "6f1c1d4e-3b8a-4c55-9f0e-2a7d9c3b1e42" ||
		r.Subscriber != "0x9F2dC1b0E5bA3c47d1F08e6A2B4c5D7e8F901234" || r.TS != 1700000000 ||
		r.BundleHashBefore == "" || r.BundleHashAfter == "" || r.StateDeltaHash == "" || r.OutputHash == "" || r.otherKeys != 9 {
		t.Fatalf("parsed fields wrong: %+v", r)
	}
	if r.IsSnapshot() {
		t.Fatal("runtime receipt claims to be a snapshot receipt")
	}
}

func TestParseCompactsWhitespace(t *testing.T) {
	in := []byte("  {\n  \"callId\" : \"a\\u0041\\\"\",\r\n \"ts\": 5, \"x\": [ 1, {\"y\" : \"<&>\"} ]\n}\n")
	r := mustParse(t, in)
	want := `{"callId":"a\u0041\"","ts":5,"x":[1,{"y":"<&>"}]}`
	if string(r.Bytes()) != want {
		t.Fatalf("compact = %s, want %s", r.Bytes(), want)
	}
	if r.CallID != `aA"` || r.TS != 5 {
		t.Fatalf("fields %q %d", r.CallID, r.TS)
	}
}

func TestParseErrors(t *testing.T) {
	big := `{"callId":"x","ts":1,"pad":"` + strings.Repeat("a", MaxReceiptSize) + `"}`
	cases := []struct{ name, in string }{
		{"empty", ""},
		{"blank", "  \n"},
		{"array", `[{"callId":"x","ts":1}]`},
		{"string", `"x"`},
		{"bad json", `{"callId":"x","ts":1`},
		{"trailing data", `{"callId":"x","ts":1} {}`},
		{"two objects", `{"callId":"x","ts":1}{"callId":"y","ts":2}`},
		{"missing callId", `{"ts":1}`},
		{"empty callId", `{"callId":"","ts":1}`},
		{"callId number", `{"callId":7,"ts":1}`},
		{"missing ts", `{"callId":"x"}`},
		{"ts float", `{"callId":"x","ts":1.5}`},
		{"ts exponent", `{"callId":"x","ts":1e9}`},
		{"ts string", `{"callId":"x","ts":"1700000000"}`},
		{"ts negative", `{"callId":"x","ts":-1}`},
		{"ts overflow", `{"callId":"x","ts":99999999999999999999}`},
		{"tokenId string", `{"callId":"x","ts":1,"tokenId":"3"}`},
		{"tokenId negative", `{"callId":"x","ts":1,"tokenId":-3}`},
		{"tokenId fraction", `{"callId":"x","ts":1,"tokenId":3.0}`},
		{"subscriber null", `{"callId":"x","ts":1,"subscriber":null}`},
		{"signature object", `{"callId":"x","ts":1,"signature":{}}`},
		{"duplicate callId", `{"callId":"x","ts":1,"callId":"y"}`},
		{"duplicate escaped key", `{"callId":"x","ts":1,"c\u0061llId":"y"}`},
		{"duplicate escaped key first", `{"c\u0061llId":"y","ts":1,"callId":"x"}`},
		{"duplicate both escaped", `{"c\u0061llId":"y","ts":1,"\u0063allId":"x"}`},
		{"duplicate unknown key", `{"callId":"x","ts":1,"a":1,"a":2}`},
		{"invalid utf-8", "{\"callId\":\"x\xff\",\"ts\":1}"},
		{"too large", big},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v matches neither ErrMalformed nor ErrTooLarge", err)
			}
		})
	}
}

func TestParseManyKeysDuplicate(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"callId":"x","ts":1`)
	for i := range 100 {
		b.WriteString(`,"k` + strings.Repeat("z", i) + `":1`)
	}
	ok := b.String() + "}"
	if _, err := Parse([]byte(ok)); err != nil {
		t.Fatalf("100 distinct keys: %v", err)
	}
	if _, err := Parse([]byte(b.String() + `,"kzzz":2}`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("duplicate among many keys: %v", err)
	}
}

func TestParseOptionalFields(t *testing.T) {
	r := mustParse(t, []byte(`{"callId":"x","ts":0,"tokenId":115792089237316195423570985008687907853269984665640564039457584007913129639935,"nested":{"callId":1,"ts":"no"}}`))
	if r.TokenID != "115792089237316195423570985008687907853269984665640564039457584007913129639935" || r.TS != 0 {
		t.Fatalf("%+v", r)
	}
	if r.Subscriber != "" || r.Signature != "" || r.otherKeys != 1 {
		t.Fatalf("%+v", r)
	}
}
