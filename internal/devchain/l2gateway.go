package devchain

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync/atomic"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
)

// ErrUpstream is matched by an Answer error that means the records could
// not be read (the chain behind the gateway is down): the Gateway answers
// 502, which an EIP-3668 client takes for "try the next URL", not for a
// refusal.
var ErrUpstream = errors.New("devchain: the gateway's upstream is unavailable")

// maxLookupCall bounds a lookup's callData (resolve(name, text(node,
// key)) for one record is a few hundred bytes).
const maxLookupCall = maxGatewayRequest

// DecodeResolveCall decodes the callData of an OffchainResolver's lookup,
// IResolverService.resolve(bytes name, bytes data). The input is hostile:
// bounded, and a decoder panic is an error.
func DecodeResolveCall(callData []byte) (name, data []byte, err error) {
	m := resolveABI.Methods["resolve"]
	switch {
	case len(callData) > maxLookupCall:
		return nil, nil, fmt.Errorf("a call of %d bytes (at most %d)", len(callData), maxLookupCall)
	case len(callData) < 4 || string(callData[:4]) != string(m.ID):
		return nil, nil, errors.New("not a resolve(bytes,bytes) call")
	}
	args, err := unpack(m.Inputs, callData[4:])
	if err != nil || len(args) != 2 {
		return nil, nil, errors.New("undecodable resolve(bytes,bytes) call")
	}
	name, ok1 := args[0].([]byte)
	data, ok2 := args[1].([]byte)
	if !ok1 || !ok2 {
		return nil, nil, errors.New("undecodable resolve(bytes,bytes) call")
	}
	return name, data, nil
}

// unpack decodes hostile ABI data; a decoder panic is an error.
func unpack(args abi.Arguments, data []byte) (vals []any, err error) {
	defer func() {
		if r := recover(); r != nil {
			vals, err = nil, fmt.Errorf("undecodable ABI data (%v)", r)
		}
	}()
	return args.Unpack(data)
}

// maxDNSLabel is the longest label DNS wire format carries.
const maxDNSLabel = 255

// DNSDecode decodes a DNS wire-format name (RFC 1035 §3.1: length-prefixed
// labels, a zero byte at the end): exactly one name, labels of 1..255
// bytes without a dot, nothing after the end. The root is "".
func DNSDecode(b []byte) (string, error) {
	var labels []string
	for i := 0; ; {
		if i >= len(b) {
			return "", errors.New("DNS name without its terminating zero byte")
		}
		n := int(b[i])
		if n == 0 {
			if i+1 != len(b) {
				return "", fmt.Errorf("%d bytes after the end of the DNS name", len(b)-i-1)
			}
			return strings.Join(labels, "."), nil
		}
		if i+1+n > len(b) {
			return "", errors.New("a DNS label runs past the end")
		}
		label := string(b[i+1 : i+1+n])
		if strings.Contains(label, ".") {
			return "", errors.New("a DNS label holds a dot")
		}
		labels = append(labels, label)
		i += 1 + n
	}
}

// DNSEncode is DNSDecode's inverse for a name of non-empty labels of at
// most 255 bytes.
func DNSEncode(name string) ([]byte, error) {
	if name == "" {
		return []byte{0}, nil
	}
	out := make([]byte, 0, len(name)+2)
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > maxDNSLabel {
			return nil, fmt.Errorf("label %q cannot be DNS-encoded", l)
		}
		out = append(out, byte(len(l)))
		out = append(out, l...)
	}
	return append(out, 0), nil
}

// TextLookup is one text-record question a gateway was asked.
type TextLookup struct {
	Name string // as the client DNS-encoded it
	Node common.Hash
	Key  string
}

// ParseTextLookup checks that a lookup (the DNS-encoded name and the
// record call of resolve(name, data)) asks for a text record of that very
// name: text(namehash(name), key). A question about another node than the
// name it names is refused, as a careful gateway does: it would be signed
// as the answer for the name.
func ParseTextLookup(name, data []byte) (TextLookup, error) {
	n, err := DNSDecode(name)
	if err != nil {
		return TextLookup{}, err
	}
	node, key, err := DecodeTextCall(data)
	if err != nil {
		return TextLookup{}, err
	}
	if want := NameHash(n); node != want {
		return TextLookup{}, fmt.Errorf("text() asks for node %s, not the node of %q", node, n)
	}
	return TextLookup{Name: n, Node: node, Key: key}, nil
}

// RecordsReader is what ChainRecords needs of the chain it reads.
type RecordsReader interface {
	ethereum.ContractCaller
	BlockNumber(ctx context.Context) (uint64, error)
}

// ChainRecords is a Gateway's Answer that reads text records from a
// resolver on another chain — the devnet's L2 — as an L2 → L1 gateway
// does: the L1 OffchainResolver's lookup names the record, ChainRecords
// reads it from Resolver with eth_call at block head − Lag, and the
// Gateway signs it. Lag makes the gateway lag behind the L2 by that many
// blocks (0: the head), for tests of a gateway that is not up to date.
type ChainRecords struct {
	Chain    RecordsReader
	Resolver common.Address
	lag      atomic.Uint64
	down     atomic.Bool
}

// SetLag makes the answers come from block head − n (block 0 at least).
func (r *ChainRecords) SetLag(n uint64) { r.lag.Store(n) }

// SetDown makes every answer fail as if the L2 could not be read (the
// Gateway answers 502), for tests of a gateway that is down.
func (r *ChainRecords) SetDown(down bool) { r.down.Store(down) }

// Lag is the current lag in blocks.
func (r *ChainRecords) Lag() uint64 { return r.lag.Load() }

// Answer answers text(node, key) for name from the L2 resolver.
func (r *ChainRecords) Answer(ctx context.Context, name, data []byte) ([]byte, error) {
	q, err := ParseTextLookup(name, data)
	if err != nil {
		return nil, err
	}
	if r.down.Load() {
		return nil, fmt.Errorf("%w: switched off", ErrUpstream)
	}
	head, err := r.Chain.BlockNumber(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: head of the L2: %v", ErrUpstream, err)
	}
	at := head - min(head, r.lag.Load())
	call, err := textABI.Pack("text", q.Node, q.Key)
	if err != nil {
		return nil, err
	}
	out, err := r.Chain.CallContract(ctx, ethereum.CallMsg{To: &r.Resolver, Data: call}, new(big.Int).SetUint64(at))
	if err != nil {
		return nil, fmt.Errorf("%w: text() of %s at L2 block %d: %v", ErrUpstream, q.Name, at, err)
	}
	vals, err := unpack(textABI.Methods["text"].Outputs, out)
	if err != nil || len(vals) != 1 {
		return nil, fmt.Errorf("%w: the L2 resolver answered text() with %d undecodable bytes", ErrUpstream, len(out))
	}
	v, _ := vals[0].(string)
	return textABI.Methods["text"].Outputs.Pack(v)
}
