package devchain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
)

// lookupCall is resolve(dnsEncode(name), text(node, key)), the callData of
// an OffchainResolver's lookup.
func lookupCall(t testing.TB, name string, node common.Hash, key string) []byte {
	t.Helper()
	dns, err := DNSEncode(name)
	if err != nil {
		t.Fatal(err)
	}
	data, err := textABI.Pack("text", node, key)
	if err != nil {
		t.Fatal(err)
	}
	call, err := resolveABI.Pack("resolve", dns, data)
	if err != nil {
		t.Fatal(err)
	}
	return call
}

func TestParseTextLookup(t *testing.T) {
	good := lookupCall(t, "scout.l2.hermes.eth", NameHash("scout.l2.hermes.eth"), "agent-snapshot")
	for _, tc := range []struct {
		name string
		call []byte
		want string // "" = refused
	}{
		{"text of the name asked", good, "scout.l2.hermes.eth"},
		{"text of another node", lookupCall(t, "scout.l2.hermes.eth", NameHash("other.l2.hermes.eth"), "agent-snapshot"), ""},
		{"not resolve()", append([]byte{1, 2, 3, 4}, good[4:]...), ""},
		{"truncated", good[:len(good)-40], ""},
		{"empty", nil, ""},
		{"too large", append(bytes.Clone(good), make([]byte, maxLookupCall)...), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, data, err := DecodeResolveCall(tc.call)
			var q TextLookup
			if err == nil {
				q, err = ParseTextLookup(name, data)
			}
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("accepted: %+v", q)
			case tc.want != "" && (err != nil || q.Name != tc.want || q.Key != "agent-snapshot"):
				t.Fatalf("got %+v, %v", q, err)
			}
		})
	}
	for _, b := range [][]byte{{}, {3, 'a', 'b'}, {1, 'a', 0, 0}, {3, 'a', '.', 'b', 0}, {5, 'a', 0}} {
		if n, err := DNSDecode(b); err == nil {
			t.Errorf("DNSDecode(%x) = %q, want an error", b, n)
		}
	}
}

// FuzzGatewayRequest: a lookup's callData is whatever a client sends the
// gateway. Decoding never panics, and what it accepts is a text record
// question about the very name it names.
func FuzzGatewayRequest(f *testing.F) {
	f.Add(lookupCall(f, "scout.l2.hermes.eth", NameHash("scout.l2.hermes.eth"), "agent-snapshot"))
	f.Add(lookupCall(f, "", NameHash(""), ""))
	f.Add(lookupCall(f, "a.b", NameHash("x.b"), "k"))
	f.Fuzz(func(t *testing.T, call []byte) {
		name, data, err := DecodeResolveCall(call)
		if err != nil {
			return
		}
		q, err := ParseTextLookup(name, data)
		if err != nil {
			return
		}
		if NameHash(q.Name) != q.Node {
			t.Fatalf("accepted a question about node %s for %q", q.Node, q.Name)
		}
		if enc, err := DNSEncode(q.Name); err != nil || !bytes.Equal(enc, name) {
			t.Fatalf("%q does not encode back to %x (%v)", q.Name, name, err)
		}
	})
}

// The devnet's L2 → L1 gateway answers from the L2 resolver, at the head
// or lagging by a number of blocks, and says 502 when the L2 is down.
func TestChainRecords(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const name = "scout.l2.hermes.eth"
	l2, err := Start(ctx, Config{ChainID: 1338, Names: []Name{{Name: name, Owner: crypto.PubkeyToAddress(DevKey().PublicKey)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	for _, v := range []string{"one", "two"} {
		if err := l2.SetText(ctx, nil, l2.ResolverAddress(), name, "agent-snapshot", v); err != nil {
			t.Fatal(err)
		}
	}
	recs := &ChainRecords{Chain: l2.Client(), Resolver: l2.ResolverAddress()}
	dns, _ := DNSEncode(name)
	data, _ := textABI.Pack("text", NameHash(name), "agent-snapshot")
	answer := func() string {
		t.Helper()
		out, err := recs.Answer(ctx, dns, data)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := textABI.Methods["text"].Outputs.Unpack(out)
		if err != nil {
			t.Fatal(err)
		}
		return vals[0].(string)
	}
	for lag, want := range map[uint64]string{0: "two", 1: "one", 1 << 40: ""} {
		recs.SetLag(lag)
		if got := answer(); got != want {
			t.Errorf("lag %d: %q, want %q", lag, got, want)
		}
	}

	recs.SetLag(0)
	gw := httptest.NewServer(&Gateway{Key: DeriveKey("gateway"), Answer: recs.Answer})
	defer gw.Close()
	post := func() int {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"sender": common.Address{1}.Hex(), "data": hexutil.Encode(lookupCall(t, name, NameHash(name), "agent-snapshot"))})
		resp, err := http.Post(gw.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(); code != http.StatusOK {
		t.Fatalf("a lookup: %d", code)
	}
	l2.Close()
	if code := post(); code != http.StatusBadGateway {
		t.Fatalf("with the L2 down: %d, want 502", code)
	}
	if _, err := recs.Answer(context.Background(), dns, data); !errors.Is(err, ErrUpstream) || strings.Contains(err.Error(), "panic") {
		t.Fatalf("Answer with the L2 down: %v", err)
	}
}
