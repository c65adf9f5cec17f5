package ens

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/hermesd/hermesd/internal/devchain"
)

var (
	agentKey    = devchain.DeriveKey("agent")
	agentAddr   = crypto.PubkeyToAddress(agentKey.PublicKey)
	intruderKey = devchain.DeriveKey("intruder")
	hotKey      = devchain.DeriveKey("hot")
)

// env is a fresh local chain with names owned by agentKey and a client that
// signs with agentKey, talking HTTP JSON-RPC like hermesd does.
type env struct {
	chain  *devchain.Chain
	client *Client
	rpc    *ethclient.Client // an independent HTTP client for assertions
}

func newEnv(t testing.TB, names ...string) *env {
	t.Helper()
	cfg := devchain.Config{
		Fund: []common.Address{
			agentAddr,
			crypto.PubkeyToAddress(intruderKey.PublicKey),
			crypto.PubkeyToAddress(hotKey.PublicKey),
		},
	}
	for _, n := range names {
		cfg.Names = append(cfg.Names, devchain.Name{Name: n, Owner: agentAddr})
	}
	begin := time.Now()
	chain, err := devchain.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("devchain: %v", err)
	}
	t.Cleanup(func() { chain.Close() })
	if tt, ok := t.(*testing.T); ok {
		tt.Logf("chain with %d names up in %v", len(names), time.Since(begin).Round(time.Millisecond))
	}
	rpc, err := ethclient.Dial(chain.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rpc.Close)
	return &env{chain: chain, client: newClient(t, chain, agentKey), rpc: rpc}
}

func newClient(t testing.TB, chain *devchain.Chain, key *ecdsa.PrivateKey) *Client {
	t.Helper()
	cfg := Config{
		RPCURL:       chain.URL(),
		ChainID:      chain.ChainID().Uint64(),
		TxTimeout:    30 * time.Second,
		PollInterval: 20 * time.Millisecond,
	}
	if key != nil {
		cfg.Signer = NewSigner(key)
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("ens.New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// blobID is a 43-character Walrus-style blob id (RawURLEncoding of 32 bytes).
func blobID(i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint("blob", i)))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func (e *env) nonce(t testing.TB, key *ecdsa.PrivateKey) uint64 {
	t.Helper()
	n, err := e.rpc.PendingNonceAt(context.Background(), crypto.PubkeyToAddress(key.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) mustRead(t testing.TB, name, want string) {
	t.Helper()
	got, err := e.client.Read(context.Background(), name)
	if err != nil || got != want {
		t.Fatalf("Read(%s) = %q, %v; want %q", name, got, err, want)
	}
}

// setAuthorisation sends the 0.3.1 resolver's setAuthorisation from owner.
func (e *env) setAuthorisation(t testing.TB, owner *ecdsa.PrivateKey, name string, target common.Address, ok bool) {
	t.Helper()
	node, err := Node(name)
	if err != nil {
		t.Fatal(err)
	}
	data, err := resolverABI.Pack("setAuthorisation", node, target, ok)
	if err != nil {
		t.Fatal(err)
	}
	to := e.chain.ResolverAddress()
	if _, err := e.chain.Transact(context.Background(), owner, devchain.Call{To: &to, Data: data}); err != nil {
		t.Fatalf("setAuthorisation: %v", err)
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	e := newEnv(t, "agent.eth")
	ctx := t.Context()
	if _, err := e.client.Read(ctx, "agent.eth"); !errors.Is(err, ErrNoPointer) || errors.Is(err, ErrNoResolver) {
		t.Fatalf("fresh name: %v", err)
	}
	v1, v2 := blobID(1), blobID(2)
	res, err := e.client.Write(ctx, "agent.eth", v1, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Unchanged || res.TxHash == (common.Hash{}) || res.GasUsed == 0 || res.BlockNumber == 0 || res.EffectiveGasPrice == nil {
		t.Fatalf("result %+v", res)
	}
	rcpt, err := e.rpc.TransactionReceipt(ctx, res.TxHash)
	if err != nil || rcpt.Status != 1 || rcpt.GasUsed != res.GasUsed || rcpt.Type != 2 {
		t.Fatalf("receipt %+v, %v", rcpt, err)
	}
	e.mustRead(t, "agent.eth", v1)

	if _, err := e.client.Write(ctx, "agent.eth", v2, v1); err != nil {
		t.Fatal(err)
	}
	e.mustRead(t, "agent.eth", v2)

	// Writing the value the record already holds sends nothing, whatever
	// expected says (a retry after an ambiguous failure).
	before := e.nonce(t, agentKey)
	res, err = e.client.Write(ctx, "agent.eth", v2, v1)
	if err != nil || !res.Unchanged || res.TxHash != (common.Hash{}) {
		t.Fatalf("same value: %+v, %v", res, err)
	}
	if after := e.nonce(t, agentKey); after != before {
		t.Fatalf("nonce moved %d → %d for an unchanged write", before, after)
	}

	// A read-only client reads but cannot write.
	ro := newClient(t, e.chain, nil)
	if got, err := ro.Read(ctx, "AGENT.eth"); err != nil || got != v2 {
		t.Fatalf("read-only Read = %q, %v", got, err)
	}
	if _, err := ro.Write(ctx, "agent.eth", v1, v2); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only Write: %v", err)
	}
	// A client on an existing connection leaves it open on Close.
	shared, err := New(ctx, Config{Backend: e.rpc})
	if err != nil {
		t.Fatal(err)
	}
	shared.Close()
	if got, err := e.client.Read(ctx, "agent.eth"); err != nil || got != v2 {
		t.Fatalf("after Close of a shared-backend client: %q, %v", got, err)
	}
	if _, err := e.rpc.ChainID(ctx); err != nil {
		t.Fatalf("shared backend closed: %v", err)
	}
}

func TestStaleExpectedIsRefused(t *testing.T) {
	e := newEnv(t, "agent.eth")
	ctx := t.Context()
	v1 := blobID(1)
	if _, err := e.client.Write(ctx, "agent.eth", v1, ""); err != nil {
		t.Fatal(err)
	}
	before := e.nonce(t, agentKey)
	for _, expected := range []string{"", blobID(0)} {
		_, err := e.client.Write(ctx, "agent.eth", blobID(3), expected)
		var ce *ConflictError
		if !errors.Is(err, ErrConflict) || !errors.As(err, &ce) {
			t.Fatalf("expected %q: err = %v", expected, err)
		}
		if ce.Name != "agent.eth" || ce.Expected != expected || ce.Actual != v1 {
			t.Fatalf("conflict %+v", ce)
		}
	}
	if after := e.nonce(t, agentKey); after != before {
		t.Fatalf("a transaction was sent: nonce %d → %d", before, after)
	}
	e.mustRead(t, "agent.eth", v1)
}

func TestNonOwnerIsNotAuthorized(t *testing.T) {
	e := newEnv(t, "agent.eth")
	ctx := t.Context()
	v1 := blobID(1)
	if _, err := e.client.Write(ctx, "agent.eth", v1, ""); err != nil {
		t.Fatal(err)
	}
	intruder := newClient(t, e.chain, intruderKey)
	before := e.nonce(t, intruderKey)
	_, err := intruder.Write(ctx, "agent.eth", blobID(9), v1)
	var na *NotAuthorizedError
	if !errors.Is(err, ErrNotAuthorized) || !errors.As(err, &na) {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	if na.Owner != agentAddr || na.Signer != intruder.From() ||
		!strings.Contains(msg, agentAddr.Hex()) || !strings.Contains(msg, intruder.From().Hex()) {
		t.Fatalf("error does not name owner and signer: %v", err)
	}
	if after := e.nonce(t, intruderKey); after != before {
		t.Fatalf("a transaction was sent: nonce %d → %d", before, after)
	}
	e.mustRead(t, "agent.eth", v1)

	// Once the owner authorises the hot key on the resolver (0.3.1 model),
	// the hot key may write.
	hot := newClient(t, e.chain, hotKey)
	e.setAuthorisation(t, agentKey, "agent.eth", hot.From(), true)
	if _, err := hot.Write(ctx, "agent.eth", blobID(2), v1); err != nil {
		t.Fatalf("authorised hot key: %v", err)
	}
	e.mustRead(t, "agent.eth", blobID(2))
}

func TestRevertedTransactionIsAnError(t *testing.T) {
	e := newEnv(t, "agent.eth", "other.eth")
	ctx := t.Context()

	t.Run("out of gas", func(t *testing.T) {
		c := newClient(t, e.chain, agentKey)
		c.fixedGas = 40_000 // above the intrinsic cost, below what setText needs
		res, err := c.Write(ctx, "agent.eth", blobID(1), "")
		var re *RevertError
		if !errors.Is(err, ErrReverted) || !errors.As(err, &re) || re.Simulated {
			t.Fatalf("err = %v", err)
		}
		rcpt, rerr := e.rpc.TransactionReceipt(ctx, res.TxHash)
		if rerr != nil || rcpt.Status != 0 || re.TxHash != res.TxHash || !strings.Contains(err.Error(), res.TxHash.Hex()) {
			t.Fatalf("receipt %+v, %v; error %v", rcpt, rerr, err)
		}
		if _, err := e.client.Read(ctx, "agent.eth"); !errors.Is(err, ErrNoPointer) {
			t.Fatalf("record changed by a reverted tx: %v", err)
		}
	})

	t.Run("authorisation revoked between check and send", func(t *testing.T) {
		hot := newClient(t, e.chain, hotKey)
		e.setAuthorisation(t, agentKey, "other.eth", hot.From(), true)
		hot.beforeSend = func() { e.setAuthorisation(t, agentKey, "other.eth", hot.From(), false) }
		res, err := hot.Write(ctx, "other.eth", blobID(1), "")
		if !errors.Is(err, ErrReverted) || res.TxHash == (common.Hash{}) {
			t.Fatalf("err = %v, result %+v", err, res)
		}
		if rcpt, err := e.rpc.TransactionReceipt(ctx, res.TxHash); err != nil || rcpt.Status != 0 {
			t.Fatalf("receipt %+v, %v", rcpt, err)
		}
		if _, err := e.client.Read(ctx, "other.eth"); !errors.Is(err, ErrNoPointer) {
			t.Fatalf("record changed by a reverted tx: %v", err)
		}
	})
}

func TestNormalisedNamesShareOneRecord(t *testing.T) {
	e := newEnv(t, "agent.eth")
	ctx := t.Context()
	v := blobID(5)
	if _, err := e.client.Write(ctx, "Agent.ETH", v, ""); err != nil {
		t.Fatal(err)
	}
	e.mustRead(t, "agent.eth", v)
	e.mustRead(t, "AGENT.eth", v)
	a, _ := Node("Agent.ETH")
	b, _ := Node("agent.eth")
	if a != b || a != devchain.NameHash("agent.eth") {
		t.Fatalf("nodes differ: %s %s", a, b)
	}
	// Compare-and-set matches across spellings too.
	if _, err := e.client.Write(ctx, "agent.eth", blobID(6), v); err != nil {
		t.Fatal(err)
	}
	e.mustRead(t, "Agent.ETH", blobID(6))
}

func TestInvalidNamesAreRejected(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	for _, tc := range []struct{ name, reason string }{
		{"a..eth", "empty label"},
		{"\u0430pple.eth", "illegal mixture"}, // Cyrillic а + Latin
		{"xn--ls8h.eth", "invalid label extension"},
		{"a_b.eth", "underscore"},
		{"agent.eth.", "empty label"},
		{"test\u200d.eth", "disallowed"},
		{"", "empty name"},
	} {
		t.Run(fmt.Sprintf("%q", tc.name), func(t *testing.T) {
			_, err := Normalize(tc.name)
			if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Normalize: %v (want reason %q)", err, tc.reason)
			}
			if shown, _ := Readable(tc.name); tc.name != "" && !strings.Contains(err.Error(), `"`+shown+`"`) {
				t.Fatalf("error does not name the name: %v", err)
			}
			if _, err := e.client.Read(ctx, tc.name); !errors.Is(err, ErrInvalidName) {
				t.Fatalf("Read: %v", err)
			}
			if _, err := e.client.Write(ctx, tc.name, "x", ""); !errors.Is(err, ErrInvalidName) {
				t.Fatalf("Write: %v", err)
			}
		})
	}
}

func TestMissingNameAndResolver(t *testing.T) {
	e := newEnv(t, "agent.eth")
	ctx := t.Context()
	if err := e.chain.RegisterWithResolver(ctx, "bare.eth", agentAddr, common.Address{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Read(ctx, "nobody.eth"); !errors.Is(err, ErrNameNotFound) || errors.Is(err, ErrNoPointer) {
		t.Fatalf("unregistered: %v", err)
	}
	_, err := e.client.Read(ctx, "bare.eth")
	if !errors.Is(err, ErrNoResolver) || !errors.Is(err, ErrNoPointer) {
		t.Fatalf("no resolver: %v", err)
	}
	if _, err := e.client.Write(ctx, "nobody.eth", "x", ""); !errors.Is(err, ErrNameNotFound) {
		t.Fatalf("write unregistered: %v", err)
	}
	if _, err := e.client.Write(ctx, "bare.eth", "x", ""); !errors.Is(err, ErrNoResolver) {
		t.Fatalf("write without resolver: %v", err)
	}
	rec, err := e.client.Lookup(ctx, "Agent.eth")
	if err != nil || rec.Name != "agent.eth" || rec.Owner != agentAddr || rec.Resolver != e.chain.ResolverAddress() {
		t.Fatalf("Lookup = %+v, %v", rec, err)
	}
}

func TestConcurrentWritesFromOneKey(t *testing.T) {
	const n = 20
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("agent%02d.fleet.eth", i)
	}
	e := newEnv(t, names...)
	ctx := t.Context()
	before := e.nonce(t, agentKey)
	results := make([]TxResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range names {
		wg.Go(func() {
			results[i], errs[i] = e.client.Write(ctx, names[i], blobID(i), "")
		})
	}
	wg.Wait()
	t.Logf("%d concurrent writes landed in %v", n, time.Since(begin).Round(time.Millisecond))
	hashes := make(map[common.Hash]bool)
	for i := range names {
		if errs[i] != nil {
			t.Fatalf("write %d: %v", i, errs[i])
		}
		hashes[results[i].TxHash] = true
		e.mustRead(t, names[i], blobID(i))
	}
	if len(hashes) != n {
		t.Fatalf("%d distinct transactions, want %d", len(hashes), n)
	}
	if after := e.nonce(t, agentKey); after != before+n {
		t.Fatalf("nonce %d → %d, want +%d", before, after, n)
	}
}

func TestWriteManyIsOneTransaction(t *testing.T) {
	const n = 10
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("agent%02d.fleet.eth", i)
	}
	e := newEnv(t, append(names, "agent.eth")...)
	ctx := t.Context()
	updates := make([]Update, n)
	for i := range updates {
		updates[i] = Update{Name: names[i], Value: blobID(i)}
	}
	before := e.nonce(t, agentKey)
	res, err := e.client.WriteMany(ctx, updates)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Names) != n || res.TxHash == (common.Hash{}) {
		t.Fatalf("result %+v", res)
	}
	if after := e.nonce(t, agentKey); after != before+1 {
		t.Fatalf("nonce %d → %d: want exactly one transaction", before, after)
	}
	rcpt, err := e.rpc.TransactionReceipt(ctx, res.TxHash)
	if err != nil || rcpt.BlockNumber.Uint64() != res.BlockNumber || len(rcpt.Logs) != n {
		t.Fatalf("receipt %+v, %v (want %d TextChanged logs in one tx)", rcpt, err, n)
	}
	for i := range names {
		e.mustRead(t, names[i], blobID(i))
	}

	// One stale expectation fails the whole batch; every conflict is
	// reported and nothing is sent.
	for i := range updates {
		updates[i] = Update{Name: names[i], Value: blobID(100 + i), Expected: blobID(i)}
	}
	updates[3].Expected, updates[7].Expected = "stale", "stale"
	before = e.nonce(t, agentKey)
	_, err = e.client.WriteMany(ctx, updates)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), names[3]) || !strings.Contains(err.Error(), names[7]) {
		t.Fatalf("stale batch: %v", err)
	}
	if after := e.nonce(t, agentKey); after != before {
		t.Fatal("a transaction was sent for a conflicting batch")
	}
	e.mustRead(t, names[0], blobID(0))

	// Names already holding their value are left out of the transaction.
	updates[3].Expected, updates[7].Expected = blobID(3), blobID(7)
	updates[0].Value = blobID(0)
	res, err = e.client.WriteMany(ctx, updates)
	if err != nil || len(res.Names) != n-1 || res.Names[0] != names[1] {
		t.Fatalf("partial batch: %+v, %v", res, err)
	}
	res, err = e.client.WriteMany(ctx, updates)
	if err != nil || !res.Unchanged {
		t.Fatalf("repeated batch: %+v, %v", res, err)
	}

	// Duplicates (after normalisation) and mixed resolvers are refused.
	if _, err := e.client.WriteMany(ctx, []Update{{Name: "agent.eth", Value: "a"}, {Name: "AGENT.ETH", Value: "b"}}); err == nil {
		t.Fatal("duplicate names accepted")
	}
	other, err := e.chain.DeployResolver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.chain.RegisterWithResolver(ctx, "elsewhere.eth", agentAddr, other); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.WriteMany(ctx, []Update{{Name: "agent.eth", Value: "a"}, {Name: "elsewhere.eth", Value: "b"}})
	if !errors.Is(err, ErrMixedResolvers) {
		t.Fatalf("mixed resolvers: %v", err)
	}
	// A single name on the other resolver is written through that resolver.
	if _, err := e.client.Write(ctx, "elsewhere.eth", "b", ""); err != nil {
		t.Fatal(err)
	}
	e.mustRead(t, "elsewhere.eth", "b")
}

func TestNonceResyncAfterForeignTransaction(t *testing.T) {
	e := newEnv(t, "agent.eth")
	ctx := t.Context()
	if _, err := e.client.Write(ctx, "agent.eth", blobID(1), ""); err != nil {
		t.Fatal(err)
	}
	// The same key sends behind the client's back (another tool).
	to := agentAddr
	if _, err := e.chain.Transact(ctx, agentKey, devchain.Call{To: &to, Gas: 21_000}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Write(ctx, "agent.eth", blobID(2), blobID(1)); err != nil {
		t.Fatalf("write after a foreign tx: %v", err)
	}
	e.mustRead(t, "agent.eth", blobID(2))
}

func TestLimitsAndConfiguration(t *testing.T) {
	e := newEnv(t, "agent.eth")
	ctx := t.Context()
	before := e.nonce(t, agentKey)

	cheap, err := New(ctx, Config{RPCURL: e.chain.URL(), Signer: NewSigner(agentKey), MaxFeePerGas: bigOne()})
	if err != nil {
		t.Fatal(err)
	}
	defer cheap.Close()
	if _, err := cheap.Write(ctx, "agent.eth", "x", ""); !errors.Is(err, ErrFeeTooHigh) {
		t.Fatalf("fee cap: %v", err)
	}
	tight, err := New(ctx, Config{RPCURL: e.chain.URL(), Signer: NewSigner(agentKey), GasCap: 30_000})
	if err != nil {
		t.Fatal(err)
	}
	defer tight.Close()
	if _, err := tight.Write(ctx, "agent.eth", "x", ""); !errors.Is(err, ErrGasCap) {
		t.Fatalf("gas cap: %v", err)
	}
	if after := e.nonce(t, agentKey); after != before {
		t.Fatal("a transaction was sent despite the limits")
	}

	// The chain is checked on first use, and a definitive mismatch is not
	// ErrUnavailable.
	wrong, err := New(ctx, Config{RPCURL: e.chain.URL(), ChainID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	if _, err := wrong.Read(ctx, "agent.eth"); !errors.Is(err, ErrWrongChain) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("chain id mismatch: %v", err)
	}
	if err := wrong.Ping(ctx); !errors.Is(err, ErrWrongChain) || wrong.ChainID() != nil {
		t.Fatalf("chain id mismatch on Ping: %v (chain id %v)", err, wrong.ChainID())
	}
	noReg, err := New(ctx, Config{RPCURL: e.chain.URL(), Registry: common.HexToAddress("0x1234")})
	if err != nil {
		t.Fatal(err)
	}
	defer noReg.Close()
	if err := noReg.Ping(ctx); !errors.Is(err, ErrNoRegistry) || !strings.Contains(err.Error(), "no contract") {
		t.Fatalf("missing registry: %v", err)
	}
	for _, bad := range []string{"", "ftp://x/", "http:///path", "http://[::1"} {
		if _, err := New(ctx, Config{RPCURL: bad}); err == nil {
			t.Errorf("RPC URL %q accepted", bad)
		}
	}
	// Waiting for a transaction that never comes times out with
	// context.DeadlineExceeded.
	short, err := New(ctx, Config{RPCURL: e.chain.URL(), Signer: NewSigner(agentKey), TxTimeout: 100 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	res, err := short.WaitTx(ctx, common.HexToHash("0x01"))
	if !errors.Is(err, context.DeadlineExceeded) || res.TxHash != common.HexToHash("0x01") {
		t.Fatalf("timeout: %+v, %v", res, err)
	}
}

func bigOne() *big.Int { return big.NewInt(1) }

// TestGappedTransactionIsDropped: a transaction sent with a nonce the
// chain is below (the client's counter ran ahead: the chain went back
// under it) waits for nonces that never come; the client notices in
// seconds, not at TxTimeout, fails it as ErrTxDropped (retryable), and the
// next write takes its nonce from the chain. So does
// ResyncNonce, before anything is sent.
func TestGappedTransactionIsDropped(t *testing.T) {
	e := newEnv(t, "agent.eth")
	ctx := t.Context()
	c := newClient(t, e.chain, agentKey)
	c.txTimeout = 5 * time.Minute // the default: what is not to be waited out
	if _, err := c.Write(ctx, "agent.eth", blobID(1), ""); err != nil {
		t.Fatal(err)
	}
	ahead := func(n uint64) {
		ci := c.info.Load()
		ci.nonces.mu.Lock()
		ci.nonces.next += n
		ci.nonces.mu.Unlock()
	}
	ahead(3)
	start := time.Now()
	_, err := c.Write(ctx, "agent.eth", blobID(2), blobID(1))
	// ErrTxDropped, not the timeout's DeadlineExceeded: noticed, not
	// waited out.
	if !errors.Is(err, ErrTxDropped) || !retryable(err) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a gapped transaction: %v", err)
	}
	t.Logf("a gapped transaction failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if _, err := c.Write(ctx, "agent.eth", blobID(2), blobID(1)); err != nil {
		t.Fatalf("the write after it: %v", err)
	}
	e.mustRead(t, "agent.eth", blobID(2))

	ahead(3)
	c.ResyncNonce()
	want := e.nonce(t, agentKey)
	res, err := c.Write(ctx, "agent.eth", blobID(3), blobID(2))
	if err != nil {
		t.Fatalf("the write after ResyncNonce: %v", err)
	}
	if tx, _, err := e.rpc.TransactionByHash(ctx, res.TxHash); err != nil || tx.Nonce() != want {
		t.Fatalf("the write after ResyncNonce was sent with nonce %v (%v), the chain's is %d", tx.Nonce(), err, want)
	}
	e.mustRead(t, "agent.eth", blobID(3))
}
