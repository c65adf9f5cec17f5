package fleettest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/pointertest"
	"github.com/hermesd/hermesd/internal/wait"
)

// fakeHermesd stands in for the daemon where the harness itself is under
// test: a process that runs until signalled.
func fakeHermesd(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hermesd")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexec sleep 3600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// procState is the state letter of a process in /proc (T: stopped).
func procState(t *testing.T, n *Node) string {
	t.Helper()
	n.mu.Lock()
	pid := n.proc.Process.Pid
	n.mu.Unlock()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

// TestHarness runs the harness on the real world with a stand-in daemon
// and plays a node's part by hand: a lease and an ownership in etcd, a
// Walrus store and an ENS write through the node's proxies. The run reads
// back with every write attributed to the node and passes the checker;
// the same writes after the lease was revoked are caught. Meanwhile the
// recorder follows etcd through a member's loss and a majority's, and the
// node's process is paused, resumed, killed and restarted.
func TestHarness(t *testing.T) {
	t.Parallel() // light (no daemon): beside TestFleetOwnsAndBalances
	c := Start(t, Options{Nodes: 1, Agents: 3, LeaseTTL: 2 * time.Second, Binary: fakeHermesd(t)})
	n := c.Node(1)
	if n.L2 == nil || !n.Running() {
		t.Fatalf("node-1: L2 proxy %v, running %v", n.L2, n.Running())
	}
	_, cs := LoadNodeConfig(t, n.Config.ConfigPath)
	if cs.Node != "node-1" || cs.Fleet != "fleettest" || !slices.Equal(cs.Endpoints, c.Etcd.Endpoints()) || cs.LeaseTTL != "2s" ||
		!slices.Contains(cs.Hooks.OnAcquire, "{agent}") {
		t.Fatalf("node-1's cluster section: %+v", cs)
	}

	t.Log("process control")
	n.Pause()
	wait.For(t, "node-1 stopped", func() bool { return procState(t, n) == "T" })
	n.Resume()
	wait.For(t, "node-1 running again", func() bool { return procState(t, n) != "T" })
	n.Kill9()
	if n.Running() || len(c.deaths) != 1 || c.deaths[0].Node != "node-1" {
		t.Fatalf("after kill -9: running %v, deaths %v", n.Running(), c.deaths)
	}
	n.Start()
	n.Stop()
	if n.Running() {
		t.Fatal("running after Stop")
	}

	t.Log("a node's part by hand")
	ctx := t.Context()
	lease, err := c.etcd.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	put := func(k, v string, opts ...clientv3.OpOption) *clientv3.PutResponse {
		t.Helper()
		// A write in flight when a member crashes fails (etcd does not
		// know whether it applied); a node would retry it, and so does
		// the test (a put is idempotent).
		var r *clientv3.PutResponse
		var err error
		wait.Within(t, time.Minute, "a put of "+k, func() bool {
			r, err = c.etcd.Put(ctx, c.prefix+k, v, opts...)
			return err == nil
		})
		return r
	}
	put("nodes/node-1", `{"node":"node-1"}`, clientv3.WithLease(lease.ID))
	own := put("owners/agent-001", `{"node":"node-1"}`, clientv3.WithLease(lease.ID))
	keep, err := c.etcd.KeepAlive(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	c.WaitState(time.Minute, "node-1 owning agent-001", func(st State) bool { return st.Owners["agent-001"] == "node-1" })
	token := c.State().Tokens["agent-001"]
	if token != own.Header.Revision {
		t.Fatalf("token %d, want the owner key's create revision %d", token, own.Header.Revision)
	}
	store := func() {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, n.Walrus+"/v1/blobs?epochs=1", bytes.NewReader([]byte("a blob "+time.Now().String())))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("store through the proxy: %s", resp.Status)
		}
	}
	publish := func(value, expected string) {
		t.Helper()
		w := pointertest.Writer(t, n.L1.URL, c.Devnet.SignerKey)
		if _, err := w.WriteMany(ctx, []ens.Update{{Name: "agent-001.hermes.eth", Value: value, Expected: expected}}); err != nil {
			t.Fatal(err)
		}
	}
	store()
	publish("s1", "")
	head, _ := json.Marshal(map[string]any{"value": "s1", "bundleHash": "0x01", "node": "node-1", "token": token})
	put("heads/agent-001", string(head))
	c.WaitState(time.Minute, "the first head", func(st State) bool { return st.Heads["agent-001"].Value == "s1" })
	since := time.Now()

	t.Log("etcd loses a member, then its majority")
	c.Etcd.Stop(0)
	put("heads/agent-001", strings.Replace(string(head), `"s1"`, `"s2"`, 1))
	// The recorder goes on through another member.
	c.WaitState(time.Minute, "the head written after a member's loss", func(st State) bool { return st.Heads["agent-001"].Value == "s2" })
	c.Etcd.Stop(1)
	short, cancel := context.WithTimeout(ctx, time.Second)
	if _, err := c.etcd.Put(short, c.prefix+"x", "y"); err == nil {
		t.Fatal("a write without a majority")
	}
	cancel()
	for _, i := range []int{0, 1} {
		if err := c.Etcd.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Etcd.WaitReady(); err != nil {
		t.Fatal(err)
	}

	lin := parents{"s2": "s1"}.lineage
	h := c.History()
	h.Lineage = lin
	if vs := h.Check(); len(vs) > 0 {
		t.Fatalf("a node's writes within its lease and ownership:\n%s", Report(vs))
	}
	if len(h.Records) != 1 || h.Records[0].Node != "node-1" || h.Records[0].Value != "s1" || h.Records[0].Chain != "l1" {
		t.Fatalf("records: %+v", h.Records)
	}
	if w := n.Writes(time.Time{}); w[WalrusStore] != 1 || w[L1Tx] != 1 {
		t.Fatalf("writes counted: %v", w)
	}
	if k := n.HeadWrites(since); k != 1 {
		t.Fatalf("head writes since the first: %d", k)
	}

	t.Log("the lease ends; the node writes on")
	for range keep {
		break
	}
	if _, err := c.etcd.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	c.WaitState(time.Minute, "node-1's lease gone", func(st State) bool { return len(st.Nodes) == 0 && st.Owners["agent-001"] == "" })
	store()
	publish("s3", "s1")
	h = c.History()
	h.Lineage = parents{"s2": "s1", "s3": "s2"}.lineage
	// These writes came after the test saw the lease end: no tolerance
	// for the watch's delay is due (a store right after the end would
	// fall within the default Slack).
	h.Slack = 0
	var kinds []string
	for _, v := range h.Check() {
		kinds = append(kinds, v.Kind)
	}
	slices.Sort(kinds)
	if want := []string{"record-by-non-owner", "write-without-lease", "write-without-lease"}; !slices.Equal(kinds, want) {
		t.Fatalf("writes after the lease: %v, want %v", kinds, want)
	}
}

// TestHooks: the hook script the nodes run logs a start and an end line
// per run, and readHooks pairs them.
func TestHooks(t *testing.T) {
	dir := t.TempDir()
	script, log := filepath.Join(dir, "hook.sh"), filepath.Join(dir, "node-1.hooks")
	if err := os.WriteFile(script, []byte(hookScript), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"acquire", "release", "acquire"} {
		if out, err := exec.Command("/bin/sh", script, log, ev, "agent-001", "node-1").CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	runs, err := readHooks(log, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || runs[0].Event != "acquire" || runs[1].Event != "release" || runs[2].Event != "acquire" {
		t.Fatalf("runs: %+v", runs)
	}
	for i, r := range runs {
		if r.Agent != "agent-001" || r.Node != "node-1" || r.End.Before(r.Start) || (i > 0 && r.Start.Before(runs[i-1].End)) {
			t.Errorf("run %d: %+v", i, r)
		}
	}
	if err := os.WriteFile(log, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readHooks(log, "node-1"); err == nil {
		t.Fatal("a malformed line was read")
	}
}

// TestTxHashes: the transactions of eth_sendRawTransaction requests, one
// or batched; anything else carries none.
func TestTxHashes(t *testing.T) {
	key := devchain.DeriveKey("txhashes")
	to := common.HexToAddress("0x01")
	tx, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(1337), To: &to, Gas: 21000}), types.LatestSignerForChainID(big.NewInt(1337)), key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	raw := hexutil.Encode(b)
	one := `{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["` + raw + `"]}`
	h := txHashes([]byte(one))
	if len(h) != 1 || h[0] != tx.Hash().Hex() {
		t.Fatalf("one: %v", h)
	}
	if b := txHashes([]byte("[" + one + "," + one + `,{"method":"eth_call","params":[]}]`)); len(b) != 2 || b[0] != h[0] {
		t.Fatalf("batch: %v", b)
	}
	for _, body := range []string{`{"method":"eth_call"}`, `not json`, `{"method":"eth_sendRawTransaction","params":["0xzz"]}`} {
		if got := txHashes([]byte(body)); len(got) != 0 {
			t.Errorf("%s: %v", body, got)
		}
	}
}

// TestSplitCluster: the cluster section comes out whole, the rest stays.
func TestSplitCluster(t *testing.T) {
	sec, rest, err := splitCluster([]byte("state_dir: /s\ncluster:\n  fleet: f\n  # c\n  hooks:\n    timeout: 1s\nagents: []\n"))
	if err != nil || string(sec) != "fleet: f\n# c\nhooks:\n  timeout: 1s\n" || string(rest) != "state_dir: /s\nagents: []\n" {
		t.Fatalf("%q %q %v", sec, rest, err)
	}
	if _, _, err := splitCluster([]byte("state_dir: /s\n")); err == nil {
		t.Fatal("no cluster section accepted")
	}
}
