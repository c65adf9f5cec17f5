package receipts

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

func TestSnapshotReceipt(t *testing.T) {
	key := testKey("operator")
	info := snapshotInfo(1)
	r, err := NewSnapshotReceipt(info, key)
	if err != nil {
		t.Fatal(err)
	}
	sub := strings.ToLower(addrOf(key).Hex())
	delta := StateDelta(info.BundleHashBefore, info.BundleHashAfter)
	out := SnapshotOutputHash(info.AgentID, info.BundleHashBefore, info.BundleHashAfter, info.ParentBlobID)
	want := `{"schemaVersion":"hermesd/snapshot/v1","tokenId":3,"subscriber":"` + sub + `","callId":"` + r.CallID +
		`","agentId":"auditor","bundleHashBefore":"` + info.BundleHashBefore + `","bundleHashAfter":"` + info.BundleHashAfter +
		`","stateDeltaHash":"` + delta + `","parentBlobId":"` + info.ParentBlobID + `","outputHash":"` + out +
		`","ts":1700000101,"signature":"` + r.Signature + `"}`
	if r.String() != want {
		t.Fatalf("receipt\n got %s\nwant %s", r, want)
	}
	if !regexp.MustCompile(`^hermesd-[0-9a-f]{32}$`).MatchString(r.CallID) {
		t.Fatalf("callId %q", r.CallID)
	}
	if r.CallID != SnapshotCallID("auditor", "3", delta, info.ParentBlobID, info.TS) {
		t.Fatal("callId is not SnapshotCallID")
	}
	// The signature is the runtime's rule over the six digest fields.
	signer, err := RecoverSigner(DigestFields{CallID: r.CallID, TokenID: "3", Subscriber: sub, OutputHash: out, StateDeltaHash: delta, TS: info.TS}, r.Signature)
	if err != nil || signer != addrOf(key) {
		t.Fatalf("runtime rule: %s %v", signer.Hex(), err)
	}
	// outputHash definition, spelled out.
	lp := func(s string) []byte {
		return append([]byte{byte(len(s) >> 24), byte(len(s) >> 16), byte(len(s) >> 8), byte(len(s))}, s...)
	}
	var pre []byte
	for _, s := range []string{"hermesd/snapshot/v1", "auditor", info.BundleHashBefore, info.BundleHashAfter, info.ParentBlobID} {
		pre = append(pre, lp(s)...)
	}
	if crypto.Keccak256Hash(pre).Hex() != out {
		t.Fatal("outputHash does not follow the documented encoding")
	}
	res, err := Verify(&r, []common.Address{addrOf(key)})
	if err != nil || res.Status != StatusTrusted {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
	// Deterministic: the same transition gives the same receipt.
	r2, _ := NewSnapshotReceipt(info, key)
	if r2.String() != r.String() {
		t.Fatal("not deterministic")
	}
	// A different transition gets a different callId.
	info.ParentBlobID = "other"
	r3, _ := NewSnapshotReceipt(info, key)
	if r3.CallID == r.CallID {
		t.Fatal("callId did not change with the parent blob")
	}
}

func TestSnapshotReceiptWithoutToken(t *testing.T) {
	key := testKey("operator")
	info := snapshotInfo(2)
	info.TokenID = ""
	if _, err := NewSnapshotReceipt(info, key); !errors.Is(err, ErrNoTokenID) || !strings.Contains(err.Error(), "token id") {
		t.Fatalf("err = %v", err)
	}
	// An older receipt without tokenId (as hermesd once wrote them) still
	// verifies: its digest uses "".
	info.TokenID = "3"
	r, _ := NewSnapshotReceipt(info, key)
	b := bytes.Replace(r.Bytes(), []byte(`"tokenId":3,`), nil, 1)
	old := mustParse(t, b)
	m := map[string]any{}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	d.Decode(&m)
	sig := resignMap(t, m, key)
	old = mustParse(t, bytes.Replace(b, []byte(old.Signature), []byte(sig), 1))
	if res, err := Verify(&old, []common.Address{addrOf(key)}); err != nil || old.TokenID != "" {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
}

func TestSnapshotReceiptEscaping(t *testing.T) {
	key := testKey("operator")
	info := snapshotInfo(2)
	info.ParentBlobID = "" // first snapshot
	info.AgentID = `we<ird> "agent"` + "\n"
	r, err := NewSnapshotReceipt(info, key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(r.Bytes(), []byte(`"agentId":"we<ird> \"agent\"\n"`)) || !bytes.Contains(r.Bytes(), []byte(`"parentBlobId":""`)) {
		t.Fatalf("encoding: %s", r)
	}
	if r.AgentID != info.AgentID {
		t.Fatalf("agentId round trip %q", r.AgentID)
	}
	if res, err := Verify(&r, []common.Address{addrOf(key)}); err != nil {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
}

func TestSnapshotReceiptInputErrors(t *testing.T) {
	key := testKey("operator")
	for name, mod := range map[string]func(*SnapshotInfo){
		"no agent":        func(i *SnapshotInfo) { i.AgentID = "" },
		"bad before":      func(i *SnapshotInfo) { i.BundleHashBefore = "0xdeadbeef" },
		"bad after":       func(i *SnapshotInfo) { i.BundleHashAfter = "" },
		"wrong delta":     func(i *SnapshotInfo) { i.StateDeltaHash = hash32(1) },
		"token not int":   func(i *SnapshotInfo) { i.TokenID = "3.0" },
		"token leading 0": func(i *SnapshotInfo) { i.TokenID = "03" },
		"token negative":  func(i *SnapshotInfo) { i.TokenID = "-3" },
		"no token":        func(i *SnapshotInfo) { i.TokenID = "" },
		"no ts":           func(i *SnapshotInfo) { i.TS = 0 },
		"bad utf-8":       func(i *SnapshotInfo) { i.ParentBlobID = "\xff" },
	} {
		t.Run(name, func(t *testing.T) {
			info := snapshotInfo(1)
			mod(&info)
			if _, err := NewSnapshotReceipt(info, key); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	info := snapshotInfo(1)
	info.StateDeltaHash = StateDelta(info.BundleHashBefore, info.BundleHashAfter)
	info.BundleHashAfter = strings.ToUpper(info.BundleHashAfter[2:])
	info.BundleHashAfter = "0x" + info.BundleHashAfter
	r, err := NewSnapshotReceipt(info, key)
	if err != nil || r.BundleHashAfter != strings.ToLower(info.BundleHashAfter) {
		t.Fatalf("uppercase hash not normalized: %v %s", err, r.BundleHashAfter)
	}
	if _, err := NewSnapshotReceipt(info, nil); err == nil {
		t.Fatal("nil key accepted")
	}
}

// Every field of a hermesd receipt is bound: altering any one, even with a
// fresh valid signature over the runtime's six fields, fails Verify.
func TestSnapshotReceiptTamper(t *testing.T) {
	key := testKey("operator")
	trusted := []common.Address{addrOf(key)}
	r, err := NewSnapshotReceipt(snapshotInfo(3), key)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	d := json.NewDecoder(bytes.NewReader(r.Bytes()))
	d.UseNumber()
	if err := d.Decode(&obj); err != nil {
		t.Fatal(err)
	}
	// Control: the harness itself (re-encoding via a map) keeps it valid.
	if b, _ := json.Marshal(obj); true {
		tr := mustParse(t, b)
		if _, err := Verify(&tr, trusted); err != nil {
			t.Fatalf("re-encoded unaltered receipt: %v", err)
		}
		obj2 := map[string]any{}
		for k, v := range obj {
			obj2[k] = v
		}
		obj2["signature"] = resignMap(t, obj2, key)
		b, _ = json.Marshal(obj2)
		tr = mustParse(t, b)
		if _, err := Verify(&tr, trusted); err != nil {
			t.Fatalf("re-signed unaltered receipt: %v", err)
		}
	}
	other := testKey("other")
	alter := map[string]any{
		"schemaVersion":    "hermesd/snapshot/v2",
		"tokenId":          json.Number("4"),
		"subscriber":       strings.ToLower(addrOf(other).Hex()),
		"callId":           "hermesd-00000000000000000000000000000000",
		"agentId":          "auditor2",
		"bundleHashBefore": hash32(0xaa),
		"bundleHashAfter":  hash32(0xcc),
		"stateDeltaHash":   hash32(0x33),
		"parentBlobId":     "someone-elses-blob",
		"outputHash":       hash32(0xbb),
		"ts":               json.Number("1700000104"),
	}
	// callId, tokenId and ts are only in the digest: re-signing them with
	// the operator's own key makes a genuinely new receipt, so they are
	// altered without re-signing only.
	signedOnly := map[string]bool{"callId": true, "tokenId": true, "ts": true}
	for field, v := range alter {
		for _, resign := range []bool{false, true} {
			if resign && signedOnly[field] {
				continue
			}
			name := field
			if resign {
				name += "/re-signed"
			}
			t.Run(name, func(t *testing.T) {
				m := map[string]any{}
				for k, v := range obj {
					m[k] = v
				}
				m[field] = v
				if resign {
					// An attacker with their own key re-signs the runtime's
					// six fields; the binding must still catch it.
					k := key
					if field == "subscriber" {
						k = other
					}
					m["signature"] = resignMap(t, m, k)
				}
				b, _ := json.Marshal(m)
				tr := mustParse(t, b)
				res, err := Verify(&tr, trusted)
				if err == nil || res.Status == StatusTrusted {
					t.Fatalf("altered %s verified: %+v", field, res)
				}
			})
		}
	}
	t.Run("removed tokenId", func(t *testing.T) {
		b := bytes.Replace(r.Bytes(), []byte(`"tokenId":3,`), nil, 1)
		tr := mustParse(t, b)
		if _, err := Verify(&tr, trusted); err == nil {
			t.Fatal("verified")
		}
	})
	t.Run("extra field", func(t *testing.T) {
		b := bytes.Replace(r.Bytes(), []byte(`{`), []byte(`{"note":"x",`), 1)
		tr := mustParse(t, b)
		if _, err := Verify(&tr, trusted); !errors.Is(err, ErrBinding) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("missing parentBlobId", func(t *testing.T) {
		m := map[string]any{}
		for k, v := range obj {
			m[k] = v
		}
		delete(m, "parentBlobId")
		b, _ := json.Marshal(m)
		tr := mustParse(t, b)
		if _, err := Verify(&tr, trusted); !errors.Is(err, ErrBinding) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("signer is not subscriber", func(t *testing.T) {
		m := map[string]any{}
		for k, v := range obj {
			m[k] = v
		}
		m["signature"] = resignMap(t, m, other)
		b, _ := json.Marshal(m)
		tr := mustParse(t, b)
		res, err := Verify(&tr, []common.Address{addrOf(key), addrOf(other)})
		if !errors.Is(err, ErrBadSignature) || res.Status != StatusBadSignature {
			t.Fatalf("res = %+v, err = %v", res, err)
		}
	})
}

func resignMap(t *testing.T, m map[string]any, k *ecdsa.PrivateKey) string {
	t.Helper()
	str := func(key string) string { s, _ := m[key].(string); return s }
	tok := ""
	if n, ok := m["tokenId"].(json.Number); ok {
		tok = n.String()
	}
	ts, _ := m["ts"].(json.Number).Int64()
	sig, err := Sign(DigestFields{CallID: str("callId"), TokenID: tok, Subscriber: str("subscriber"),
		OutputHash: str("outputHash"), StateDeltaHash: str("stateDeltaHash"), TS: ts}, k)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}
