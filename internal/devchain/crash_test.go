package devchain

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	gethlog "github.com/ethereum/go-ethereum/log"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
)

// The crash test runs the chain in a child process: this test binary
// re-executed with these variables set.
const (
	envChildDir   = "HERMESD_DEVCHAIN_CHILD_DIR"   // data directory; set = run as the child
	envChildPause = "HERMESD_DEVCHAIN_CHILD_PAUSE" // log message at which the child stops dead
	envChildArm   = "HERMESD_DEVCHAIN_CHILD_ARM"   // "ready": pause only after Start returned
	// envCrashSeed replays a crash test run: the seed it printed.
	envCrashSeed = "HERMESD_DEVCHAIN_CRASH_SEED"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envChildDir); dir != "" {
		os.Exit(crashChild(dir, os.Getenv(envChildPause), os.Getenv(envChildArm) == "ready"))
	}
	os.Exit(m.Run())
}

// crashWriters are the accounts the crash test writes text records with;
// each owns its own name, funded at genesis.
const crashWriters = 3

func crashWriterKey(i int) *crashWriter {
	k := DeriveKey(fmt.Sprintf("crash-writer-%d", i))
	return &crashWriter{key: k, addr: crypto.PubkeyToAddress(k.PublicKey), name: fmt.Sprintf("w%d.crash.eth", i)}
}

func crashChildConfig(dir string, logger *slog.Logger) Config {
	cfg := Config{DataDir: dir, Logger: logger}
	for i := range crashWriters {
		w := crashWriterKey(i)
		cfg.Fund = append(cfg.Fund, w.addr)
		cfg.Names = append(cfg.Names, Name{Name: w.name, Owner: w.addr})
	}
	return cfg
}

// crashChild runs a persistent chain until its stdin closes (the parent
// kills it before), printing "ready URL" once Start returned. With pause
// set, the first log record with that message (after Start returned, with
// armLater) stops the logging goroutine for good and prints "paused": the
// parent then kills the process at exactly that point.
func crashChild(dir, pause string, armLater bool) int {
	parentGone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(parentGone)
	}()
	var once sync.Once
	h := &pauseHandler{pause: pause, stop: func() {
		once.Do(func() { fmt.Println("paused") })
		<-parentGone
		os.Exit(3)
	}}
	h.armed.Store(!armLater)
	gethlog.SetDefault(gethlog.NewLogger(h))
	c, err := Start(context.Background(), crashChildConfig(dir, slog.New(h)))
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	fmt.Printf("ready %s\n", c.URL())
	h.armed.Store(true)
	<-parentGone
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// pauseHandler is a slog handler that only watches for one message.
type pauseHandler struct {
	pause string
	armed atomic.Bool
	stop  func() // never returns
}

func (h *pauseHandler) Enabled(context.Context, slog.Level) bool { return h.pause != "" }
func (h *pauseHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.pause && h.armed.Load() {
		h.stop()
	}
	return nil
}
func (h *pauseHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *pauseHandler) WithGroup(string) slog.Handler      { return h }

// crashWriter is an account that writes its own name's text record.
type crashWriter struct {
	key  *ecdsa.PrivateKey
	addr common.Address
	name string
}

// mined is one transaction the child reported mined (its receipt came back).
type mined struct {
	hash   common.Hash
	writer int
	seq    int
	value  string
	block  uint64
	bhash  common.Hash
	cycle  int
}

// ledger collects what the test saw mined, across all children.
type ledger struct {
	mu      sync.Mutex
	txs     []mined
	grew    chan struct{} // closed (and replaced) by every add
	nextSeq [crashWriters]int
	maxSeq  [crashWriters]int // highest seq reported mined, -1 = none
}

func newLedger() *ledger {
	l := &ledger{grew: make(chan struct{})}
	for i := range l.maxSeq {
		l.maxSeq[i] = -1
	}
	return l
}

func (l *ledger) add(m mined) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.txs = append(l.txs, m)
	l.maxSeq[m.writer] = max(l.maxSeq[m.writer], m.seq)
	close(l.grew)
	l.grew = make(chan struct{})
}

func (l *ledger) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.txs)
}

// waitLen waits until the ledger holds n transactions.
func (l *ledger) waitLen(ctx context.Context, n int) error {
	for {
		l.mu.Lock()
		have, grew := len(l.txs), l.grew
		l.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d transactions mined: %w", have, n, ctx.Err())
		}
	}
}

func (l *ledger) snapshot() []mined {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]mined(nil), l.txs...)
}

// child is one running chain process.
type child struct {
	cmd    *exec.Cmd
	lines  chan string // stdout, closed at EOF
	stderr *capBuffer
	stdin  io.WriteCloser
	start  time.Time
}

func startChild(t *testing.T, dir string, plan killPlan) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	arm := ""
	if plan.afterReady {
		arm = "ready"
	}
	cmd.Env = append(os.Environ(), envChildDir+"="+dir, envChildPause+"="+plan.pause, envChildArm+"="+arm)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 16), stderr: &capBuffer{max: 64 << 10}, stdin: stdin}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.start = time.Now()
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { c.kill() })
	return c
}

// kill sends SIGKILL and reaps the process.
func (c *child) kill() {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Kill()
	for range c.lines { // drain to EOF before Wait
	}
	_ = c.cmd.Wait()
	_ = c.stdin.Close()
}

// next waits for the next stdout line; "" at EOF.
func (c *child) next(ctx context.Context) (string, error) {
	select {
	case l, ok := <-c.lines:
		if !ok {
			return "", nil
		}
		return l, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

type capBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.b); room > 0 {
		b.b = append(b.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}

// killPlan says when a cycle kills its child.
type killPlan struct {
	pause      string        // stop at this log message (after ready, with afterReady), then kill
	fromStart  time.Duration // kill this long after the process started (if pause == "" and !afterReady)
	afterReady bool          // verify, write, kill after delay
	delay      time.Duration
}

func (p killPlan) String() string {
	switch {
	case p.pause != "" && p.afterReady:
		return fmt.Sprintf("pause at %q after ready, kill %v later", p.pause, p.delay)
	case p.pause != "":
		return fmt.Sprintf("pause at %q", p.pause)
	case p.afterReady:
		return fmt.Sprintf("kill %v after ready", p.delay)
	default:
		return fmt.Sprintf("kill %v after exec", p.fromStart)
	}
}

// TestCrashKill9 is the acceptance test for crash safety: a chain in a
// child process is killed with SIGKILL at seeded random moments (and twice
// at fixed points of its very first run), restarted on the same data
// directory each time, and every transaction the test saw mined must still
// be there: receipt, block, and the text record's value at that block.
// Every restart must come up (no refusal, no hang). The seed fixes the
// kill plan (which kind of kill, which delay); where in the chain's work a
// delay lands depends on the machine, so a replay hits the same plan, not
// necessarily the same instruction.
func TestCrashKill9(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envCrashSeed); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", envCrashSeed, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with %s=%d)", seed, envCrashSeed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	const kills = 22
	plans := []killPlan{
		// The very first run, before anything is on disk ...
		{pause: "Writing custom genesis block"},
		// ... and again with the genesis written and the first block
		// (the name registrations) made head but not yet made durable.
		{pause: "Chain head was updated"},
	}
	const minWriting = 8 // cycles that write (and see minMinedPerCycle mined)
	writing := 0
	for len(plans) < kills {
		n := rng.IntN(10)
		if kills-len(plans) <= minWriting-writing {
			n = 9
		}
		switch {
		case n < 2: // anywhere in start-up, recovery included
			plans = append(plans, killPlan{fromStart: time.Duration(rng.IntN(400)) * time.Millisecond})
		case n < 4 || len(plans) == 2: // between a block's head marker and its sync
			plans = append(plans, killPlan{pause: "Chain head was updated", afterReady: true, delay: time.Duration(rng.IntN(50)) * time.Millisecond})
		default: // while transactions are being sealed
			plans = append(plans, killPlan{afterReady: true, delay: time.Duration(rng.IntN(200)) * time.Millisecond})
			writing++
		}
	}

	dir := t.TempDir()
	led := newLedger()
	begin := time.Now()
	beforeReady := 0
	for cycle, plan := range plans {
		if !runCycle(t, dir, cycle, plan, led) {
			beforeReady++
		}
		if t.Failed() {
			t.Fatalf("cycle %d (%v) failed; seed %d", cycle, plan, seed)
		}
	}
	// A last start must resume with everything.
	c := startChild(t, dir, killPlan{})
	url := waitReady(t, c, len(plans))
	verifyLedger(t, url, led, true)
	c.kill()
	txs := led.snapshot()
	t.Logf("%d kills (%d before the chain was ready), %d transactions reported mined, all present after restart; %v",
		kills, beforeReady, len(txs), time.Since(begin).Round(time.Millisecond))
	if len(txs) < minWriting*minMinedPerCycle {
		t.Errorf("only %d transactions were reported mined", len(txs))
	}
	if beforeReady < 2 {
		t.Errorf("only %d kills before the chain was ready", beforeReady)
	}
}

// readyTimeout bounds one start on a loaded machine: a start that takes
// longer is a hang.
const readyTimeout = 90 * time.Second

// minMinedPerCycle is how many transactions a writing cycle sees mined
// before its kill delay starts.
const minMinedPerCycle = 3

// waitReady waits for the child's "ready URL" line and fails on anything
// else.
func waitReady(t *testing.T, c *child, cycle int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	for {
		line, err := c.next(ctx)
		if err != nil {
			t.Fatalf("cycle %d: no ready line within %v (a hang): %v\nstderr: %s", cycle, readyTimeout, err, c.stderr)
		}
		switch {
		case strings.HasPrefix(line, "ready "):
			return strings.TrimPrefix(line, "ready ")
		case line == "":
			t.Fatalf("cycle %d: chain exited before ready\nstderr: %s", cycle, c.stderr)
		case strings.HasPrefix(line, "error "):
			t.Fatalf("cycle %d: chain refused to start: %s", cycle, line)
		}
	}
}

// runCycle starts a child on dir, kills it as planned and reports whether
// the child became ready before it was killed.
func runCycle(t *testing.T, dir string, cycle int, plan killPlan, led *ledger) bool {
	t.Helper()
	c := startChild(t, dir, plan)
	defer c.kill()
	switch {
	case plan.pause != "" && plan.afterReady:
		// Stopped inside the sealing of a block, after go-ethereum made it
		// head and before it is on disk: requests for it wait, and the
		// kill after a random delay must not lose anything reported.
		url := waitReady(t, c, cycle)
		verifyLedger(t, url, led, false)
		stop := writeUntilKilled(t, url, cycle, led)
		defer stop()
		ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
		defer cancel()
		if line, err := c.next(ctx); err != nil || line != "paused" {
			t.Fatalf("cycle %d: want paused, got %q, %v\nstderr: %s", cycle, line, err, c.stderr)
		}
		killAfter(c, plan.delay)
		stop()
		return true
	case plan.pause != "":
		ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
		defer cancel()
		for {
			line, err := c.next(ctx)
			if err != nil {
				t.Fatalf("cycle %d: child never reached %q: %v\nstderr: %s", cycle, plan.pause, err, c.stderr)
			}
			switch {
			case line == "paused":
				c.kill()
				return false
			case strings.HasPrefix(line, "ready "):
				t.Errorf("cycle %d: child was ready before it logged %q", cycle, plan.pause)
				return true
			case line == "" || strings.HasPrefix(line, "error "):
				t.Fatalf("cycle %d: child failed: %q\nstderr: %s", cycle, line, c.stderr)
			}
		}
	case plan.afterReady:
		url := waitReady(t, c, cycle)
		verifyLedger(t, url, led, false)
		// However slow the machine, every such cycle reports a few
		// transactions before the random delay starts.
		base := led.len()
		stop := writeUntilKilled(t, url, cycle, led)
		defer stop()
		ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
		defer cancel()
		if err := led.waitLen(ctx, base+minMinedPerCycle); err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		killAfter(c, plan.delay)
		stop()
		return true
	default:
		// Kill at a moment counted from exec, wherever start-up is by then.
		timer := time.NewTimer(max(0, plan.fromStart-time.Since(c.start)))
		defer timer.Stop()
		var stop func()
		for {
			select {
			case <-timer.C:
				c.kill()
				if stop != nil {
					stop()
				}
				return stop != nil
			case line, ok := <-c.lines:
				switch {
				case !ok || strings.HasPrefix(line, "error "):
					t.Fatalf("cycle %d: child failed: %q\nstderr: %s", cycle, line, c.stderr)
				case strings.HasPrefix(line, "ready "):
					stop = writeUntilKilled(t, strings.TrimPrefix(line, "ready "), cycle, led)
					defer stop()
				}
			}
		}
	}
}

// killAfter kills c after d: the randomised moment of the crash.
func killAfter(c *child, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	<-timer.C
	c.kill()
}

// writeUntilKilled starts one goroutine per writer that sets its text
// record again and again, recording every transaction whose receipt comes
// back. The returned func waits for them after the kill.
func writeUntilKilled(t *testing.T, url string, cycle int, led *ledger) (wait func()) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for w := range crashWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := writeLoop(ctx, url, cycle, w, led); err != nil && ctx.Err() == nil {
				t.Errorf("cycle %d writer %d: %v", cycle, w, err)
			}
		}()
	}
	var once sync.Once
	return func() {
		// Called once the child is dead (every call fails at once) or
		// on a failure (cancel ends calls to a paused child).
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
}

// writeLoop sends setText transactions from writer w until a call fails
// (the child was killed). Only a failure that cannot come from the kill is
// returned.
func writeLoop(ctx context.Context, url string, cycle, w int, led *ledger) error {
	client, err := ethclient.DialContext(ctx, url)
	if err != nil {
		return nil
	}
	defer client.Close()
	k := crashWriterKey(w)
	node := NameHash(k.name)
	arts, err := LoadArtifacts("")
	if err != nil {
		return err
	}
	nonce, err := client.PendingNonceAt(ctx, k.addr)
	if err != nil {
		return nil // killed already
	}
	signer := types.LatestSignerForChainID(big.NewInt(DefaultChainID))
	to := ResolverAddress
	for ctx.Err() == nil {
		led.mu.Lock()
		seq := led.nextSeq[w]
		led.nextSeq[w]++
		led.mu.Unlock()
		value := fmt.Sprintf("c%d-w%d-s%d", cycle, w, seq)
		data, err := arts.Resolver.ABI.Pack("setText", node, "agent-snapshot", value)
		if err != nil {
			return err
		}
		tx, err := types.SignNewTx(k.key, signer, &types.DynamicFeeTx{
			ChainID:   big.NewInt(DefaultChainID),
			Nonce:     nonce,
			GasTipCap: big.NewInt(params.GWei),
			GasFeeCap: big.NewInt(1000 * params.GWei),
			Gas:       200_000,
			To:        &to,
			Data:      data,
		})
		if err != nil {
			return err
		}
		if err := client.SendTransaction(ctx, tx); err != nil {
			if isConnErr(err) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("send: %w", err)
		}
		nonce++
		r, err := WaitReceipt(ctx, client, tx.Hash(), 5*time.Millisecond)
		if err != nil {
			if isConnErr(err) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("receipt: %w", err)
		}
		led.add(mined{hash: tx.Hash(), writer: w, seq: seq, value: value, block: r.BlockNumber.Uint64(), bhash: r.BlockHash, cycle: cycle})
	}
	return nil
}

// isConnErr reports an error of a call to a killed child.
func isConnErr(err error) bool {
	s := err.Error()
	for _, m := range []string{"connection refused", "connection reset", "EOF", "broken pipe", "context canceled",
		"server closed idle connection", "transport connection broken"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// verifyLedger checks every recorded transaction against the chain at url:
// receipt present and successful, in the same block, at or below the head,
// and the text record's value at that block as written. final also checks
// each writer's current value is its newest reported one or a later one.
func verifyLedger(t *testing.T, url string, led *ledger, final bool) {
	t.Helper()
	ctx := t.Context()
	client, err := rpc.DialContext(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var head hexutil.Uint64
	if err := client.CallContext(ctx, &head, "eth_blockNumber"); err != nil {
		t.Fatalf("eth_blockNumber: %v", err)
	}
	arts, err := LoadArtifacts("")
	if err != nil {
		t.Fatal(err)
	}
	txs := led.snapshot()
	const chunk = 200
	for lo := 0; lo < len(txs); lo += chunk {
		part := txs[lo:min(lo+chunk, len(txs))]
		receipts := make([]*types.Receipt, len(part))
		texts := make([]hexutil.Bytes, len(part))
		batch := make([]rpc.BatchElem, 0, 2*len(part))
		for i, m := range part {
			data, err := arts.Resolver.ABI.Pack("text", NameHash(crashWriterKey(m.writer).name), "agent-snapshot")
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch,
				rpc.BatchElem{Method: "eth_getTransactionReceipt", Args: []any{m.hash}, Result: &receipts[i]},
				rpc.BatchElem{Method: "eth_call", Args: []any{map[string]any{"to": ResolverAddress, "data": hexutil.Bytes(data)}, hexutil.Uint64(m.block)}, Result: &texts[i]},
			)
		}
		if err := client.BatchCallContext(ctx, batch); err != nil {
			t.Fatalf("verify batch: %v", err)
		}
		for i, m := range part {
			if err := batch[2*i].Error; err != nil {
				t.Errorf("tx %s (cycle %d, %s): receipt: %v", m.hash, m.cycle, m.value, err)
				continue
			}
			r := receipts[i]
			switch {
			case r == nil:
				t.Errorf("tx %s (cycle %d, %s) was reported mined in block %d but is gone (head %d)", m.hash, m.cycle, m.value, m.block, head)
				continue
			case r.Status != types.ReceiptStatusSuccessful:
				t.Errorf("tx %s: status %d", m.hash, r.Status)
			case r.BlockNumber.Uint64() != m.block || r.BlockHash != m.bhash:
				t.Errorf("tx %s: now in block %d %s, was reported in %d %s", m.hash, r.BlockNumber, r.BlockHash, m.block, m.bhash)
			case m.block > uint64(head):
				t.Errorf("tx %s: block %d above head %d", m.hash, m.block, head)
			}
			if err := batch[2*i+1].Error; err != nil {
				t.Errorf("tx %s: text at block %d: %v", m.hash, m.block, err)
				continue
			}
			got, err := unpackString(arts, texts[i])
			if err != nil || got != m.value {
				t.Errorf("tx %s: text at block %d = %q (%v), want %q", m.hash, m.block, got, err, m.value)
			}
		}
	}
	if !final {
		return
	}
	for w := range crashWriters {
		data, err := arts.Resolver.ABI.Pack("text", NameHash(crashWriterKey(w).name), "agent-snapshot")
		if err != nil {
			t.Fatal(err)
		}
		var out hexutil.Bytes
		if err := client.CallContext(ctx, &out, "eth_call", map[string]any{"to": ResolverAddress, "data": hexutil.Bytes(data)}, "latest"); err != nil {
			t.Fatalf("text of writer %d: %v", w, err)
		}
		got, err := unpackString(arts, out)
		if err != nil {
			t.Fatal(err)
		}
		led.mu.Lock()
		want := led.maxSeq[w]
		led.mu.Unlock()
		if want < 0 {
			continue
		}
		_, s, ok := strings.Cut(got, "-s")
		seq, err := strconv.Atoi(s)
		if !ok || err != nil || seq < want {
			t.Errorf("writer %d: current value %q is older than its newest reported write (seq %d)", w, got, want)
		}
	}
}

func unpackString(arts *Artifacts, out []byte) (string, error) {
	vals, err := arts.Resolver.ABI.Unpack("text", out)
	if err != nil {
		return "", err
	}
	if len(vals) != 1 {
		return "", errors.New("text: want one value")
	}
	s, ok := vals[0].(string)
	if !ok {
		return "", fmt.Errorf("text: %T", vals[0])
	}
	return s, nil
}
