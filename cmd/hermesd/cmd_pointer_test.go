package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/devchain"
)

// pointerChain starts a local chain where "agent.eth" and "bare.eth" belong
// to the returned key file's key.
func pointerChain(t *testing.T) (*devchain.Chain, string) {
	t.Helper()
	key := devchain.DeriveKey("cli-agent")
	addr := crypto.PubkeyToAddress(key.PublicKey)
	chain, err := devchain.Start(t.Context(), devchain.Config{
		Fund:  []common.Address{addr},
		Names: []devchain.Name{{Name: "agent.eth", Owner: addr}, {Name: "other.eth", Owner: addr}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { chain.Close() })
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("0x"+hex.EncodeToString(crypto.FromECDSA(key))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return chain, keyFile
}

// dashBlobID is a valid blob id (URL-safe base64 of 32 bytes) that begins
// with "-", as one in 64 real ones does.
func dashBlobID(seed byte) string {
	b := make([]byte, 32)
	b[0] = 0xf8 // the first six bits are 62: "-"
	for i := 1; i < len(b); i++ {
		b[i] = seed + byte(i)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// dashPatchID is a valid quilt patch id (the quilt's 32-byte blob id and
// six bytes of patch id, version 1) that begins with "-".
func dashPatchID(seed byte) string {
	b := make([]byte, 38)
	b[0] = 0xf8
	for i := 1; i < len(b); i++ {
		b[i] = seed + byte(i)
	}
	b[32] = 1
	return base64.RawURLEncoding.EncodeToString(b)
}

func runPointerCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(t.Context(), append([]string{"pointer"}, args...), strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestPointerGetSet(t *testing.T) {
	chain, keyFile := pointerChain(t)
	rpc := "--rpc=" + chain.URL()
	key := "--key-file=" + keyFile
	v1 := strings.Repeat("A", 43)
	v2 := "-" + strings.Repeat("b", 42) // blob ids may start with "-"

	// No record yet: exit code 4.
	_, _, err := runPointerCmd(t, "get", "agent.eth", rpc)
	if code := exitCode(err); code != exitNotFound {
		t.Fatalf("get without record: code %d, %v", code, err)
	}
	// set needs --expect or --force.
	_, _, err = runPointerCmd(t, "set", "agent.eth", v1, rpc, key)
	if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), "--expect") {
		t.Fatalf("set without --expect: code %d, %v", code, err)
	}

	out, _, err := runPointerCmd(t, "set", "Agent.ETH", v1, "--expect=", rpc, key, "--poll=20ms", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res pointerSetResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Name != "agent.eth" || res.Value != v1 || res.Previous != "" || res.Unchanged ||
		!strings.HasPrefix(res.TxHash, "0x") || res.GasUsed == 0 || res.BlockNumber == 0 {
		t.Fatalf("set result %+v", res)
	}

	out, _, err = runPointerCmd(t, "get", rpc, "agent.eth")
	if err != nil || out != v1+"\n" {
		t.Fatalf("get = %q, %v", out, err)
	}
	out, _, err = runPointerCmd(t, "get", "AGENT.eth", rpc, "--json")
	var got struct{ Name, Value string }
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got.Name != "agent.eth" || got.Value != v1 {
		t.Fatalf("get --json = %q, %v", out, err)
	}

	// A stale --expect is refused; nothing changes.
	_, _, err = runPointerCmd(t, "set", "agent.eth", "--expect=stale", rpc, key, "--", v2)
	if err == nil || !strings.Contains(err.Error(), "another writer") {
		t.Fatalf("stale expect: %v", err)
	}
	// The right one works, and a value starting with "-" goes after "--".
	out, _, err = runPointerCmd(t, "set", "agent.eth", "--expect", v1, rpc, key, "--poll=20ms", "--", v2)
	if err != nil || !strings.Contains(out, "gas used") || !strings.Contains(out, "tx 0x") {
		t.Fatalf("set: %q, %v", out, err)
	}
	// Same value again: nothing sent.
	out, _, err = runPointerCmd(t, "set", "agent.eth", "--force", rpc, key, "--", v2)
	if err != nil || !strings.HasPrefix(out, "unchanged") {
		t.Fatalf("unchanged set: %q, %v", out, err)
	}
	// Blob ids beginning with "-" where they are written, without "--":
	// as VALUE before and after the flags, and as --expect's value, apart
	// or after "=" (never "flag provided but not defined").
	d1, d2, dp := dashBlobID(1), dashBlobID(2), dashPatchID(3)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "agent.eth", d1, "--expect", v2, rpc, key, "--poll=20ms"}, d1},
		{[]string{"set", "agent.eth", "--expect", d1, d2, rpc, key, "--poll=20ms"}, d2},
		{[]string{"set", rpc, key, "--poll=20ms", "agent.eth", "--expect=" + d2, d1}, d1},
		{[]string{"set", "agent.eth", dp, "--expect", d1, rpc, key, "--poll=20ms"}, dp}, // a quilt patch id
		{[]string{"set", "agent.eth", "--expect", dp, d1, rpc, key, "--poll=20ms"}, d1},
	} {
		if _, stderr, err := runPointerCmd(t, tc.args...); err != nil {
			t.Fatalf("pointer %s: %v %s", strings.Join(tc.args, " "), err, stderr)
		}
		if out, _, _ := runPointerCmd(t, "get", "agent.eth", rpc); out != tc.want+"\n" {
			t.Fatalf("after pointer %s: the record is %q", strings.Join(tc.args, " "), out)
		}
	}
	// A mistyped flag is still a mistake, not a value.
	if _, stderr, err := runPointerCmd(t, "set", "agent.eth", d2, "--expcet", d1, rpc, key); exitCode(err) != exitUsage ||
		!strings.Contains(stderr, "flag provided but not defined: -expcet") {
		t.Fatalf("a mistyped flag: %v %s", err, stderr)
	}
	if _, _, err := runPointerCmd(t, "set", "agent.eth", "--expect", d1, rpc, key, "--poll=20ms", "--", v2); err != nil {
		t.Fatal(err)
	}
	// --force takes the current value as expected.
	if _, _, err := runPointerCmd(t, "set", "agent.eth", v1, "--force", rpc, key, "--poll=20ms"); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := runPointerCmd(t, "get", "agent.eth", rpc); out != v1+"\n" {
		t.Fatalf("after --force: %q", out)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"invalid name", []string{"get", "a_b.eth", rpc}, exitUsage},
		{"unregistered name", []string{"get", "nobody.eth", rpc}, exitNotFound},
		{"no name", []string{"get"}, exitUsage},
		{"unknown subcommand", []string{"frob"}, exitUsage},
		{"expect and force", []string{"set", "other.eth", "x", "--expect=", "--force", rpc, key}, exitUsage},
		{"no key", []string{"set", "other.eth", "x", "--expect=", rpc}, exitUsage},
		{"missing key file", []string{"set", "other.eth", "x", "--expect=", rpc, "--key-file=" + keyFile + ".missing"}, exitUsage},
		{"bad registry", []string{"get", "agent.eth", rpc, "--registry=0x1234"}, exitUsage},
		{"no registry there", []string{"get", "agent.eth", rpc, "--registry=0x0000000000000000000000000000000000001234"}, exitUsage},
		{"wrong chain", []string{"get", "agent.eth", rpc, "--chain-id=1"}, exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runPointerCmd(t, tc.args...)
			if code := exitCode(err); code != tc.code {
				t.Fatalf("code %d, want %d (%v)", code, tc.code, err)
			}
		})
	}
}

func TestPointerWithConfigFile(t *testing.T) {
	chain, keyFile := pointerChain(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hermesd.yml")
	body := fmt.Sprintf(`state_dir: %s
chain:
  rpc: %s
  chain_id: %d
  ens_registry: "%s"
  poll_interval: 20ms
  signer:
    file: %s
`, filepath.Join(dir, "state"), chain.URL(), chain.ChainID().Uint64(), chain.RegistryAddress().Hex(), keyFile)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runPointerCmd(t, "set", "other.eth", "blob-1", "--expect=", "-config", cfg); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runPointerCmd(t, "get", "other.eth", "-config", cfg); err != nil || out != "blob-1\n" {
		t.Fatalf("get = %q, %v", out, err)
	}
	// A flag overrides the file: the wrong chain id is refused.
	if _, _, err := runPointerCmd(t, "get", "other.eth", "-config", cfg, "--chain-id=5"); err == nil {
		t.Fatal("--chain-id did not override the config")
	}
}

// TestPointerGetResolves: pointer get resolves as ENS specifies (wildcard,
// CCIP-read, the Universal Resolver) and maps a refused offchain lookup
// to exit 7 and an unreachable gateway to exit 1.
func TestPointerGetResolves(t *testing.T) {
	if _, err := devchain.NeedCCIPArtifacts(); err != nil {
		t.Fatal(err)
	}
	chain, _ := pointerChain(t)
	ctx := t.Context()
	rpc := "--rpc=" + chain.URL()
	gwKey := devchain.DeriveKey("cli-gateway")
	records := &devchain.TextRecords{}
	records.Set("a.off.eth", "agent-snapshot", "offchain-blob")
	gw := httptest.NewServer(&devchain.Gateway{Key: gwKey, Answer: records.Answer})
	t.Cleanup(gw.Close)
	signer := crypto.PubkeyToAddress(gwKey.PublicKey)
	deploy := func(name, url string) {
		t.Helper()
		r, err := chain.DeployOffchainResolver(ctx, url, signer)
		if err != nil {
			t.Fatal(err)
		}
		if err := chain.RegisterWithResolver(ctx, name, chain.DevAddress(), r); err != nil {
			t.Fatal(err)
		}
	}
	deploy("off.eth", gw.URL+"/{sender}/{data}.json")
	deploy("bad.eth", "file:///etc/passwd")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + l.Addr().String() + "/{data}"
	l.Close()
	deploy("down.eth", downURL)
	ur, err := chain.DeployUniversalResolver(ctx)
	if err != nil {
		t.Fatal(err)
	}

	for _, via := range []string{"wildcard", "universal-resolver"} {
		args := []string{"get", "a.off.eth", rpc, "--json"}
		if via == "universal-resolver" {
			args = append(args, "--universal-resolver="+ur.Hex())
		}
		out, _, err := runPointerCmd(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		var res pointerGetResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if res.Value != "offchain-blob" || res.Via != via || res.Lookups != 1 || len(res.Gateways) != 1 || res.Gateways[0] != gw.URL {
			t.Fatalf("get via %s: %+v", via, res)
		}
	}
	_, _, err = runPointerCmd(t, "get", "a.bad.eth", rpc)
	if code := exitCode(err); code != exitOffchain || !strings.Contains(err.Error(), `scheme "file"`) || strings.Contains(err.Error(), "passwd") {
		t.Fatalf("file: gateway: code %d, %v", code, err)
	}
	_, _, err = runPointerCmd(t, "get", "a.down.eth", rpc)
	if code := exitCode(err); code != exitFailure || !strings.Contains(err.Error(), "gateway unreachable") {
		t.Fatalf("gateway down: code %d, %v", code, err)
	}
	_, _, err = runPointerCmd(t, "get", "a.off.eth", rpc, "--universal-resolver=0x12")
	if code := exitCode(err); code != exitUsage {
		t.Fatalf("bad --universal-resolver: code %d, %v", code, err)
	}
}
