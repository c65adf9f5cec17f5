package devchain

import (
	"context"
	"crypto/ecdsa"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
)

// Gateway is an EIP-3668 gateway for ENS's OffchainResolver, for tests and
// the devnet: it takes the resolver's lookup (callData
// resolve(bytes name, bytes data)) by GET /{sender}/{data}.json or by POST
// of {"data", "sender"}, gets the record from Answer, and returns it
// signed the way the resolver's resolveWithProof verifies:
// abi.encode(bytes result, uint64 expires, bytes sig), sig over
// keccak256(0x1900 ‖ sender ‖ expires ‖ keccak256(callData) ‖
// keccak256(result)), v ∈ {27, 28}.
type Gateway struct {
	// Key signs the answers; the resolver must list its address.
	Key *ecdsa.PrivateKey
	// Answer returns the ABI-encoded result of the record function data
	// (e.g. text(node, key)) for the DNS-encoded name. An error is a 404
	// with its text.
	Answer func(ctx context.Context, name, data []byte) ([]byte, error)
	// TTL is how long a signed answer is valid (default 5 minutes).
	TTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// maxGatewayRequest bounds a request body; a resolve() call for one record
// is far smaller.
const maxGatewayRequest = 64 << 10

// resolveABI is IResolverService.resolve, the call the OffchainResolver
// sends its gateway; its selector equals the extended resolver's
// (0x9061b923).
var resolveABI = mustParseABI(`[{"type":"function","name":"resolve","stateMutability":"view",
	"inputs":[{"name":"name","type":"bytes"},{"name":"data","type":"bytes"}],
	"outputs":[{"name":"result","type":"bytes"},{"name":"expires","type":"uint64"},{"name":"sig","type":"bytes"}]}]`)

// ServeHTTP answers one lookup.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var sender, data string
	switch r.Method {
	case http.MethodGet:
		// The template is {sender}/{data}.json under any prefix.
		parts := strings.Split(strings.TrimSuffix(r.URL.Path, ".json"), "/")
		if len(parts) < 2 {
			gatewayError(w, http.StatusBadRequest, "want GET .../{sender}/{data}.json")
			return
		}
		sender, data = parts[len(parts)-2], parts[len(parts)-1]
	case http.MethodPost:
		var body struct {
			Data   string `json:"data"`
			Sender string `json:"sender"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, maxGatewayRequest)).Decode(&body); err != nil {
			gatewayError(w, http.StatusBadRequest, "body is not {\"data\", \"sender\"}")
			return
		}
		sender, data = body.Sender, body.Data
	default:
		gatewayError(w, http.StatusMethodNotAllowed, "GET or POST")
		return
	}
	if !common.IsHexAddress(sender) {
		gatewayError(w, http.StatusBadRequest, "sender is not an address")
		return
	}
	callData, err := hexutil.Decode(data)
	if err != nil || len(callData) < 4 {
		gatewayError(w, http.StatusBadRequest, "data is not 0x-prefixed hex of a call")
		return
	}
	resp, status, err := g.respond(r.Context(), common.HexToAddress(sender), callData)
	if err != nil {
		gatewayError(w, status, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"data": hexutil.Encode(resp)})
}

// respond decodes, answers and signs one lookup.
func (g *Gateway) respond(ctx context.Context, sender common.Address, callData []byte) ([]byte, int, error) {
	name, data, err := DecodeResolveCall(callData)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	m := resolveABI.Methods["resolve"]
	result, err := g.Answer(ctx, name, data)
	switch {
	case errors.Is(err, ErrUpstream):
		return nil, http.StatusBadGateway, err
	case err != nil:
		return nil, http.StatusNotFound, err
	}
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	ttl := g.TTL
	if ttl <= 0 {
		ttl = 5 * time.Minute
	}
	expires := uint64(now().Add(ttl).Unix())
	sig, err := crypto.Sign(SignatureHash(sender, expires, callData, result).Bytes(), g.Key)
	if err != nil {
		return nil, http.StatusInternalServerError, fmt.Errorf("sign: %w", err)
	}
	sig[64] += 27
	out, err := m.Outputs.Pack(result, expires, sig)
	if err != nil {
		return nil, http.StatusInternalServerError, fmt.Errorf("encode: %w", err)
	}
	return out, http.StatusOK, nil
}

// SignatureHash is what the OffchainResolver's signer signs (its
// makeSignatureHash): keccak256(0x1900 ‖ target ‖ uint64 expires ‖
// keccak256(request) ‖ keccak256(result)).
func SignatureHash(target common.Address, expires uint64, request, result []byte) common.Hash {
	var exp [8]byte
	binary.BigEndian.PutUint64(exp[:], expires)
	return crypto.Keccak256Hash([]byte{0x19, 0x00}, target.Bytes(), exp[:], crypto.Keccak256(request), crypto.Keccak256(result))
}

func gatewayError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

// TextRecords is a Gateway's Answer for text records kept in memory.
type TextRecords struct {
	mu sync.Mutex
	m  map[common.Hash]map[string]string
}

// textABI is text(bytes32,string) → string.
var textABI = mustParseABI(`[{"type":"function","name":"text","stateMutability":"view",
	"inputs":[{"name":"node","type":"bytes32"},{"name":"key","type":"string"}],"outputs":[{"name":"","type":"string"}]}]`)

// Set sets name's (already normalised) record key to value.
func (t *TextRecords) Set(name, key, value string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[common.Hash]map[string]string)
	}
	node := NameHash(name)
	if t.m[node] == nil {
		t.m[node] = make(map[string]string)
	}
	t.m[node][key] = value
}

// Answer answers text(node, key) with the record ("" when unset); other
// record functions are an error.
func (t *TextRecords) Answer(_ context.Context, _, data []byte) ([]byte, error) {
	node, key, err := DecodeTextCall(data)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	v := t.m[node][key]
	t.mu.Unlock()
	return textABI.Methods["text"].Outputs.Pack(v)
}

// DecodeTextCall decodes a text(bytes32 node, string key) call.
func DecodeTextCall(data []byte) (node common.Hash, key string, err error) {
	m := textABI.Methods["text"]
	if len(data) < 4 || string(data[:4]) != string(m.ID) {
		return node, "", errors.New("not a text(bytes32,string) call")
	}
	args, err := unpack(m.Inputs, data[4:])
	if err != nil || len(args) != 2 {
		return node, "", errors.New("undecodable text(bytes32,string) call")
	}
	n, ok1 := args[0].([32]byte)
	k, ok2 := args[1].(string)
	if !ok1 || !ok2 {
		return node, "", errors.New("undecodable text(bytes32,string) call")
	}
	return common.Hash(n), k, nil
}
