package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/pointertest"
	"github.com/hermesd/hermesd/internal/wait"
	"github.com/hermesd/hermesd/internal/walrus"
)

// resolverWrites are the resolver calls a pointer transaction makes.
var resolverWrites = func() abi.ABI {
	a, err := abi.JSON(strings.NewReader(`[
{"type":"function","name":"setText","inputs":[{"name":"node","type":"bytes32"},{"name":"key","type":"string"},{"name":"value","type":"string"}],"outputs":[]},
{"type":"function","name":"multicall","inputs":[{"name":"data","type":"bytes[]"}],"outputs":[{"name":"results","type":"bytes[]"}]}]`))
	if err != nil {
		panic(err)
	}
	return a
}()

// pointerValues decodes the agent-snapshot values a pointer transaction
// writes: setText calls, alone or inside a multicall.
func pointerValues(t *testing.T, res abi.ABI, data []byte) []string {
	if len(data) < 4 {
		return nil
	}
	m, err := res.MethodById(data[:4])
	if err != nil {
		return nil
	}
	args, err := m.Inputs.Unpack(data[4:])
	if err != nil {
		t.Errorf("calldata of %s: %v", m.Name, err)
		return nil
	}
	switch m.Name {
	case "setText":
		return []string{args[2].(string)}
	case "multicall":
		var out []string
		for _, call := range args[0].([][]byte) {
			out = append(out, pointerValues(t, res, call)...)
		}
		return out
	}
	return nil
}

// readBacks records, from the Walrus server's side, every successful
// read of a quilt patch: a pointer may name a patch only once it has been
// read back.
type readBacks struct {
	mu   sync.Mutex
	read map[string]time.Time

	quilts, blobs atomic.Int64 // stores that succeeded
}

func (r *readBacks) observe(ri localwalrus.RequestInfo) {
	switch {
	case ri.Route == localwalrus.RoutePublisher && ri.Status == 200 && ri.Fault == localwalrus.FaultNone:
		if ri.Path == "/v1/quilts" {
			r.quilts.Add(1)
		} else {
			r.blobs.Add(1)
		}
	case ri.PatchID != "" && ri.Status == 200 && ri.Fault == localwalrus.FaultNone && ri.Method == "GET":
		r.mu.Lock()
		if _, ok := r.read[ri.PatchID]; !ok {
			r.read[ri.PatchID] = ri.End
		}
		r.mu.Unlock()
	}
}

func (r *readBacks) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.read[id]
	return ok
}

// pointerSpy checks every pointer transaction as it reaches the chain:
// each patch id it writes must already have been read back.
type pointerSpy struct {
	t       *testing.T
	abi     abi.ABI // the resolver's
	walrus  *localwalrus.Server
	reads   *readBacks
	checked atomic.Int64
	mu      sync.Mutex
	early   []string
}

func (s *pointerSpy) onSend(body []byte) {
	var req struct {
		Params []string `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Params) != 1 {
		return // a batch or another shape: hermesd sends single requests
	}
	raw, err := hex.DecodeString(strings.TrimPrefix(req.Params[0], "0x"))
	if err != nil {
		return
	}
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		return
	}
	for _, v := range pointerValues(s.t, s.abi, tx.Data()) {
		id := headref.ID(v)
		if walrus.ValidatePatchID(id) != nil {
			continue
		}
		s.checked.Add(1)
		if s.reads.has(id) {
			continue
		}
		// The server reports a request once it is done with it, which
		// may be just after its client saw the answer: let it finish.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s.walrus.Quiesce(ctx)
		cancel()
		if !s.reads.has(id) {
			s.mu.Lock()
			s.early = append(s.early, id)
			s.mu.Unlock()
		}
	}
}

// TestE2EQuilts200: 200 agents, each edited once a "minute" for five
// "minutes" (rounds as fast as the daemon settles, not wall-clock
// minutes), on the devnet with a 5 s batch window and 301 shards (the
// fewest whose quilts hold 200 patches, one round's). The agents' small
// packs share quilts: at most 0.02 stored blobs per snapshot. Every
// pointer transaction names only patches that were read back before it
// reached the chain, and every head restores byte for byte.
func TestE2EQuilts200(t *testing.T) {
	t.Parallel()
	const n, rounds = 200, 5
	agents := make([]devnet.Agent, n)
	for i := range agents {
		agents[i] = devnet.Agent{ID: fmt.Sprintf("q%03d", i), ENSName: fmt.Sprintf("q%03d.hermes.eth", i)}
	}
	start := time.Now()
	reads := &readBacks{read: map[string]time.Time{}}
	w := newE2EWorldWith(t, devnet.Options{BatchWindow: 5 * time.Second, WalrusOnRequest: reads.observe, Shards: 301}, agents...)
	for _, a := range agents {
		if err := os.MkdirAll(filepath.Join(w.brain(a.ID), "notes"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.brain(a.ID), "system.md"), []byte("I am "+a.ID+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spy := &pointerSpy{t: t, walrus: w.dn.Walrus, reads: reads, abi: resolverWrites}
	proxy := pointertest.NewChainProxy(t, w.dn.Chain.URL())
	proxy.OnSend(spy.onSend)
	cfg := rewriteConfig(t, w, "rpc: "+w.dn.Chain.URL(), "rpc: "+proxy.URL)
	t.Logf("devnet with %d names: %v", n, time.Since(start).Round(time.Millisecond))

	want := make([]string, n)
	settled := func() bool {
		rep, err := w.status()
		if err != nil || len(rep.Agents) != n {
			return false
		}
		for i, a := range rep.Agents {
			if a.Last == nil || a.Pending != nil || a.Published != a.Last.BlobID || a.Last.BundleHash != want[i] {
				return false
			}
		}
		return true
	}
	hashAll := func() {
		for i, a := range agents {
			want[i] = dirHash(t, w.brain(a.ID))
		}
	}
	hashAll()
	p := w.start("run", "-config", cfg)
	wait.Within(t, 5*time.Minute, "every agent's first snapshot published", settled)
	t.Logf("first snapshots of %d agents published: %v", n, time.Since(start).Round(time.Millisecond))
	for r := range rounds {
		t0 := time.Now()
		for _, a := range agents {
			note := fmt.Sprintf("round %d of %s: %d\n", r, a.ID, time.Now().UnixNano())
			if err := os.WriteFile(filepath.Join(w.brain(a.ID), "notes", "minute.md"), []byte(note), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		hashAll()
		wait.Within(t, 5*time.Minute, fmt.Sprintf("round %d published", r), settled)
		t.Logf("round %d: %d edits stored and published in %v", r, n, time.Since(t0).Round(time.Millisecond))
	}
	snapshots, _ := p.out.count(msgUploaded)
	p.signal(syscall.SIGTERM)
	if code := p.wait(60 * time.Second); code != 0 {
		t.Fatalf("hermesd exited %d on SIGTERM", code)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w.dn.Walrus.Quiesce(ctx)
	quilts, blobs := reads.quilts.Load(), reads.blobs.Load()
	perSnapshot := float64(quilts+blobs) / float64(snapshots)
	t.Logf("%d snapshots of %d agents stored as %d quilts and %d blobs: %.4f stored blobs per snapshot; %d pointer values checked against read-backs; %v in all",
		snapshots, n, quilts, blobs, perSnapshot, spy.checked.Load(), time.Since(start).Round(time.Millisecond))
	if snapshots < n*(rounds+1) {
		t.Errorf("%d snapshots, want at least %d", snapshots, n*(rounds+1))
	}
	if perSnapshot > 0.02 {
		t.Errorf("%.4f stored blobs per snapshot, want at most 0.02", perSnapshot)
	}
	if spy.checked.Load() < int64(n*(rounds+1)) {
		t.Errorf("only %d pointer values seen on their way to the chain", spy.checked.Load())
	}
	if len(spy.early) > 0 {
		t.Errorf("%d pointers named a patch before it was read back: %v", len(spy.early), spy.early[:min(5, len(spy.early))])
	}
	// Every head restores byte for byte, from the chain and Walrus alone.
	svc, err := compose.Build(t.Context(), w.dn.Config, nil, compose.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	for _, a := range agents {
		head := w.pointer(a.ENSName)
		if !walrus.IsPatchID(head) {
			t.Errorf("%s names %s, not a quilt patch", a.ENSName, head)
		}
		out := filepath.Join(t.TempDir(), a.ID)
		ac, err := w.dn.Config.Agent(a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Pipeline(ac, t.TempDir(), nil).Restore(t.Context(), head, out); err != nil {
			t.Fatalf("%s: restore %s: %v", a.ID, head, err)
		}
		if diffs := sameTree(hashedTree(t, w.brain(a.ID)), hashedTree(t, out)); len(diffs) > 0 {
			t.Errorf("%s: restored head differs: %v", a.ID, diffs)
		}
	}
}
