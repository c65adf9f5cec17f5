package receipts

import (
	"crypto/ecdsa"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// ErrNoTokenID is returned by NewSnapshotReceipt for an agent without a
// token id: the reference runtime's importer throws on a receipt without
// tokenId, so such a receipt could not travel in receipts.ndjson.
var ErrNoTokenID = errors.New("receipts: snapshot receipt: the agent has no token id (the reference runtime cannot import receipts without one)")

// SnapshotInfo describes one brain transition that hermesd snapshotted.
type SnapshotInfo struct {
	AgentID string
	// TokenID is the agent's iNFT token id in decimal. It is required:
	// the reference runtime's importer rejects a receipt without one.
	TokenID          string
	BundleHashBefore string // 0x + 64 hex; the previous snapshot's bundle hash
	BundleHashAfter  string // 0x + 64 hex; this snapshot's bundle hash
	// StateDeltaHash must be keccak256(before ‖ after); "" computes it.
	StateDeltaHash string
	// ParentBlobID is the previous snapshot's Walrus blob id; "" for the
	// first snapshot.
	ParentBlobID string
	TS           int64 // unix seconds, > 0
}

// NewSnapshotReceipt builds and signs hermesd's transition receipt for info
// (schemaVersion hermesd/snapshot/v1; field table in the package doc). The
// subscriber is key's address, outputHash binds the hermesd-only fields, and
// callId is derived from the transition, so the same transition always
// yields the same receipt (and a retried snapshot dedups in the log).
func NewSnapshotReceipt(info SnapshotInfo, key *ecdsa.PrivateKey) (Receipt, error) {
	if key == nil {
		return Receipt{}, errors.New("receipts: snapshot receipt: no signing key")
	}
	if info.AgentID == "" || !utf8.ValidString(info.AgentID) {
		return Receipt{}, errors.New("receipts: snapshot receipt: agent id empty or not UTF-8")
	}
	if !utf8.ValidString(info.ParentBlobID) {
		return Receipt{}, errors.New("receipts: snapshot receipt: parent blob id not UTF-8")
	}
	if info.TokenID == "" {
		return Receipt{}, ErrNoTokenID
	}
	if !validTokenID(info.TokenID) {
		return Receipt{}, fmt.Errorf("receipts: snapshot receipt: token id %q is not a decimal integer", info.TokenID)
	}
	if info.TS <= 0 {
		return Receipt{}, errors.New("receipts: snapshot receipt: ts must be positive unix seconds")
	}
	before, err := canonicalHash("bundleHashBefore", info.BundleHashBefore)
	if err != nil {
		return Receipt{}, err
	}
	after, err := canonicalHash("bundleHashAfter", info.BundleHashAfter)
	if err != nil {
		return Receipt{}, err
	}
	delta := StateDelta(before, after)
	if info.StateDeltaHash != "" && !strings.EqualFold(info.StateDeltaHash, delta) {
		return Receipt{}, fmt.Errorf("receipts: snapshot receipt: stateDeltaHash %s is not keccak256(before‖after) = %s", info.StateDeltaHash, delta)
	}
	subscriber := strings.ToLower(crypto.PubkeyToAddress(key.PublicKey).Hex())
	callID := SnapshotCallID(info.AgentID, info.TokenID, delta, info.ParentBlobID, info.TS)
	output := SnapshotOutputHash(info.AgentID, before, after, info.ParentBlobID)
	sig, err := Sign(DigestFields{
		CallID: callID, TokenID: info.TokenID, Subscriber: subscriber,
		OutputHash: output, StateDeltaHash: delta, TS: info.TS,
	}, key)
	if err != nil {
		return Receipt{}, err
	}

	b := make([]byte, 0, 640+len(info.AgentID)+len(info.ParentBlobID))
	b = append(b, `{"schemaVersion":`...)
	b = appendJSONString(b, SchemaSnapshotV1)
	b = append(b, `,"tokenId":`...)
	b = append(b, info.TokenID...)
	b = appendField(b, "subscriber", subscriber)
	b = appendField(b, "callId", callID)
	b = appendField(b, "agentId", info.AgentID)
	b = appendField(b, "bundleHashBefore", before)
	b = appendField(b, "bundleHashAfter", after)
	b = appendField(b, "stateDeltaHash", delta)
	b = appendField(b, "parentBlobId", info.ParentBlobID)
	b = appendField(b, "outputHash", output)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, info.TS, 10)
	b = appendField(b, "signature", sig)
	b = append(b, '}')
	r, err := Parse(b)
	if err != nil {
		return Receipt{}, fmt.Errorf("receipts: snapshot receipt: %w", err) // a bug here, not bad input
	}
	return r, nil
}

// StateDelta is keccak256(before[32] ‖ after[32]) as 0x lowercase hex; both
// arguments must be 0x + 64 hex digits (else the result is "").
func StateDelta(before, after string) string {
	b, err1 := hex.DecodeString(strings.TrimPrefix(before, "0x"))
	a, err2 := hex.DecodeString(strings.TrimPrefix(after, "0x"))
	if err1 != nil || err2 != nil || len(b) != 32 || len(a) != 32 {
		return ""
	}
	return crypto.Keccak256Hash(b, a).Hex()
}

// SnapshotOutputHash is the outputHash of a hermesd/snapshot/v1 receipt:
//
//	keccak256( lp("hermesd/snapshot/v1") ‖ lp(agentId) ‖ lp(bundleHashBefore)
//	           ‖ lp(bundleHashAfter) ‖ lp(parentBlobId) )
//
// where lp(s) is the 4-byte big-endian byte length of s followed by its UTF-8
// bytes, and each value is the string exactly as written in the receipt.
func SnapshotOutputHash(agentID, before, after, parentBlobID string) string {
	return crypto.Keccak256Hash(lengthPrefixed(SchemaSnapshotV1, agentID, before, after, parentBlobID)).Hex()
}

// SnapshotCallID derives a hermesd receipt's callId: "hermesd-" followed by
// the first 16 bytes, in hex, of
//
//	keccak256( lp("hermesd/snapshot/v1/callId") ‖ lp(agentId) ‖ lp(tokenId)
//	           ‖ lp(stateDeltaHash) ‖ lp(parentBlobId) ‖ lp(decimal ts) )
//
// Distinct transitions differ in at least one input (a return to an earlier
// state has a different parent blob), so ids are unique per agent, and a
// retried snapshot of the same transition gets the same id.
func SnapshotCallID(agentID, tokenID, stateDeltaHash, parentBlobID string, ts int64) string {
	h := crypto.Keccak256(lengthPrefixed(SchemaSnapshotV1+"/callId", agentID, tokenID,
		stateDeltaHash, parentBlobID, strconv.FormatInt(ts, 10)))
	return "hermesd-" + hex.EncodeToString(h[:16])
}

func lengthPrefixed(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += 4 + len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

// canonicalHash checks a 0x + 64 hex hash and returns it lowercased.
func canonicalHash(name, s string) (string, error) {
	if !isHash(s) {
		return "", fmt.Errorf("receipts: snapshot receipt: %s %q is not 0x + 64 hex digits", name, s)
	}
	return strings.ToLower(s), nil
}

// validTokenID accepts a canonical non-negative decimal integer.
func validTokenID(s string) bool {
	if s == "" || len(s) > maxTokenIDDigits || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isHash(s string) bool {
	if len(s) != 66 || s[:2] != "0x" {
		return false
	}
	_, err := hex.DecodeString(s[2:])
	return err == nil
}

func isLowerHash(s string) bool {
	return isHash(s) && strings.ToLower(s) == s
}

// snapshotFields are exactly the top-level keys of a v1 hermesd receipt;
// tokenId is optional.
const snapshotFields = fSchema | fCallID | fSubscriber | fOutputHash | fBefore | fAfter | fDelta | fTS | fSignature | fAgentID | fParent

// checkSnapshotBinding verifies what a hermesd receipt's signature covers
// only indirectly: the field set, stateDeltaHash = keccak256(before‖after),
// outputHash over the hermesd-only fields, and that the signer is the
// subscriber. Hashes must be lowercase as NewSnapshotReceipt writes them, so
// each receipt has one valid encoding.
func checkSnapshotBinding(r *Receipt, signer common.Address) error {
	if r.SchemaVersion != SchemaSnapshotV1 {
		return fmt.Errorf("%w: unsupported schemaVersion %q", ErrBinding, r.SchemaVersion)
	}
	if r.otherKeys > 0 {
		return fmt.Errorf("%w: %d unexpected field(s)", ErrBinding, r.otherKeys)
	}
	if missing := snapshotFields &^ r.has; missing != 0 {
		return fmt.Errorf("%w: required field(s) missing", ErrBinding)
	}
	if r.AgentID == "" {
		return fmt.Errorf("%w: agentId empty", ErrBinding)
	}
	for _, h := range []struct{ name, v string }{
		{"bundleHashBefore", r.BundleHashBefore}, {"bundleHashAfter", r.BundleHashAfter},
		{"stateDeltaHash", r.StateDeltaHash}, {"outputHash", r.OutputHash},
	} {
		if !isLowerHash(h.v) {
			return fmt.Errorf("%w: %s is not 0x + 64 lowercase hex digits", ErrBinding, h.name)
		}
	}
	if StateDelta(r.BundleHashBefore, r.BundleHashAfter) != r.StateDeltaHash {
		return fmt.Errorf("%w: stateDeltaHash is not keccak256(bundleHashBefore‖bundleHashAfter)", ErrBinding)
	}
	if SnapshotOutputHash(r.AgentID, r.BundleHashBefore, r.BundleHashAfter, r.ParentBlobID) != r.OutputHash {
		return fmt.Errorf("%w: outputHash does not match agentId, bundle hashes and parentBlobId", ErrBinding)
	}
	if !common.IsHexAddress(r.Subscriber) || common.HexToAddress(r.Subscriber) != signer {
		return fmt.Errorf("%w: signed by %s, not by the subscriber %s", ErrBadSignature, signer.Hex(), r.Subscriber)
	}
	return nil
}

func appendField(b []byte, name, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendJSONString(b, value)
}

// appendJSONString writes s as a JSON string the way JSON.stringify does:
// only '"', '\\' and control characters are escaped. s must be valid UTF-8.
func appendJSONString(b []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
