package devnet

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/ens"
)

// A first run killed right after creating the snapshot key file leaves it
// empty; the next start must make a key, and must never replace a real one.
func TestStartAfterKeyFileCrash(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keys, "snapshot.key"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *Devnet {
		t.Helper()
		d, err := Start(t.Context(), Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := start()
	k, err := cipher.ReadKeyFile(d.KeyPath)
	if err != nil {
		t.Fatalf("the key after a restart: %v", err)
	}
	start()
	if k2, err := cipher.ReadKeyFile(d.KeyPath); err != nil || k2.Secret() != k.Secret() {
		t.Fatalf("a restart replaced the key: %v", err)
	}
}

// The L2 layout: an agent's record on a second chain, reached from L1
// through ENS's OffchainResolver and the devnet's gateway. The generated
// configuration writes it there (ens.records); a restart of a persistent
// devnet keeps the OffchainResolver it made, and its gateway can lag.
func TestL2Layout(t *testing.T) {
	dir := t.TempDir()
	opts := Options{
		Dir:          dir,
		ChainDataDir: filepath.Join(dir, "chain"),
		Agents: []Agent{
			{ID: "auditor", ENSName: "auditor.hermes.eth"},
			{ID: "scout", ENSName: "scout.l2.hermes.eth", OnL2: true},
		},
		L2: &L2Options{DataDir: filepath.Join(dir, "chain-l2"), GatewayPort: freePort(t)},
	}
	d, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := d.Config.Agent("scout")
	if err != nil {
		t.Fatal(err)
	}
	r := d.Config.RecordsOf(ac)
	if r == nil || r.ID != L2RecordsID || r.ChainID != DefaultL2ChainID || r.RPC != d.L2.RPC() ||
		!strings.EqualFold(r.Resolver, d.L2.Resolver().Hex()) || r.VisibilityTimeout.D() != DefaultL2Visibility {
		t.Fatalf("scout's records: %+v", r)
	}
	if aud, _ := d.Config.Agent("auditor"); d.Config.RecordsOf(aud) != nil {
		t.Fatal("auditor's record is not on L1")
	}

	const name = "scout.l2.hermes.eth"
	ctx := t.Context()
	if err := d.L2.Chain.SetText(ctx, d.SignerKey, d.L2.Resolver(), name, ens.TextKey, "one"); err != nil {
		t.Fatal(err)
	}
	read := func(d *Devnet) string {
		t.Helper()
		c, err := ens.New(ctx, ens.Config{RPCURL: d.Chain.URL()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		res, err := c.Resolve(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if res.Via != ens.PathWildcard || res.Lookups != 1 || res.Resolver != d.L2.OffchainResolver {
			t.Fatalf("resolution: %+v", res)
		}
		return res.Value
	}
	if v := read(d); v != "one" {
		t.Fatalf("through L1: %q", v)
	}
	d.L2.Records.SetLag(1)
	if err := d.L2.Chain.SetText(ctx, d.SignerKey, d.L2.Resolver(), name, ens.TextKey, "two"); err != nil {
		t.Fatal(err)
	}
	if v := read(d); v != "one" {
		t.Fatalf("lagging: %q", v)
	}
	off := d.L2.OffchainResolver
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d, err = Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if v := read(d); v != "two" {
		t.Fatalf("after a restart: %q", v)
	}
	if d.L2.OffchainResolver != off {
		t.Errorf("a restart deployed another OffchainResolver (%s, was %s) for the same gateway", d.L2.OffchainResolver, off)
	}
}

// freePort is a port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
