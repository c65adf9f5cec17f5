package ens

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/hermesd/hermesd/internal/redact"
)

// EIP-3668 (CCIP-read) as hermesd follows it. A contract that reverts
// OffchainLookup(sender, urls, callData, callbackFunction, extraData) asks
// the client to fetch callData from one of urls and to call
// callbackFunction(response, extraData) on it; the callback verifies the
// answer (a signature, a storage proof) and returns the result or looks up
// again. Everything a gateway sends is hostile input: it is bounded in
// size and time, and what it can do is limited to what the resolver's
// callback accepts.

// Bounds of one resolution. The depth is viem's (ccipReadLimit.depth in
// viem 2.57: at most 4 lookups, the first and 3 nested); the request budget
// bounds what a hostile resolver can make the client fetch through many
// URLs and batches (viem: 256), kept small because a record is one value.
const (
	MaxLookups     = 4  // OffchainLookup reverts followed, nested ones included
	maxRequests    = 32 // gateway HTTP requests in one resolution
	maxBatch       = 16 // queries in one local batch-gateway request
	maxLookupURLs  = 16 // URLs in one OffchainLookup
	maxURLLength   = 4096
	maxLookupBytes = 1 << 20 // callData and extraData of one OffchainLookup
	maxRedirects   = 3
	maxGatewayText = 200 // bytes of a gateway's own message quoted in an error
)

// Gateway defaults (Config.GatewayTimeout, Config.GatewayMaxBody).
const (
	// DefaultGatewayTimeout bounds one gateway request, headers and body
	// (viem's default transport timeout).
	DefaultGatewayTimeout = 10 * time.Second
	// DefaultGatewayMaxBody bounds one gateway answer. A signed text
	// record is well under 1 KiB; proof-carrying answers (a storage proof
	// of an L2 record) are tens of KiB.
	DefaultGatewayMaxBody = 1 << 20
	// MaxGatewayMaxBody is the largest bound accepted: an answer goes back
	// to the node as the callback's calldata, and nodes refuse request
	// bodies much above this (geth: 5 MB).
	MaxGatewayMaxBody = 4 << 20
)

// LocalBatchGateway is the URL by which a Universal Resolver asks the
// client to run its batch of lookups itself (as viem does) instead of
// sending them to a hosted batch gateway.
const LocalBatchGateway = "x-batch-gateway:true"

// offchainLookupSelector is OffchainLookup(address,string[],bytes,bytes4,bytes).
var offchainLookupSelector = []byte{0x55, 0x6f, 0x18, 0x30}

var (
	tAddress  = mustType("address")
	tBytes    = mustType("bytes")
	tBytes4   = mustType("bytes4")
	tString   = mustType("string")
	tStrings  = mustType("string[]")
	tBools    = mustType("bool[]")
	tBytesArr = mustType("bytes[]")
	tUint16   = mustType("uint16")

	offchainLookupArgs = abi.Arguments{{Type: tAddress}, {Type: tStrings}, {Type: tBytes}, {Type: tBytes4}, {Type: tBytes}}
	callbackArgs       = abi.Arguments{{Type: tBytes}, {Type: tBytes}}
	batchResultArgs    = abi.Arguments{{Type: tBools}, {Type: tBytesArr}}

	// batchGatewayABI is the batch gateway's query((address,string[],bytes)[]).
	batchGatewayABI = mustABI(`[{"type":"function","name":"query","stateMutability":"view",
		"inputs":[{"name":"requests","type":"tuple[]","components":[
			{"name":"sender","type":"address"},{"name":"urls","type":"string[]"},{"name":"data","type":"bytes"}]}],
		"outputs":[{"name":"failures","type":"bool[]"},{"name":"responses","type":"bytes[]"}]}]`)
)

func mustType(t string) abi.Type {
	typ, err := abi.NewType(t, "", nil)
	if err != nil {
		panic("ens: bad ABI type " + t + ": " + err.Error())
	}
	return typ
}

// offchainLookup is a decoded OffchainLookup revert.
type offchainLookup struct {
	Sender    common.Address
	URLs      []string
	CallData  []byte
	Callback  [4]byte
	ExtraData []byte
}

// unpack decodes hostile ABI data; a decoder panic is an error, never a
// crash of the daemon.
func unpack(args abi.Arguments, data []byte) (vals []any, err error) {
	defer func() {
		if r := recover(); r != nil {
			vals, err = nil, fmt.Errorf("undecodable ABI data (%v)", r)
		}
	}()
	return args.Unpack(data)
}

// decodeOffchainLookup decodes revert data that starts with the
// OffchainLookup selector, and bounds what it carries.
func decodeOffchainLookup(rev []byte) (*offchainLookup, error) {
	if len(rev) < 4 || !bytes.Equal(rev[:4], offchainLookupSelector) {
		return nil, errors.New("not an OffchainLookup revert")
	}
	vals, err := unpack(offchainLookupArgs, rev[4:])
	if err != nil {
		return nil, fmt.Errorf("malformed OffchainLookup: %w", err)
	}
	if len(vals) != 5 {
		return nil, errors.New("malformed OffchainLookup")
	}
	ol := &offchainLookup{}
	var ok [5]bool
	ol.Sender, ok[0] = vals[0].(common.Address)
	ol.URLs, ok[1] = vals[1].([]string)
	ol.CallData, ok[2] = vals[2].([]byte)
	ol.Callback, ok[3] = vals[3].([4]byte)
	ol.ExtraData, ok[4] = vals[4].([]byte)
	for _, o := range ok {
		if !o {
			return nil, errors.New("malformed OffchainLookup")
		}
	}
	switch {
	case len(ol.URLs) == 0:
		return nil, errors.New("OffchainLookup names no gateway URL")
	case len(ol.URLs) > maxLookupURLs:
		return nil, fmt.Errorf("OffchainLookup names %d gateway URLs (at most %d are followed)", len(ol.URLs), maxLookupURLs)
	case len(ol.CallData) > maxLookupBytes || len(ol.ExtraData) > maxLookupBytes:
		return nil, fmt.Errorf("OffchainLookup carries more than %d bytes of data", maxLookupBytes)
	}
	for _, u := range ol.URLs {
		if len(u) > maxURLLength {
			return nil, fmt.Errorf("OffchainLookup names a gateway URL of %d bytes (at most %d)", len(u), maxURLLength)
		}
	}
	return ol, nil
}

// callbackData is callbackFunction ‖ abi.encode(response, extraData).
func (ol *offchainLookup) callbackData(response []byte) ([]byte, error) {
	args, err := callbackArgs.Pack(response, ol.ExtraData)
	if err != nil {
		return nil, fmt.Errorf("encode callback: %w", err)
	}
	return append(ol.Callback[:], args...), nil
}

// batchQuery is one lookup of a batch gateway request.
type batchQuery struct {
	Sender common.Address
	URLs   []string
	Data   []byte
}

// decodeBatchQuery decodes query((address,string[],bytes)[]) calldata.
func decodeBatchQuery(data []byte) (qs []batchQuery, err error) {
	m := batchGatewayABI.Methods["query"]
	if len(data) < 4 || !bytes.Equal(data[:4], m.ID) {
		return nil, errors.New("batch gateway call is not query((address,string[],bytes)[])")
	}
	vals, err := unpack(m.Inputs, data[4:])
	if err != nil || len(vals) != 1 {
		return nil, fmt.Errorf("malformed batch gateway query: %v", err)
	}
	defer func() {
		if r := recover(); r != nil {
			qs, err = nil, errors.New("malformed batch gateway query")
		}
	}()
	rv := reflect.ValueOf(vals[0])
	if rv.Kind() != reflect.Slice {
		return nil, errors.New("malformed batch gateway query")
	}
	if rv.Len() > maxBatch {
		return nil, fmt.Errorf("batch gateway query of %d lookups (at most %d)", rv.Len(), maxBatch)
	}
	for i := 0; i < rv.Len(); i++ {
		e := rv.Index(i)
		q := batchQuery{}
		var ok [3]bool
		q.Sender, ok[0] = e.FieldByName("Sender").Interface().(common.Address)
		q.URLs, ok[1] = e.FieldByName("Urls").Interface().([]string)
		q.Data, ok[2] = e.FieldByName("Data").Interface().([]byte)
		if !ok[0] || !ok[1] || !ok[2] {
			return nil, errors.New("malformed batch gateway query")
		}
		if len(q.URLs) > maxLookupURLs || len(q.Data) > maxLookupBytes {
			return nil, errors.New("batch gateway query past the bounds of one lookup")
		}
		qs = append(qs, q)
	}
	return qs, nil
}

// parseGatewayResponse extracts the answer from a gateway's 2xx body:
// {"data": "0x…"} when the content type is JSON, else the body itself as
// 0x-prefixed hex (viem accepts both).
func parseGatewayResponse(contentType string, body []byte) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	s := strings.TrimSpace(string(body))
	if mt == "application/json" || (mt == "" && strings.HasPrefix(s, "{")) {
		var v struct {
			Data *string `json:"data"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return nil, errors.New("answer is not a JSON object")
		}
		if v.Data == nil {
			return nil, errors.New(`answer has no "data"`)
		}
		s = *v.Data
	}
	if !strings.HasPrefix(s, "0x") {
		return nil, errors.New(`answer's data is not 0x-prefixed hex`)
	}
	b, err := hexutil.Decode(s)
	if err != nil {
		return nil, errors.New(`answer's data is not 0x-prefixed hex of whole bytes`)
	}
	return b, nil
}

// gatewayClient fetches lookups from gateways.
type gatewayClient struct {
	http    *http.Client
	timeout time.Duration
	maxBody int64
	log     *slog.Logger
}

func newGatewayClient(hc *http.Client, timeout time.Duration, maxBody int64, log *slog.Logger) *gatewayClient {
	if hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxResponseHeaderBytes = 64 << 10
		hc = &http.Client{Transport: t}
	}
	// Our own copy: the redirect policy is ours whatever was passed.
	c := *hc
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("more than %d redirects", maxRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return errors.New("redirect to a URL that is not http or https")
		}
		return nil
	}
	return &gatewayClient{http: &c, timeout: timeout, maxBody: maxBody, log: log}
}

// query fetches data from the first of urls that answers: a 4xx stops
// (EIP-3668), anything else (a network error, a timeout, a 5xx, an answer
// that is malformed or too large, a URL that is not http or https) moves to
// the next URL. When none answers, the error is unavailability if any
// failure was, else the first failure.
func (g *gatewayClient) query(ctx context.Context, st *lookupState, sender common.Address, urls []string, data []byte) ([]byte, error) {
	if len(urls) == 0 {
		return nil, st.fail(ErrLookupInvalid, "a lookup names no gateway URL")
	}
	var first, unavailable error
	tried := 0
	for _, tmpl := range urls {
		if st.requests >= maxRequests {
			return nil, st.fail(ErrLookupLimit, "more than %d gateway requests", maxRequests)
		}
		resp, origin, err := g.fetch(ctx, st, tmpl, sender, data)
		if origin != "" {
			st.requests++
			tried++
		}
		if err == nil {
			st.answered(origin)
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ens: resolve %s: %w", st.name, ctx.Err())
		}
		if errors.Is(err, ErrGatewayRefused) {
			return nil, err
		}
		g.log.DebugContext(ctx, "ens: gateway failed", "name", st.name, "err", err)
		switch {
		case errors.Is(err, ErrGatewayUnavailable):
			if unavailable == nil {
				unavailable = err
			}
		case first == nil:
			first = err
		}
	}
	if unavailable != nil {
		if tried > 1 {
			return nil, withDetail(unavailable, fmt.Sprintf(" (%d gateway URLs tried)", tried))
		}
		return nil, unavailable
	}
	return nil, first
}

// fetch makes one gateway request; origin is the gateway's
// scheme://host[:port] ("" when no request was made).
func (g *gatewayClient) fetch(ctx context.Context, st *lookupState, tmpl string, sender common.Address, data []byte) (resp []byte, origin string, err error) {
	u, perr := url.Parse(tmpl)
	switch {
	case perr != nil:
		return nil, "", st.fail(ErrLookupInvalid, "a gateway URL does not parse")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, "", st.fail(ErrLookupInvalid, "gateway URL scheme %q is not http or https", oneLine(u.Scheme, 16))
	case u.Host == "":
		return nil, "", st.fail(ErrLookupInvalid, "a gateway URL has no host")
	case u.User != nil:
		return nil, "", st.fail(ErrLookupInvalid, "a gateway URL carries credentials")
	}
	origin = redact.Origin(u)
	senderHex := strings.ToLower(sender.Hex())
	dataHex := hexutil.Encode(data)
	full := strings.ReplaceAll(strings.ReplaceAll(tmpl, "{sender}", senderHex), "{data}", dataHex)
	scrub := redact.NewScrubber(tmpl, full)
	method, body := http.MethodGet, io.Reader(nil)
	if !strings.Contains(tmpl, "{data}") {
		b, _ := json.Marshal(map[string]string{"data": dataHex, "sender": senderHex})
		method, body = http.MethodPost, bytes.NewReader(b)
	}
	rctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	req, rerr := http.NewRequestWithContext(rctx, method, full, body)
	if rerr != nil {
		return nil, "", st.fail(ErrLookupInvalid, "a gateway URL does not make a request")
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	res, herr := g.http.Do(req)
	if herr != nil {
		if rctx.Err() != nil && ctx.Err() == nil {
			return nil, origin, st.gwFail(ErrGatewayUnavailable, origin, 0, "no answer within %s", g.timeout)
		}
		return nil, origin, st.gwFail(ErrGatewayUnavailable, origin, 0, "%s", oneLine(scrub.String(unwrapURLError(herr)), maxGatewayText))
	}
	defer res.Body.Close()
	raw, rerr := io.ReadAll(io.LimitReader(res.Body, g.maxBody+1))
	switch {
	case int64(len(raw)) > g.maxBody:
		return nil, origin, st.gwFail(ErrGatewayAnswer, origin, 0, "answer larger than %d bytes (HTTP %d)", g.maxBody, res.StatusCode)
	case rerr != nil && rctx.Err() != nil && ctx.Err() == nil:
		return nil, origin, st.gwFail(ErrGatewayUnavailable, origin, 0, "answer not complete within %s (HTTP %d, %d bytes read)", g.timeout, res.StatusCode, len(raw))
	case rerr != nil:
		return nil, origin, st.gwFail(ErrGatewayUnavailable, origin, 0, "answer cut off after %d bytes: %s", len(raw), oneLine(scrub.String(rerr.Error()), maxGatewayText))
	}
	g.log.DebugContext(ctx, "ens: gateway answered", "name", st.name, "gateway", origin, "method", method, "status", res.StatusCode, "bytes", len(raw), "took", time.Since(start))
	switch sc := res.StatusCode; {
	case sc >= 200 && sc < 300:
	case sc >= 400 && sc < 500:
		return nil, origin, st.gwFail(ErrGatewayRefused, origin, sc, "HTTP %d%s", sc, gatewayMessage(raw, scrub))
	case sc >= 500:
		return nil, origin, st.gwFail(ErrGatewayUnavailable, origin, sc, "HTTP %d%s", sc, gatewayMessage(raw, scrub))
	default:
		return nil, origin, st.gwFail(ErrGatewayAnswer, origin, sc, "HTTP %d", sc)
	}
	out, perr2 := parseGatewayResponse(res.Header.Get("Content-Type"), raw)
	if perr2 != nil {
		return nil, origin, st.gwFail(ErrGatewayAnswer, origin, 0, "%s", perr2.Error())
	}
	return out, origin, nil
}

// gatewayMessage quotes a gateway's own error message ({"message"} or
// {"error"}), cleaned and cut to one short line.
func gatewayMessage(body []byte, scrub *redact.Scrubber) string {
	var v struct {
		Message any `json:"message"`
		Error   any `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	for _, m := range []any{v.Message, v.Error} {
		if s, ok := m.(string); ok && strings.TrimSpace(s) != "" {
			return ": " + oneLine(scrub.String(s), maxGatewayText)
		}
	}
	return ""
}

// unwrapURLError is the cause of an *url.Error without the URL, which may
// carry secrets and a long {data}.
func unwrapURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err.Error()
	}
	return err.Error()
}

// runBatch is the batch gateway run locally: each query of
// query((address,string[],bytes)[]) is fetched with the same machinery (a
// nested local batch included, within the depth bound), and the answers
// are encoded as (bool[] failures, bytes[] responses), a failure's
// response being HttpError(status, message) or Error(message) as ENS's
// batch gateway encodes them.
func (r *Resolver) runBatch(ctx context.Context, st *lookupState, data []byte, depth int) ([]byte, error) {
	if depth >= MaxLookups {
		return nil, st.fail(ErrLookupLimit, "batch lookups nested more than %d deep", MaxLookups)
	}
	qs, err := decodeBatchQuery(data)
	if err != nil {
		return nil, st.fail(ErrLookupInvalid, "%s", err.Error())
	}
	failures := make([]bool, len(qs))
	responses := make([][]byte, len(qs))
	for i, q := range qs {
		var resp []byte
		var qerr error
		if slices.Contains(q.URLs, LocalBatchGateway) {
			resp, qerr = r.runBatch(ctx, st, q.Data, depth+1)
		} else {
			resp, qerr = r.gw.query(ctx, st, q.Sender, q.URLs, q.Data)
		}
		switch {
		case qerr == nil:
			responses[i] = resp
		case ctx.Err() != nil, errors.Is(qerr, ErrLookupLimit):
			return nil, qerr
		default:
			failures[i] = true
			responses[i] = encodeBatchFailure(qerr)
			st.innerFailed(qerr)
		}
	}
	out, err := batchResultArgs.Pack(failures, responses)
	if err != nil {
		return nil, fmt.Errorf("ens: encode batch answer: %w", err)
	}
	return out, nil
}

var (
	errorSelector     = []byte{0x08, 0xc3, 0x79, 0xa0} // Error(string)
	httpErrorSelector = abiErrorID("HttpError(uint16,string)")
)

// encodeBatchFailure encodes a failed query's response for the batch
// answer.
func encodeBatchFailure(err error) []byte {
	var le *lookupError
	msg := err.Error()
	if errors.As(err, &le) {
		msg = le.detail
		if le.status != 0 {
			b, perr := abi.Arguments{{Type: tUint16}, {Type: tString}}.Pack(uint16(le.status), msg)
			if perr == nil {
				return append(slices.Clone(httpErrorSelector), b...)
			}
		}
	}
	b, _ := abi.Arguments{{Type: tString}}.Pack(msg)
	return append(slices.Clone(errorSelector), b...)
}
