package devchain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/params"
	ens "github.com/wealdtech/go-ens/v3"
)

func startChain(t *testing.T, cfg Config) *Chain {
	t.Helper()
	begin := time.Now()
	c, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("chain up in %v (%d names) at %s", time.Since(begin).Round(time.Millisecond), len(cfg.Names), c.URL())
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func TestChainConfigIsOsaka(t *testing.T) {
	cfg := ChainConfig(DefaultChainID)
	if cfg.BogotaTime != nil || cfg.AmsterdamTime != nil {
		t.Fatalf("Amsterdam/Bogota must be off: %v %v", cfg.AmsterdamTime, cfg.BogotaTime)
	}
	rules := cfg.Rules(big.NewInt(1), true, 1)
	if !rules.IsOsaka || !rules.IsPrague || rules.IsAmsterdam {
		t.Fatalf("rules: osaka=%v prague=%v amsterdam=%v", rules.IsOsaka, rules.IsPrague, rules.IsAmsterdam)
	}
	if got := cfg.LatestFork(1).String(); got != "BPO2" {
		t.Fatalf("latest fork %s, want BPO2 (mainnet today)", got)
	}
	// The shared dev config must not have been modified.
	if params.AllDevChainProtocolChanges.BogotaTime == nil {
		t.Fatal("params.AllDevChainProtocolChanges was mutated")
	}
}

// storages are the two kinds of chain every behaviour is tested on.
var storages = []struct {
	name string
	disk bool
}{{"memory", false}, {"disk", true}}

func TestStartRegisterAndUseENS(t *testing.T) {
	for _, st := range storages {
		t.Run(st.name, func(t *testing.T) { testRegisterAndUseENS(t, st.disk) })
	}
}

func testRegisterAndUseENS(t *testing.T, disk bool) {
	alice := DeriveKey("alice")
	aliceAddr := crypto.PubkeyToAddress(alice.PublicKey)
	bob := crypto.PubkeyToAddress(DeriveKey("bob").PublicKey)
	cfg := Config{
		Fund: []common.Address{aliceAddr},
		Names: []Name{
			{Name: "agent.eth", Owner: aliceAddr},
			{Name: "Auditor.Example.eth", Owner: bob},
			{Name: "example.eth", Owner: aliceAddr},
		},
	}
	if disk {
		cfg.DataDir = t.TempDir()
	}
	c := startChain(t, cfg)
	ctx := t.Context()
	// A fresh HTTP client, as hermesd would use.
	client, err := ethclient.DialContext(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if !strings.HasPrefix(c.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %s is not loopback HTTP", c.URL())
	}
	id, err := client.ChainID(ctx)
	if err != nil || id.Uint64() != DefaultChainID {
		t.Fatalf("chain id %v, %v", id, err)
	}

	// Plain go-ens at the canonical address works.
	reg, err := ens.NewRegistry(client)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]common.Address{
		"":                    c.DevAddress(),
		"eth":                 c.DevAddress(),
		"agent.eth":           aliceAddr,
		"example.eth":         aliceAddr,
		"auditor.example.eth": bob,
	} {
		got, err := reg.Owner(name)
		if err != nil || got != want {
			t.Errorf("owner(%q) = %s, %v; want %s", name, got, err, want)
		}
	}
	resAddr, err := reg.ResolverAddress("auditor.example.eth")
	if err != nil || resAddr != ResolverAddress {
		t.Fatalf("resolver = %s, %v", resAddr, err)
	}

	// The owner can set a text record on the genesis resolver.
	res, err := ens.NewResolver(client, "agent.eth")
	if err != nil {
		t.Fatal(err)
	}
	data, err := c.Artifacts().Resolver.ABI.Pack("setText", NameHash("agent.eth"), "agent-snapshot", "blob-1")
	if err != nil {
		t.Fatal(err)
	}
	rcpt, err := c.Transact(ctx, alice, Call{To: &resAddr, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := res.Text("agent-snapshot"); err != nil || got != "blob-1" {
		t.Fatalf("text = %q, %v", got, err)
	}
	// Mainnet (Osaka) pricing: ens.md measured 101,919 for a first write of a
	// 43-char value; this 6-char value takes one slot less.
	t.Logf("first setText (6-char value): %d gas", rcpt.GasUsed)
	if rcpt.GasUsed > 120_000 {
		t.Fatalf("setText used %d gas: not Osaka pricing (Bogota charges ~366k)", rcpt.GasUsed)
	}

	// A non-owner's transaction is mined with status 0 when forced through.
	bobKey := DeriveKey("bob")
	if err := c.Fund(ctx, nil, bob); err != nil {
		t.Fatal(err)
	}
	_, err = c.Transact(ctx, bobKey, Call{To: &resAddr, Data: data, Gas: 200_000})
	var rev *RevertedError
	if !errors.Is(err, ErrReverted) || !errors.As(err, &rev) || rev.Receipt.Status != 0 {
		t.Fatalf("non-owner setText: %v", err)
	}
}

func TestRegisterRefusesForeignParent(t *testing.T) {
	alice := crypto.PubkeyToAddress(DeriveKey("alice").PublicKey)
	c := startChain(t, Config{Names: []Name{{Name: "agent.eth", Owner: alice}}})
	err := c.Register(t.Context(), "sub.agent.eth", alice)
	if err == nil || !strings.Contains(err.Error(), "owned by") {
		t.Fatalf("err = %v", err)
	}
	if err := c.Register(t.Context(), "a_b.eth", alice); err == nil {
		t.Fatal("invalid name accepted")
	}
}

// The genesis resolver must be indistinguishable from one deployed by a
// transaction: same runtime code, same storage.
func TestGenesisResolverMatchesDeployed(t *testing.T) {
	c := startChain(t, Config{})
	ctx := t.Context()
	deployed, err := c.DeployResolver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Client().CodeAt(ctx, ResolverAddress, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Client().CodeAt(ctx, deployed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("runtime code differs: genesis %d bytes, deployed %d bytes", len(a), len(b))
	}
	if !bytes.Equal(a, c.Artifacts().Resolver.DeployedBytecode) {
		t.Fatal("genesis code differs from the artifact's deployedBytecode")
	}
	gen, err := resolverGenesis(c.Artifacts())
	if err != nil {
		t.Fatal(err)
	}
	if len(gen.storage) == 0 {
		t.Fatal("constructor wrote no storage")
	}
	for slot, want := range gen.storage {
		got, err := c.Client().StorageAt(ctx, deployed, slot, nil)
		if err != nil || common.BytesToHash(got) != want {
			t.Fatalf("slot %s: deployed %x, genesis %s (%v)", slot, got, want, err)
		}
	}
	// And the registry slot is what the real constructor writes.
	reg, err := construct(append([]byte{}, c.Artifacts().Registry.Bytecode...))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(reg.code, c.Artifacts().Registry.DeployedBytecode) {
		t.Fatal("registry runtime code differs from deployedBytecode")
	}
	if len(reg.storage) != 1 || reg.storage[rootOwnerSlot] != common.BytesToHash(genesisDeployer.Bytes()) {
		t.Fatalf("registry constructor storage = %v", reg.storage)
	}
}

func TestFixedPortAndClose(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c := startChain(t, Config{ChainID: 31337, Port: port})
	if c.ChainID().Uint64() != 31337 {
		t.Fatal(c.ChainID())
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d", port); c.URL() != want {
		t.Fatalf("URL %s, want %s", c.URL(), want)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	client, err := ethclient.DialContext(ctx, c.URL())
	if err == nil {
		_, err = client.ChainID(ctx)
		client.Close()
	}
	if err == nil {
		t.Fatal("RPC still answers after Close")
	}
}

func TestLoadArtifactsErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadArtifacts(dir)
	if err == nil || !strings.Contains(err.Error(), "scripts/fetch-ens-artifacts.sh") {
		t.Fatalf("missing artifacts: %v", err)
	}
	// A different build is refused.
	src, err := DefaultArtifactsDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{RegistryFile, ResolverFile} {
		raw, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		raw = bytes.Replace(raw, []byte(`"bytecode": "0x60`), []byte(`"bytecode": "0x61`), 1)
		dir2 := filepath.Join(dir, "tampered")
		os.MkdirAll(dir2, 0o755)
		if err := os.WriteFile(filepath.Join(dir2, f), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = LoadArtifacts(filepath.Join(dir, "tampered"))
	if err == nil || !strings.Contains(err.Error(), "pinned") {
		t.Fatalf("tampered artifacts: %v", err)
	}
	t.Setenv(EnvArtifacts, src)
	if d, err := DefaultArtifactsDir(); err != nil || d != src {
		t.Fatalf("env override: %s %v", d, err)
	}
}

// BenchmarkStart measures what a test pays for its own chain: start (genesis
// with registry and resolver), register two names, close. disk-reopen is a
// persistent chain started again on its data directory (names already
// registered), as the devnet does.
func BenchmarkStart(b *testing.B) {
	owner := crypto.PubkeyToAddress(DeriveKey("alice").PublicKey)
	if _, err := LoadArtifacts(""); err != nil { // parsed once per process
		b.Fatal(err)
	}
	names := []Name{{Name: "agent.eth", Owner: owner}, {Name: "auditor.example.eth", Owner: owner}}
	for _, tc := range []struct {
		name  string
		names []Name
		dir   func() string
	}{
		{"names=0", nil, func() string { return "" }},
		{"names=2", names, func() string { return "" }},
		{"disk-new/names=2", names, func() string { return b.TempDir() }},
		{"disk-reopen/names=2", names, sync.OnceValue(func() string { return b.TempDir() })},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				c, err := Start(context.Background(), Config{Names: tc.names, DataDir: tc.dir()})
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBlock measures one transaction sealed in its own block with its
// receipt back: what a pointer write costs on the devnet. On disk that
// includes the fsync of the database's write-ahead log.
func BenchmarkBlock(b *testing.B) {
	alice := DeriveKey("alice")
	aliceAddr := crypto.PubkeyToAddress(alice.PublicKey)
	for _, st := range storages {
		b.Run(st.name, func(b *testing.B) {
			cfg := Config{Fund: []common.Address{aliceAddr}, Names: []Name{{Name: "agent.eth", Owner: aliceAddr}}}
			if st.disk {
				cfg.DataDir = b.TempDir()
			}
			c, err := Start(b.Context(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			res := ResolverAddress
			node := NameHash("agent.eth")
			i := 0
			for b.Loop() {
				i++
				data, err := c.Artifacts().Resolver.ABI.Pack("setText", node, "agent-snapshot", fmt.Sprintf("blob-%d", i))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Transact(b.Context(), alice, Call{To: &res, Data: data, Gas: 200_000}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
