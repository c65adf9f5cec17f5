package ens

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

// Fuzz targets for every parser of what a resolver or a gateway sends;
// seed corpora in testdata/fuzz.

func packLookup(t testing.TB, ol offchainLookup) []byte {
	b, err := offchainLookupArgs.Pack(ol.Sender, ol.URLs, ol.CallData, ol.Callback, ol.ExtraData)
	if err != nil {
		t.Fatal(err)
	}
	return append(bytes.Clone(offchainLookupSelector), b...)
}

func FuzzDecodeOffchainLookup(f *testing.F) {
	f.Add(packLookup(f, offchainLookup{Sender: common.HexToAddress("0x1"), URLs: []string{"https://gw.example/{sender}/{data}.json"}, CallData: []byte{1, 2, 3}, Callback: [4]byte{0xde, 0xad, 0xbe, 0xef}, ExtraData: []byte("x")}))
	f.Add(packLookup(f, offchainLookup{URLs: []string{LocalBatchGateway, "http://a", ""}}))
	f.Add(append(bytes.Clone(offchainLookupSelector), make([]byte, 64)...))
	f.Add([]byte{0x55, 0x6f, 0x18})
	f.Fuzz(func(t *testing.T, rev []byte) {
		ol, err := decodeOffchainLookup(rev)
		if err != nil {
			return
		}
		if len(ol.URLs) == 0 || len(ol.URLs) > maxLookupURLs || len(ol.CallData) > maxLookupBytes || len(ol.ExtraData) > maxLookupBytes {
			t.Fatalf("decoded past the bounds: %d URLs, %d/%d bytes", len(ol.URLs), len(ol.CallData), len(ol.ExtraData))
		}
		again, err := decodeOffchainLookup(packLookup(t, *ol))
		if err != nil || !reflect.DeepEqual(normLookup(again), normLookup(ol)) {
			t.Fatalf("re-encoded lookup decodes to %+v, %v; want %+v", again, err, ol)
		}
		if _, err := ol.callbackData([]byte("response")); err != nil {
			t.Fatal(err)
		}
	})
}

func normLookup(ol *offchainLookup) offchainLookup {
	c := *ol
	if c.CallData == nil {
		c.CallData = []byte{}
	}
	if c.ExtraData == nil {
		c.ExtraData = []byte{}
	}
	return c
}

func FuzzParseGatewayResponse(f *testing.F) {
	f.Add("application/json", []byte(`{"data":"0x1234"}`))
	f.Add("application/json; charset=utf-8", []byte(`{"data":"0x"}`))
	f.Add("text/plain", []byte("0xdeadbeef\n"))
	f.Add("", []byte(`{"data": 5}`))
	f.Add("application/json", []byte(`{"message":"no"}`))
	f.Add("application/json", []byte(`{"data":"0x123"}`))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		out, err := parseGatewayResponse(contentType, body)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if len(out) > len(body) {
			t.Fatalf("%d bytes decoded from a %d-byte body", len(out), len(body))
		}
		b, _ := json.Marshal(map[string]string{"data": hexutil.Encode(out)})
		again, err := parseGatewayResponse("application/json", b)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("re-encoded answer: %x, %v; want %x", again, err, out)
		}
	})
}

func FuzzDNSEncode(f *testing.F) {
	for _, s := range []string{"", "eth", "agent.eth", "Agent.ETH", "a..eth", "💩.eth", "xn--ls8h.eth", strings.Repeat("a", 256) + ".eth", "a.b.c.d.e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		norm, err := Normalize(name)
		if err != nil {
			return
		}
		enc, err := DNSEncode(norm)
		if err != nil {
			return
		}
		if len(enc) != len(norm)+2 {
			t.Fatalf("%q encodes to %d bytes, want %d", norm, len(enc), len(norm)+2)
		}
		dec, err := dnsDecode(enc)
		if err != nil || dec != norm {
			t.Fatalf("%q → %x → %q, %v", norm, enc, dec, err)
		}
	})
}

func FuzzDNSDecode(f *testing.F) {
	for _, b := range [][]byte{{0}, {3, 'e', 't', 'h', 0}, {5, 'a', 'g', 'e', 'n', 't', 3, 'e', 't', 'h', 0}, {3, 'e', 't'}, {1, '.', 0}, {0, 0}} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		name, err := dnsDecode(b)
		if err != nil {
			return
		}
		enc, err := DNSEncode(name)
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("%x → %q → %x, %v", b, name, enc, err)
		}
	})
}

func packBatchQuery(t testing.TB, qs []batchQuery) []byte {
	type q struct {
		Sender common.Address
		Urls   []string
		Data   []byte
	}
	in := make([]q, len(qs))
	for i, x := range qs {
		in[i] = q{x.Sender, x.URLs, x.Data}
	}
	b, err := batchGatewayABI.Pack("query", in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzDecodeBatchQuery(f *testing.F) {
	f.Add(packBatchQuery(f, []batchQuery{{Sender: common.HexToAddress("0x2"), URLs: []string{"https://gw/{data}"}, Data: []byte{9}}}))
	f.Add(packBatchQuery(f, []batchQuery{{URLs: []string{LocalBatchGateway}}, {URLs: []string{}, Data: []byte{}}}))
	f.Add(packBatchQuery(f, nil))
	f.Add([]byte{0xa7, 0x80, 0xbb, 0x0e})
	f.Fuzz(func(t *testing.T, data []byte) {
		qs, err := decodeBatchQuery(data)
		if err != nil {
			return
		}
		if len(qs) > maxBatch {
			t.Fatalf("%d queries decoded, bound %d", len(qs), maxBatch)
		}
		again, err := decodeBatchQuery(packBatchQuery(t, qs))
		if err != nil || len(again) != len(qs) {
			t.Fatalf("re-encoded batch: %d queries, %v; want %d", len(again), err, len(qs))
		}
		for i := range qs {
			if again[i].Sender != qs[i].Sender || !bytes.Equal(again[i].Data, qs[i].Data) || !reflect.DeepEqual(again[i].URLs, qs[i].URLs) {
				t.Fatalf("query %d: %+v, want %+v", i, again[i], qs[i])
			}
		}
	})
}

func TestDNSEncode(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string // hex
	}{
		{"", "00"},
		{"eth", "0365746800"},
		{"agent.eth", "056167656e740365746800"},
		{"test.offchaindemo.eth", "04746573740c6f6666636861696e64656d6f0365746800"},
	} {
		got, err := DNSEncode(tc.name)
		if err != nil || hexutil.Encode(got) != "0x"+tc.want {
			t.Errorf("DNSEncode(%q) = %x, %v; want %s", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []string{"a..eth", ".eth", strings.Repeat("a", 256) + ".eth"} {
		if _, err := DNSEncode(bad); err == nil {
			t.Errorf("DNSEncode(%q) succeeded", bad)
		}
	}
	if _, err := DNSEncode(strings.Repeat("a", 255) + ".eth"); err != nil {
		t.Errorf("a 255-byte label: %v", err)
	}
}
