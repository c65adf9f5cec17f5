package devchain

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/rawdb"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethdb"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/rpc"
)

// A persistent chain started again on its directory is the same network at
// the same head, with its records, and goes on mining.
func TestRestartResumes(t *testing.T) {
	dir := t.TempDir()
	alice := DeriveKey("alice")
	aliceAddr := crypto.PubkeyToAddress(alice.PublicKey)
	cfg := Config{DataDir: dir, Fund: []common.Address{aliceAddr}, Names: []Name{{Name: "agent.eth", Owner: aliceAddr}}}
	ctx := t.Context()

	c, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	setText(t, c, alice, "agent.eth", "blob-1")
	genesis1, head1 := headers(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = startChain(t, cfg) // registers agent.eth again: one more block
	genesis2, head2 := headers(t, c)
	if genesis2 != genesis1 {
		t.Fatalf("genesis %s after restart, was %s: another network", genesis2, genesis1)
	}
	if head2 < head1 {
		t.Fatalf("head %d after restart, was %d", head2, head1)
	}
	if got := text(t, c, "agent.eth"); got != "blob-1" {
		t.Fatalf("text after restart = %q", got)
	}
	setText(t, c, alice, "agent.eth", "blob-2")
	if got := text(t, c, "agent.eth"); got != "blob-2" {
		t.Fatalf("text = %q", got)
	}
}

func setText(t *testing.T, c *Chain, key *ecdsa.PrivateKey, name, value string) {
	t.Helper()
	data, err := c.Artifacts().Resolver.ABI.Pack("setText", NameHash(name), "agent-snapshot", value)
	if err != nil {
		t.Fatal(err)
	}
	res := ResolverAddress
	if _, err := c.Transact(t.Context(), key, Call{To: &res, Data: data}); err != nil {
		t.Fatal(err)
	}
}

func text(t *testing.T, c *Chain, name string) string {
	t.Helper()
	data, err := c.Artifacts().Resolver.ABI.Pack("text", NameHash(name), "agent-snapshot")
	if err != nil {
		t.Fatal(err)
	}
	var out hexutil.Bytes
	if err := c.Client().Client().CallContext(t.Context(), &out, "eth_call", map[string]any{"to": ResolverAddress, "data": hexutil.Bytes(data)}, "latest"); err != nil {
		t.Fatal(err)
	}
	s, err := unpackString(c.Artifacts(), out)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func headers(t *testing.T, c *Chain) (genesis common.Hash, head uint64) {
	t.Helper()
	g, err := c.Client().HeaderByNumber(t.Context(), common.Big0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Client().BlockNumber(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return g.Hash(), h
}

// editDB opens the chain database of a stopped chain in dir.
func editDB(t *testing.T, dir string, edit func(db ethdb.Database)) {
	t.Helper()
	stack, err := node.New(&node.Config{Name: instanceName, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	db, err := stack.OpenDatabaseWithOptions("chaindata", node.DatabaseOptions{Cache: 16})
	if err != nil {
		t.Fatal(err)
	}
	edit(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func headOf(t *testing.T, db ethdb.Database) (common.Hash, uint64, common.Hash) {
	t.Helper()
	hash := rawdb.ReadHeadBlockHash(db)
	n, ok := rawdb.ReadHeaderNumber(db, hash)
	if !ok {
		t.Fatal("no head")
	}
	return hash, n, rawdb.ReadHeader(db, hash, n).Root
}

// Directories that cannot resume at their head are refused with one line
// that names the directory and says what to do, every time (nothing is
// silently repaired), and never by rewinding.
func TestStartRefusesDamagedDataDir(t *testing.T) {
	owner := crypto.PubkeyToAddress(DeriveKey("alice").PublicKey)
	made := func(t *testing.T) string {
		dir := t.TempDir()
		c, err := Start(t.Context(), Config{DataDir: dir, Names: []Name{{Name: "agent.eth", Owner: owner}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T) string
		cfg     Config
		is      error // the sentinel the error matches
		want    string
	}{
		{
			name: "path scheme of an older hermesd",
			prepare: func(t *testing.T) string {
				dir := t.TempDir()
				makeOldChain(t, dir)
				return dir
			},
			is:   ErrDamaged,
			want: "path state scheme",
		},
		{
			name: "head state missing",
			prepare: func(t *testing.T) string {
				dir := made(t)
				editDB(t, dir, func(db ethdb.Database) {
					_, _, root := headOf(t, db)
					rawdb.DeleteLegacyTrieNode(db, root)
				})
				return dir
			},
			is:   ErrDamaged,
			want: "state of head block",
		},
		{
			name: "head body missing",
			prepare: func(t *testing.T) string {
				dir := made(t)
				editDB(t, dir, func(db ethdb.Database) {
					hash, n, _ := headOf(t, db)
					rawdb.DeleteBody(db, hash, n)
				})
				return dir
			},
			is:   ErrDamaged,
			want: "body is missing",
		},
		{
			name: "refused before",
			prepare: func(t *testing.T) string {
				dir := made(t)
				if err := markDamaged(dir, "go-ethereum moved its head from block 9 to block 2 on opening"); !errors.Is(err, ErrDamaged) {
					t.Fatal(err)
				}
				return dir
			},
			is:   ErrDamaged,
			want: "moved its head from block 9",
		},
		{
			name:    "another genesis",
			prepare: made,
			cfg:     Config{Fund: []common.Address{owner}},
			is:      ErrOtherChain,
			want:    "has genesis",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.prepare(t)
			cfg := tc.cfg
			cfg.DataDir = dir
			for range 2 {
				c, err := Start(t.Context(), cfg)
				if err == nil {
					c.Close()
					t.Fatal("started")
				}
				msg := err.Error()
				if !errors.Is(err, tc.is) || !strings.Contains(msg, tc.want) ||
					!strings.Contains(msg, "delete "+dir+" to start over") || strings.Contains(msg, "\n") {
					t.Fatalf("err = %v", err)
				}
			}
		})
	}
}

// makeOldChain writes a chain as hermesd did before crash safety:
// go-ethereum's defaults, the path state scheme.
func makeOldChain(t *testing.T, dir string) {
	t.Helper()
	arts, err := LoadArtifacts("")
	if err != nil {
		t.Fatal(err)
	}
	dev := crypto.PubkeyToAddress(DevKey().PublicKey)
	gen, err := genesis(DefaultChainID, arts, dev, []common.Address{dev}, DefaultBalance, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	stack, err := node.New(&node.Config{Name: instanceName, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	conf := ethconfig.Defaults
	conf.Genesis = gen
	conf.LogNoHistory = true
	conf.TxPool.Journal = ""
	if _, err := eth.New(stack, &conf); err != nil {
		t.Fatal(err)
	}
	if err := stack.Close(); err != nil {
		t.Fatal(err)
	}
}

// Two chains never share a data directory.
func TestDataDirIsLocked(t *testing.T) {
	dir := t.TempDir()
	startChain(t, Config{DataDir: dir})
	c, err := Start(t.Context(), Config{DataDir: dir})
	if err == nil {
		c.Close()
		t.Fatal("second chain started on the same directory")
	}
	if !errors.Is(err, node.ErrDatadirUsed) {
		t.Fatalf("err = %v", err)
	}
}

// No request runs between a block becoming head and the block being on
// disk.
func TestDurabilityHoldsRequestsUntilSynced(t *testing.T) {
	var synced atomic.Bool
	d := &durability{sync: func() error { synced.Store(true); return nil }}
	inCommit, release := make(chan struct{}), make(chan struct{})
	sealed := make(chan error, 1)
	go func() {
		sealed <- d.seal(func() bool {
			close(inCommit)
			<-release
			return true
		})
	}()
	<-inCommit
	saw := make(chan bool, 1)
	go func() {
		if err := d.view(func() { saw <- synced.Load() }); err != nil {
			t.Error(err)
			saw <- false
		}
	}()
	close(release)
	if !<-saw {
		t.Fatal("a request ran between a block and its sync")
	}
	if err := <-sealed; err != nil {
		t.Fatal(err)
	}
	// A head that did not move needs no sync.
	synced.Store(false)
	if err := d.seal(func() bool { return false }); err != nil || synced.Load() {
		t.Fatalf("seal without a block: %v, synced %v", err, synced.Load())
	}
}

// A failed sync stops the chain: every request is answered 503 with the
// reason, rather than showing a block that is not on disk.
func TestFailedSyncStopsServing(t *testing.T) {
	d := &durability{sync: func() error { return errors.New("disk on fire") }}
	f, err := startFront(0, []rpc.API{{Namespace: "web3", Service: &web3API{version: "v"}}}, d)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	if code, body := post(t, f.url, "", `{"jsonrpc":"2.0","id":1,"method":"web3_clientVersion"}`); code != 200 || !strings.Contains(body, `"v"`) {
		t.Fatalf("before: %d %s", code, body)
	}
	if err := d.seal(func() bool { return true }); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("seal: %v", err)
	}
	if err := d.seal(func() bool { t.Error("sealed after a failed sync"); return true }); err == nil {
		t.Fatal("second seal succeeded")
	}
	code, body := post(t, f.url, "", `{"jsonrpc":"2.0","id":1,"method":"web3_clientVersion"}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "disk on fire") {
		t.Fatalf("after: %d %s", code, body)
	}
}

func post(t *testing.T, url, host, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// The chain's own HTTP server behaves as geth's --http with --http.api
// eth,net,web3 and --http.vhosts localhost, on both kinds of chain.
func TestRPCServer(t *testing.T) {
	for _, st := range storages {
		t.Run(st.name, func(t *testing.T) {
			cfg := Config{ChainID: 4242}
			if st.disk {
				cfg.DataDir = t.TempDir()
			}
			c := startChain(t, cfg)
			call := func(method string, params ...any) string {
				p, _ := json.Marshal(params)
				if params == nil {
					p = []byte("[]")
				}
				code, body := post(t, c.URL(), "", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, p))
				if code != http.StatusOK {
					t.Fatalf("%s: %d %s", method, code, body)
				}
				return body
			}
			if b := call("net_version"); !strings.Contains(b, `"result":"4242"`) {
				t.Errorf("net_version: %s", b)
			}
			if b := call("web3_sha3", "0x68656c6c6f"); !strings.Contains(b, hexutil.Encode(crypto.Keccak256([]byte("hello")))) {
				t.Errorf("web3_sha3: %s", b)
			}
			if b := call("web3_clientVersion"); !strings.Contains(b, `"result":"`) {
				t.Errorf("web3_clientVersion: %s", b)
			}
			for _, m := range []string{"admin_nodeInfo", "debug_setHead", "miner_setGasPrice", "engine_exchangeCapabilities"} {
				if b := call(m); !strings.Contains(b, "does not exist") {
					t.Errorf("%s is served: %s", m, b)
				}
			}
			for _, tc := range []struct {
				name, url, host, body string
				want                  int
			}{
				{"localhost", c.URL(), "localhost:8545", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`, http.StatusOK},
				{"foreign host", c.URL(), "evil.example:8545", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`, http.StatusForbidden},
				{"other path", c.URL() + "/x", "", `{}`, http.StatusNotFound},
				{"body too large", c.URL(), "", `{"x":"` + strings.Repeat("a", httpBodyLimit) + `"}`, http.StatusRequestEntityTooLarge},
			} {
				if code, body := post(t, tc.url, tc.host, tc.body); code != tc.want {
					t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
				}
			}
			// Batches within geth's limits are served.
			var batch bytes.Buffer
			batch.WriteString("[")
			for i := range 100 {
				if i > 0 {
					batch.WriteString(",")
				}
				fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":%d,"method":"eth_blockNumber"}`, i)
			}
			batch.WriteString("]")
			if code, body := post(t, c.URL(), "", batch.String()); code != 200 || strings.Count(body, `"result"`) != 100 {
				t.Errorf("batch: %d %.200s", code, body)
			}
		})
	}
}

func TestLocalHost(t *testing.T) {
	for host, want := range map[string]bool{
		"":                   true,
		"127.0.0.1:8545":     true,
		"127.0.0.1":          true,
		"[::1]:8545":         true,
		"::1":                true,
		"localhost":          true,
		"LocalHost:1":        true,
		"evil.example":       false,
		"evil.example:8545":  false,
		"localhost.evil:1":   false,
		"127.0.0.1.nip.io:1": false,
	} {
		if got := localHost(host); got != want {
			t.Errorf("localHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// FuzzLocalHost: the Host header is client input; whatever it holds, a
// name other than localhost never passes (an IP address has no letters
// beyond hex digits).
func FuzzLocalHost(f *testing.F) {
	for _, s := range []string{"", "localhost:1", "[::1]:2", "a.b:3", "::", "[", "1.2.3.4", "localhost:", "[fe80::1%eth0]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if !localHost(host) {
			return
		}
		// The port is not checked (nor is it by geth): look before it.
		name := strings.ToLower(host)
		if i := strings.LastIndexByte(name, ':'); i >= 0 {
			name = name[:i]
		}
		if strings.ContainsAny(strings.ReplaceAll(name, "localhost", ""), "ghijklmnopqrstuvwxyz") {
			t.Fatalf("localHost(%q) accepted a name", host)
		}
	})
}

func TestDamagedMarkerIsBounded(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("x", 10*maxDamagedFile)
	if err := os.WriteFile(filepath.Join(dir, damagedFile), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	err := checkDamagedMarker(dir)
	var d *DamagedError
	if !errors.As(err, &d) || len(d.Reason) != maxDamagedFile {
		t.Fatalf("err = %v", err)
	}
}
