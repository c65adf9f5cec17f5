package receipts

import (
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// testKey derives a fixed secp256k1 key for label.
func testKey(label string) *ecdsa.PrivateKey {
	k, err := crypto.ToECDSA(crypto.Keccak256([]byte("hermesd/receipts-test/" + label)))
	if err != nil {
		panic(err)
	}
	return k
}

func addrOf(k *ecdsa.PrivateKey) common.Address { return crypto.PubkeyToAddress(k.PublicKey) }

func hash32(b byte) string { return "0x" + strings.Repeat(fmt.Sprintf("%02x", b), 32) }

// runtimeParams are the varying parts of a reference-runtime v2 receipt.
type runtimeParams struct {
	TokenID    int
	Subscriber string
	CallID     string
	Seq        int // varies the content
	TS         int64
	Key        *ecdsa.PrivateKey // nil: signature "0x"
	Signature  string            // used verbatim when set (and Key is nil)
}

// runtimeReceipt builds a receipt shaped like the reference runtime's
// stratum/receipt/v2: all 16 fields in construction order, a TEE
// attestation object, skills arrays and a transcript of every step kind.
func runtimeReceipt(p runtimeParams) []byte {
	if p.Subscriber == "" {
		p.Subscriber = "0x9F2dC1b0E5bA3c47d1F08e6A2B4c5D7e8F901234"
	}
	before := fakeHash(p.Seq, 1)
	after := fakeHash(p.Seq, 2)
	delta := StateDelta(before, after)
	input := fakeHash(p.Seq, 3)
	output := fakeHash(p.Seq, 4)
	quote := base64.StdEncoding.EncodeToString([]byte("stratum-testnet-no-tee-quote:runtime=hermes:tokenId=" +
		strconv.Itoa(p.TokenID) + ":bundle=" + after + ":backend=openai-compat:ts=" + strconv.FormatInt(p.TS*1000+417, 10)))
	sig := p.Signature
	if p.Key != nil {
		var err error
		sig, err = Sign(DigestFields{CallID: p.CallID, TokenID: strconv.Itoa(p.TokenID), Subscriber: p.Subscriber,
			OutputHash: output, StateDeltaHash: delta, TS: p.TS}, p.Key)
		if err != nil {
			panic(err)
		}
	} else if sig == "" {
		sig = "0x"
	}
	argsHash := fakeHash(p.Seq, 5)
	// Plain appends rather than fmt: the 100k tests build many of these.
	// Every value spliced in is ASCII without quotes or backslashes.
	q := func(b []byte, s string) []byte { return append(append(append(b, '"'), s...), '"') }
	n := func(b []byte, v int64) []byte { return strconv.AppendInt(b, v, 10) }
	b := make([]byte, 0, 2400)
	b = append(b, `{"schemaVersion":"stratum/receipt/v2","tokenId":`...)
	b = n(b, int64(p.TokenID))
	b = q(append(b, `,"subscriber":`...), p.Subscriber)
	b = q(append(b, `,"callId":`...), p.CallID)
	b = q(append(b, `,"input":`...), input)
	b = q(append(b, `,"outputHash":`...), output)
	b = append(b, `,"model":"NousResearch/Hermes-3-Llama-3.1-8B","teeAttestation":{"vendor":"intel-tdx","quote":`...)
	b = q(b, quote)
	b = append(b, `,"measurement":"0x8d0bfe62a6c2b1b3d41e5f0a9c7e3d2b1a0f9e8d7c6b5a4938271605f4eeba2"},"paymentProof":"x402-rcpt-`...)
	b = n(b, int64(p.Seq))
	b = append(b, `","agentRuntime":"hermes","computeBackend":"openai-compat","bundleHashBefore":`...)
	b = q(b, before)
	b = q(append(b, `,"bundleHashAfter":`...), after)
	b = q(append(b, `,"stateDeltaHash":`...), delta)
	b = append(b, `,"skillsLoaded":["reentrancy","erc4626"],"skillsCreated":["vault-share-inflation"],`...)
	b = append(b, `"transcript":[{"kind":"llm","model":"NousResearch/Hermes-3-Llama-3.1-8B","promptTokens":812,"completionTokens":143,"ts":`...)
	b = n(b, p.TS-9)
	b = q(append(b, `},{"kind":"tool","tool":"read_file","argsHash":`...), argsHash)
	b = append(b, `,"resultSummary":"read 2.1 KiB of \"contracts/Vault.sol\"\nfirst line: // SPDX","ts":`...)
	b = n(b, p.TS-8)
	b = append(b, `},{"kind":"skill_load","skill":"reentrancy","ts":`...)
	b = n(b, p.TS-7)
	b = append(b, `},{"kind":"memory_read","query":"prior audits of Vault","resultCount":2,"ts":`...)
	b = n(b, p.TS-6)
	b = append(b, `},{"kind":"memory_write","key":"audit/vault/`...)
	b = n(b, int64(p.Seq))
	b = append(b, `","ts":`...)
	b = n(b, p.TS-5)
	b = append(b, `},{"kind":"skill_create","skill":"vault-share-inflation","ts":`...)
	b = n(b, p.TS-4)
	b = append(b, `},{"kind":"llm","model":"NousResearch/Hermes-3-Llama-3.1-8B","ts":`...)
	b = n(b, p.TS-3)
	b = append(b, `}],"ts":`...)
	b = n(b, p.TS)
	b = q(append(b, `,"signature":`...), sig)
	return append(b, '}')
}

// fakeHash is a hash-shaped value (0x + 64 hex) derived cheaply from seq
// and kind with splitmix64; the big tests build hundreds of thousands.
func fakeHash(seq, kind int) string {
	x := uint64(seq)<<8 | uint64(kind)
	var b [32]byte
	for i := 0; i < 4; i++ {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		binary.BigEndian.PutUint64(b[i*8:], z^z>>31)
	}
	return "0x" + hex.EncodeToString(b[:])
}

func mustParse(t testing.TB, b []byte) Receipt {
	t.Helper()
	r, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(%s): %v", b, err)
	}
	return r
}

// snapshotInfo returns a valid transition for tests.
func snapshotInfo(seq int) SnapshotInfo {
	before := crypto.Keccak256Hash([]byte("snap-before" + strconv.Itoa(seq))).Hex()
	after := crypto.Keccak256Hash([]byte("snap-after" + strconv.Itoa(seq))).Hex()
	return SnapshotInfo{
		AgentID: "auditor", TokenID: "3",
		BundleHashBefore: before, BundleHashAfter: after,
		ParentBlobID: "M4hsZGQ1oCktdzegB6HnI1Mhq6J3_tmcT4cdrX2_Ad8",
		TS:           1700000100 + int64(seq),
	}
}

// openTestLog opens a log in a fresh temp dir.
func openTestLog(t testing.TB, opts Options) *Log {
	t.Helper()
	l, err := OpenLog(t.TempDir()+"/agents/a/receipts.log", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// signedReceipt is a small receipt with a tokenId, signed by key; extra is
// spliced in before the signature (",\"k\":v" or "").
func signedReceipt(t testing.TB, key *ecdsa.PrivateKey, callID string, ts int64, extra string) Receipt {
	t.Helper()
	sub := strings.ToLower(addrOf(key).Hex())
	out, delta := hash32(0xbb), hash32(0x33)
	sig, err := Sign(DigestFields{CallID: callID, TokenID: "7", Subscriber: sub, OutputHash: out, StateDeltaHash: delta, TS: ts}, key)
	if err != nil {
		t.Fatal(err)
	}
	return mustParse(t, fmt.Appendf(nil, `{"tokenId":7,"subscriber":%q,"callId":%q,"outputHash":%q,"stateDeltaHash":%q,"ts":%d%s,"signature":%q}`,
		sub, callID, out, delta, ts, extra, sig))
}

// parallelReceipts builds out[i] = mk(i) on every CPU: signing dominates
// building big fixtures.
func parallelReceipts(out [][]byte, mk func(i int) []byte) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(out) {
					return
				}
				out[i] = mk(i)
			}
		})
	}
	wg.Wait()
}
