package ens

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"
)

// Resolution order (docs/design.md §7): with a Universal Resolver, one
// call to it — resolveWithGateways(dnsName, text(node, key),
// [LocalBatchGateway]), as viem makes it, so that its offchain lookups
// come back to be fetched here rather than by a hosted batch gateway.
// Without one, ENSIP-10 over the registry: the resolver of the name, or of
// its nearest ancestor that has one; on the name's own resolver text(),
// unless it is an extended resolver (ERC-165 0x9061b923), which is asked
// resolve(dnsName, text(node, key)); an ancestor's resolver only through
// resolve(), else the name is not found. Either way an OffchainLookup
// revert is followed per EIP-3668 (ccip.go).

// Path says how a record was read.
type Path uint8

const (
	// PathOnchain: text() on the name's own resolver.
	PathOnchain Path = iota + 1
	// PathExtended: resolve() on the name's own extended resolver.
	PathExtended
	// PathWildcard: resolve() on an ancestor's extended resolver.
	PathWildcard
	// PathUniversal: through the Universal Resolver.
	PathUniversal
	// PathRecords: text() on the contract that holds the record (a
	// records client, Config.Records), not through name resolution.
	PathRecords
)

var pathNames = [...]string{"", "onchain", "extended", "wildcard", "universal-resolver", "records"}

// String is a short name for logs, status and JSON.
func (p Path) String() string {
	if int(p) < len(pathNames) && p != 0 {
		return pathNames[p]
	}
	return fmt.Sprintf("path(%d)", uint8(p))
}

// Resolution is a text record as ENS resolution found it.
type Resolution struct {
	Name  string // normalised
	Node  common.Hash
	Key   string
	Value string // "" = no record
	// Resolver is the resolver that answered (for PathUniversal, as the
	// Universal Resolver reports it).
	Resolver common.Address
	// ResolverOf is the name whose registry entry holds Resolver: Name,
	// or the ancestor for PathWildcard ("" for PathUniversal).
	ResolverOf string
	Via        Path
	// Lookups is the number of offchain lookups (CCIP-read) followed; 0
	// means the value came from the chain alone.
	Lookups int
	// Gateways are the origins (scheme://host[:port]) of the gateways
	// that answered, in order.
	Gateways []string
}

// Offchain reports whether a gateway took part in the answer.
func (r Resolution) Offchain() bool { return r.Lookups > 0 }

// Caller runs eth_call; the client's node (bounded, scrubbed) and
// *ethclient.Client have it.
type Caller interface {
	CallContract(ctx context.Context, msg ethereum.CallMsg, block *big.Int) ([]byte, error)
}

// ResolverConfig configures a Resolver.
type ResolverConfig struct {
	// Registry is the ENS registry; zero means CanonicalRegistry.
	Registry common.Address
	// UniversalResolver, when set, is asked instead of walking the
	// registry.
	UniversalResolver common.Address
	// GatewayTimeout bounds one gateway request, headers and body
	// (default DefaultGatewayTimeout).
	GatewayTimeout time.Duration
	// GatewayMaxBody bounds one gateway answer in bytes (default
	// DefaultGatewayMaxBody, at most MaxGatewayMaxBody).
	GatewayMaxBody int64
	// HTTPClient makes gateway requests; nil makes one (the environment's
	// proxy settings apply). Its redirect policy is replaced: at most 3,
	// http and https only.
	HTTPClient *http.Client
	// Logger gets debug records of lookups; nil discards them.
	Logger *slog.Logger
}

// Resolver reads text records the way ENS specifies and wallets do. It is
// safe for concurrent use and keeps no state between reads.
type Resolver struct {
	caller   Caller
	registry common.Address
	ur       common.Address
	gw       *gatewayClient
	log      *slog.Logger
}

// NewResolver returns a resolver reading through caller, an L1 node.
func NewResolver(caller Caller, cfg ResolverConfig) (*Resolver, error) {
	if caller == nil {
		return nil, errors.New("ens: resolver without a node")
	}
	r := &Resolver{caller: caller, registry: cfg.Registry, ur: cfg.UniversalResolver, log: cfg.Logger}
	if r.registry == (common.Address{}) {
		r.registry = CanonicalRegistry
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	timeout, maxBody := cfg.GatewayTimeout, cfg.GatewayMaxBody
	switch {
	case timeout < 0:
		return nil, fmt.Errorf("ens: gateway timeout %s is negative", timeout)
	case timeout == 0:
		timeout = DefaultGatewayTimeout
	}
	switch {
	case maxBody < 0 || maxBody > MaxGatewayMaxBody:
		return nil, fmt.Errorf("ens: gateway answer bound %d is outside 1..%d bytes", maxBody, MaxGatewayMaxBody)
	case maxBody == 0:
		maxBody = DefaultGatewayMaxBody
	}
	r.gw = newGatewayClient(cfg.HTTPClient, timeout, maxBody, r.log)
	return r, nil
}

// UniversalResolver is the configured Universal Resolver (zero: none).
func (r *Resolver) UniversalResolver() common.Address { return r.ur }

// Text resolves the text record key of name. A name or record that does
// not exist is an error matching ErrNameNotFound or ErrNoPointer
// (ErrNoResolver when the name has an owner but no resolver ENSIP-10
// accepts); an empty record is a Resolution with Value "" and no error.
// Errors of the offchain machinery match ErrOffchain (a definitive refusal:
// the lookup, a gateway's answer or the resolver's verdict on it) or
// ErrGatewayUnavailable (which matches ErrUnavailable: try again later).
func (r *Resolver) Text(ctx context.Context, name, key string) (Resolution, error) {
	norm, dns, res, call, err := textQuery(name, key)
	if err != nil {
		return Resolution{}, err
	}
	st := &lookupState{name: norm}
	start := time.Now()
	if r.ur != (common.Address{}) {
		err = r.viaUniversal(ctx, st, &res, dns, call)
	} else {
		err = r.viaRegistry(ctx, st, &res, dns, call)
	}
	res.Lookups, res.Gateways = st.lookups, st.gateways
	if err != nil {
		return Resolution{}, err
	}
	r.log.DebugContext(ctx, "ens: resolved", "name", norm, "key", key, "via", res.Via, "resolver", res.Resolver,
		"lookups", res.Lookups, "gateways", res.Gateways, "took", time.Since(start))
	return res, nil
}

func (r *Resolver) viaRegistry(ctx context.Context, st *lookupState, res *Resolution, dns, call []byte) error {
	resolver, at, err := r.findResolver(ctx, res.Name)
	if err != nil {
		return err
	}
	if resolver == (common.Address{}) {
		return r.notFound(ctx, res.Name, "")
	}
	return r.ask(ctx, st, res, resolver, at, dns, call)
}

// ask reads the record from resolver, the resolver of the name at (the
// name itself, or the ancestor ENSIP-10 found it on).
func (r *Resolver) ask(ctx context.Context, st *lookupState, res *Resolution, resolver common.Address, at string, dns, call []byte) error {
	ext, err := r.supportsExtended(ctx, resolver)
	if err != nil {
		return fmt.Errorf("ens: ask resolver %s of %s for ERC-165 support: %w", resolver, res.Name, err)
	}
	res.Resolver, res.ResolverOf = resolver, at
	switch {
	case ext:
		res.Via = PathExtended
		if at != res.Name {
			res.Via = PathWildcard
		}
		data, err := extendedABI.Pack("resolve", dns, call)
		if err != nil {
			return fmt.Errorf("ens: pack resolve: %w", err)
		}
		out, err := r.ccipCall(ctx, st, resolver, data)
		if err != nil {
			return r.resolverFailed(res, err)
		}
		inner, err := unpackOne[[]byte](extendedABI.Methods["resolve"].Outputs, out)
		if err != nil {
			return fmt.Errorf("ens: resolver %s of %s answered resolve() with %d undecodable bytes", resolver, res.Name, len(out))
		}
		return decodeTextResult(res, inner)
	case at == res.Name:
		res.Via = PathOnchain
		out, err := r.ccipCall(ctx, st, resolver, call)
		if err != nil {
			return r.resolverFailed(res, err)
		}
		return decodeTextResult(res, out)
	}
	return r.notFound(ctx, res.Name, fmt.Sprintf("; the resolver of %s, %s, does not support wildcard resolution (ENSIP-10)", at, resolver))
}

// TextAt resolves the text record key of name as ENSIP-10 would if
// resolver were the name's own resolver in the registry (an extended
// resolver asked resolve(), CCIP-read followed): what the name will
// resolve to once its resolver is changed to it, asked before the change.
func (r *Resolver) TextAt(ctx context.Context, resolver common.Address, name, key string) (Resolution, error) {
	norm, dns, res, call, err := textQuery(name, key)
	if err != nil {
		return Resolution{}, err
	}
	st := &lookupState{name: norm}
	err = r.ask(ctx, st, &res, resolver, norm, dns, call)
	res.Lookups, res.Gateways = st.lookups, st.gateways
	if err != nil {
		return Resolution{}, err
	}
	return res, nil
}

// findResolver walks the registry from name up to the root and returns
// the first resolver set, and the name whose entry holds it.
func (r *Resolver) findResolver(ctx context.Context, norm string) (common.Address, string, error) {
	for suffix := norm; ; {
		data, err := registryReadABI.Pack("resolver", nameHash(suffix))
		if err != nil {
			return common.Address{}, "", fmt.Errorf("ens: pack resolver: %w", err)
		}
		out, err := r.call(ctx, r.registry, data)
		if err != nil {
			return common.Address{}, "", fmt.Errorf("ens: registry resolver of %s: %w", displayName(suffix), err)
		}
		addr, err := unpackOne[common.Address](registryReadABI.Methods["resolver"].Outputs, out)
		if err != nil {
			return common.Address{}, "", fmt.Errorf("ens: registry resolver of %s: %d undecodable bytes", displayName(suffix), len(out))
		}
		if addr != (common.Address{}) {
			return addr, suffix, nil
		}
		if suffix == "" {
			return common.Address{}, "", nil
		}
		_, parent, found := strings.Cut(suffix, ".")
		if !found {
			parent = ""
		}
		suffix = parent
	}
}

func displayName(n string) string {
	if n == "" {
		return "the root"
	}
	return n
}

// notFound is the error for a name without a usable resolver:
// ErrNameNotFound when the registry has no owner for it either, else
// ErrNoResolver.
func (r *Resolver) notFound(ctx context.Context, norm, why string) error {
	data, err := registryReadABI.Pack("owner", nameHash(norm))
	if err != nil {
		return fmt.Errorf("ens: pack owner: %w", err)
	}
	out, err := r.call(ctx, r.registry, data)
	if err != nil {
		return fmt.Errorf("ens: registry owner of %s: %w", norm, err)
	}
	owner, err := unpackOne[common.Address](registryReadABI.Methods["owner"].Outputs, out)
	if err != nil {
		return fmt.Errorf("ens: registry owner of %s: %d undecodable bytes", norm, len(out))
	}
	if owner == (common.Address{}) {
		return fmt.Errorf("%w: %s%s", ErrNameNotFound, norm, why)
	}
	return fmt.Errorf("%w for %s (owned by %s)%s", ErrNoResolver, norm, owner, why)
}

// supportsExtended asks ERC-165 supportsInterface(0x9061b923) with
// ERC-165's 30,000 gas; a revert or an answer that is not true is false.
func (r *Resolver) supportsExtended(ctx context.Context, resolver common.Address) (bool, error) {
	data, err := erc165ABI.Pack("supportsInterface", extendedInterfaceID)
	if err != nil {
		return false, fmt.Errorf("pack supportsInterface: %w", err)
	}
	out, err := r.caller.CallContract(ctx, ethereum.CallMsg{To: &resolver, Data: data, Gas: 30_000}, nil)
	if err != nil {
		// A revert, running out of ERC-165's gas, any error of the call
		// itself: not extended. Only a node that did not answer is an error.
		if chainWide(err) {
			return false, err
		}
		return false, nil
	}
	return len(out) >= 32 && new(big.Int).SetBytes(out[:32]).Cmp(big.NewInt(1)) == 0, nil
}

func (r *Resolver) viaUniversal(ctx context.Context, st *lookupState, res *Resolution, dns, call []byte) error {
	res.Via = PathUniversal
	data, err := universalABI.Pack("resolveWithGateways", dns, call, []string{LocalBatchGateway})
	if err != nil {
		return fmt.Errorf("ens: pack resolveWithGateways: %w", err)
	}
	out, err := r.ccipCall(ctx, st, r.ur, data)
	var re *revertError
	switch {
	case errors.As(err, &re):
		return r.universalFailed(ctx, st, res, re.data)
	case err != nil:
		return err
	}
	vals, err := unpack(universalABI.Methods["resolveWithGateways"].Outputs, out)
	if err != nil || len(vals) != 2 {
		return fmt.Errorf("ens: the Universal Resolver %s answered %d undecodable bytes for %s", r.ur, len(out), res.Name)
	}
	result, ok1 := vals[0].([]byte)
	resolver, ok2 := vals[1].(common.Address)
	if !ok1 || !ok2 {
		return fmt.Errorf("ens: the Universal Resolver %s answered %d undecodable bytes for %s", r.ur, len(out), res.Name)
	}
	res.Resolver = resolver
	return decodeTextResult(res, result)
}

// universalFailed maps the Universal Resolver's own errors; a name it
// finds no resolver for is reported as the registry walk reports it.
func (r *Resolver) universalFailed(ctx context.Context, st *lookupState, res *Resolution, rev []byte) error {
	name, args := decodeRevert(rev)
	if name == "ResolverError" && len(args) == 1 {
		if inner, _ := args[0].([]byte); bytes.HasPrefix(inner, offchainLookupSelector) {
			// The resolver's lookup, which the Universal Resolver would
			// not batch: its sender is not the resolver (EIP-3668).
			return st.fail(ErrLookupInvalid, "the Universal Resolver %s refused the resolver's offchain lookup (its sender is not the resolver)", r.ur)
		}
	}
	switch name {
	case "ResolverNotFound":
		return r.notFound(ctx, res.Name, fmt.Sprintf(" (no resolver ENSIP-10 accepts, says the Universal Resolver %s)", r.ur))
	case "ResolverNotContract":
		return fmt.Errorf("%w for %s: its resolver is not a contract (Universal Resolver %s)", ErrNoResolver, res.Name, r.ur)
	case "UnsupportedResolverProfile":
		return fmt.Errorf("%w on %s: its resolver has no text records (Universal Resolver %s)", ErrNoPointer, res.Name, r.ur)
	}
	return fmt.Errorf("ens: the Universal Resolver %s failed to resolve %s: %s", r.ur, res.Name, describeRevert(name, args, rev))
}

// resolverFailed reports a resolver's revert (not a rejected offchain
// answer: ccipCall reports those) or passes err on.
func (r *Resolver) resolverFailed(res *Resolution, err error) error {
	var re *revertError
	if !errors.As(err, &re) {
		return err
	}
	name, args := decodeRevert(re.data)
	return fmt.Errorf("ens: read %s of %s from resolver %s: execution reverted: %s", res.Key, res.Name, res.Resolver, describeRevert(name, args, re.data))
}

// decodeTextResult decodes text()'s ABI-encoded string; no bytes at all is
// no record (as viem reads it).
func decodeTextResult(res *Resolution, out []byte) error {
	if len(out) == 0 {
		res.Value = ""
		return nil
	}
	v, err := unpackOne[string](resolverABI.Methods["text"].Outputs, out)
	if err != nil {
		return fmt.Errorf("ens: resolver %s answered text for %s with %d undecodable bytes", res.Resolver, res.Name, len(out))
	}
	res.Value = v
	return nil
}

func (r *Resolver) call(ctx context.Context, to common.Address, data []byte) ([]byte, error) {
	return r.caller.CallContract(ctx, ethereum.CallMsg{To: &to, Data: data}, nil)
}

// revertError is a call that reverted with data that is not an
// OffchainLookup (a resolver's own error).
type revertError struct {
	data []byte
	err  error
}

func (e *revertError) Error() string { return e.err.Error() }
func (e *revertError) Unwrap() error { return e.err }

// revertData returns the data of an eth_call that reverted ("0x" for a
// bare revert); ok is false for any other error.
func revertData(err error) (data []byte, ok bool) {
	var de rpc.DataError
	if !errors.As(err, &de) {
		return nil, false
	}
	s, isString := de.ErrorData().(string)
	if !isString {
		return nil, false
	}
	b, derr := hexutil.Decode(s)
	if derr != nil {
		return nil, false
	}
	return b, true
}

// ccipCall is eth_call(to, data) with EIP-3668: an OffchainLookup revert
// whose sender is `to` is fetched from its gateways and answered through
// its callback, which may look up again, up to MaxLookups in all. A revert
// of the first call with other data is a *revertError; a revert of a
// callback is the resolver refusing the gateway's answer (or, after a
// local batch with a failed query, that query's failure).
func (r *Resolver) ccipCall(ctx context.Context, st *lookupState, to common.Address, data []byte) ([]byte, error) {
	out, err := r.call(ctx, to, data)
	for callback := false; ; callback = true {
		if err == nil {
			return out, nil
		}
		rev, reverted := revertData(err)
		switch {
		case !reverted:
			return nil, err
		case !bytes.HasPrefix(rev, offchainLookupSelector) && callback:
			if st.inner != nil {
				return nil, st.inner
			}
			name, args := decodeRevert(rev)
			return nil, st.fail(ErrAnswerRejected, "resolver %s: %s", to, describeRevert(name, args, rev))
		case !bytes.HasPrefix(rev, offchainLookupSelector):
			return nil, &revertError{data: rev, err: err}
		case st.lookups >= MaxLookups:
			return nil, st.fail(ErrLookupLimit, "%s asked for more than %d offchain lookups", to, MaxLookups)
		}
		st.lookups++
		ol, derr := decodeOffchainLookup(rev)
		if derr != nil {
			return nil, st.fail(ErrLookupInvalid, "%s: %s", to, derr.Error())
		}
		if ol.Sender != to {
			return nil, st.fail(ErrLookupInvalid, "the lookup of %s names sender %s; EIP-3668 requires the contract called", to, ol.Sender)
		}
		var resp []byte
		if slices.Contains(ol.URLs, LocalBatchGateway) {
			resp, err = r.runBatch(ctx, st, ol.CallData, 0)
		} else {
			resp, err = r.gw.query(ctx, st, ol.Sender, ol.URLs, ol.CallData)
		}
		if err != nil {
			return nil, err
		}
		cb, cerr := ol.callbackData(resp)
		if cerr != nil {
			return nil, cerr
		}
		out, err = r.call(ctx, to, cb)
	}
}

// lookupState is the budget and record of one resolution.
type lookupState struct {
	name     string
	lookups  int
	requests int
	gateways []string
	inner    error // the first failed query of a local batch
}

func (st *lookupState) answered(origin string) { st.gateways = append(st.gateways, origin) }

func (st *lookupState) innerFailed(err error) {
	if st.inner == nil {
		st.inner = err
	}
}

func (st *lookupState) fail(kind error, format string, args ...any) error {
	return &lookupError{kind: kind, name: st.name, detail: oneLine(fmt.Sprintf(format, args...), maxErrText)}
}

func (st *lookupState) gwFail(kind error, origin string, status int, format string, args ...any) error {
	return &lookupError{kind: kind, name: st.name, origin: origin, status: status, detail: oneLine(fmt.Sprintf(format, args...), maxErrText)}
}

// lookupError is a failure of the offchain machinery: one line, the
// gateway named by its origin only.
type lookupError struct {
	kind   error // ErrGatewayUnavailable, ErrGatewayRefused, ErrGatewayAnswer, ErrLookupInvalid, ErrLookupLimit, ErrAnswerRejected
	name   string
	origin string
	status int // the gateway's HTTP status, when it sent one that failed
	detail string
}

func (e *lookupError) Error() string {
	if e.origin != "" {
		return fmt.Sprintf("%s: %s: %s: %s", e.kind, e.name, e.origin, e.detail)
	}
	return fmt.Sprintf("%s: %s: %s", e.kind, e.name, e.detail)
}

func (e *lookupError) Is(target error) bool { return errors.Is(e.kind, target) }

// withDetail returns err with suffix added to its detail.
func withDetail(err error, suffix string) error {
	var le *lookupError
	if !errors.As(err, &le) {
		return err
	}
	c := *le
	c.detail += suffix
	return &c
}

// Revert data decoding, for one-line errors.

var revertErrors = mustABI(`[
	{"type":"error","name":"Error","inputs":[{"name":"message","type":"string"}]},
	{"type":"error","name":"Panic","inputs":[{"name":"code","type":"uint256"}]},
	{"type":"error","name":"ResolverNotFound","inputs":[{"name":"name","type":"bytes"}]},
	{"type":"error","name":"ResolverNotContract","inputs":[{"name":"name","type":"bytes"},{"name":"resolver","type":"address"}]},
	{"type":"error","name":"UnsupportedResolverProfile","inputs":[{"name":"selector","type":"bytes4"}]},
	{"type":"error","name":"ResolverError","inputs":[{"name":"errorData","type":"bytes"}]},
	{"type":"error","name":"HttpError","inputs":[{"name":"status","type":"uint16"},{"name":"message","type":"string"}]},
	{"type":"error","name":"InvalidBatchGatewayResponse","inputs":[]},
	{"type":"error","name":"DNSDecodingFailed","inputs":[{"name":"dns","type":"bytes"}]}]`)

func abiErrorID(sig string) []byte { return crypto.Keccak256([]byte(sig))[:4] }

// decodeRevert names a revert's error and decodes its arguments ("" when
// it is not one of revertErrors).
func decodeRevert(rev []byte) (string, []any) {
	if len(rev) < 4 {
		return "", nil
	}
	for name, e := range revertErrors.Errors {
		if bytes.Equal(rev[:4], e.ID[:4]) {
			args, err := unpack(e.Inputs, rev[4:])
			if err != nil {
				return "", nil
			}
			return name, args
		}
	}
	return "", nil
}

// describeRevert is a one-line account of a revert.
func describeRevert(name string, args []any, rev []byte) string {
	return describeRevertDepth(name, args, rev, 0)
}

func describeRevertDepth(name string, args []any, rev []byte, depth int) string {
	switch {
	case name == "Error" && len(args) == 1:
		return fmt.Sprintf("%q", oneLine(fmt.Sprint(args[0]), maxGatewayText))
	case name == "Panic" && len(args) == 1:
		return fmt.Sprintf("panic %v", args[0])
	case name == "HttpError" && len(args) == 2:
		return fmt.Sprintf("gateway HTTP %v: %q", args[0], oneLine(fmt.Sprint(args[1]), maxGatewayText))
	case name == "ResolverError" && len(args) == 1 && depth < 4:
		inner, _ := args[0].([]byte)
		in, inArgs := decodeRevert(inner)
		return "resolver error: " + describeRevertDepth(in, inArgs, inner, depth+1)
	case name != "":
		return name
	case len(rev) == 0:
		return "no reason given"
	case len(rev) < 4:
		return fmt.Sprintf("%d bytes of revert data", len(rev))
	}
	return fmt.Sprintf("error %#x (%d bytes)", rev[:4], len(rev))
}

// ABIs of what the resolution calls.
var (
	extendedInterfaceID = [4]byte{0x90, 0x61, 0xb9, 0x23}
	extendedABI         = mustABI(`[{"type":"function","name":"resolve","stateMutability":"view",
		"inputs":[{"name":"name","type":"bytes"},{"name":"data","type":"bytes"}],"outputs":[{"name":"","type":"bytes"}]}]`)
	erc165ABI = mustABI(`[{"type":"function","name":"supportsInterface","stateMutability":"view",
		"inputs":[{"name":"id","type":"bytes4"}],"outputs":[{"name":"","type":"bool"}]}]`)
	registryReadABI = mustABI(`[{"type":"function","name":"resolver","stateMutability":"view",
		"inputs":[{"name":"node","type":"bytes32"}],"outputs":[{"name":"","type":"address"}]},
		{"type":"function","name":"owner","stateMutability":"view",
		"inputs":[{"name":"node","type":"bytes32"}],"outputs":[{"name":"","type":"address"}]}]`)
	universalABI = mustABI(`[{"type":"function","name":"resolveWithGateways","stateMutability":"view",
		"inputs":[{"name":"name","type":"bytes"},{"name":"data","type":"bytes"},{"name":"gateways","type":"string[]"}],
		"outputs":[{"name":"","type":"bytes"},{"name":"resolver","type":"address"}]}]`)
)

// unpackOne decodes a single return value of type T.
func unpackOne[T any](args abi.Arguments, out []byte) (T, error) {
	var zero T
	vals, err := unpack(args, out)
	if err != nil {
		return zero, err
	}
	if len(vals) != 1 {
		return zero, errors.New("want one value")
	}
	v, ok := vals[0].(T)
	if !ok {
		return zero, fmt.Errorf("want %T, got %T", zero, vals[0])
	}
	return v, nil
}

// textQuery is what a text lookup of name sends: the normalized name, its
// DNS encoding, the resolution it fills and the text(node, key) call.
func textQuery(name, key string) (string, []byte, Resolution, []byte, error) {
	norm, err := Normalize(name)
	if err != nil {
		return "", nil, Resolution{}, nil, err
	}
	dns, err := DNSEncode(norm)
	if err != nil {
		return "", nil, Resolution{}, nil, err
	}
	res := Resolution{Name: norm, Node: nameHash(norm), Key: key}
	call, err := resolverABI.Pack("text", res.Node, key)
	if err != nil {
		return "", nil, Resolution{}, nil, fmt.Errorf("ens: pack text: %w", err)
	}
	return norm, dns, res, call, nil
}
