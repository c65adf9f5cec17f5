package compose

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/state"
)

// TestLatestFallsBackToPending: what log, diff, verify and restore --dir
// or --escrow read as the agent's newest snapshot is what the agent's own
// restore reads (agent.Latest), on a real chain. A named agent whose first
// snapshot waits for its pointer has that snapshot (it used to have none:
// "no agent-snapshot record"); once the record exists it decides, and the
// local state is not even read.
func TestLatestFallsBackToPending(t *testing.T) {
	const name = "alpha.hermes.eth"
	chain, err := devchain.Start(t.Context(), devchain.Config{})
	if err != nil {
		t.Fatalf("devchain: %v", err)
	}
	t.Cleanup(func() { chain.Close() })
	if err := chain.Register(t.Context(), name, chain.DevAddress()); err != nil {
		t.Fatal(err)
	}
	ec, err := ens.New(t.Context(), ens.Config{RPCURL: chain.URL(), ChainID: chain.ChainID().Uint64(),
		Signer: ens.NewSigner(chain.DevKey()), TxTimeout: 30 * time.Second, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ec.Close)

	stateDir := t.TempDir()
	c := &config.Config{StateDir: stateDir, Agents: []config.Agent{
		{ID: "alpha", ENSName: name},
		{ID: "local"},
	}}
	s := &Services{Config: c, Log: slog.New(slog.DiscardHandler), Chain: ec}
	named, unnamed := &c.Agents[0], &c.Agents[1]
	save := func(id string, st *state.AgentState) {
		t.Helper()
		dir := state.AgentPath(stateDir, id)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := state.SaveAgent(dir, st); err != nil {
			t.Fatal(err)
		}
	}
	check := func(ac *config.Agent, blob, source string) {
		t.Helper()
		got, src, err := s.Latest(t.Context(), ac)
		if err != nil || got != blob || src != source {
			t.Errorf("Latest(%s) = %q, %q, %v; want %q from %q", ac.ID, got, src, err, blob, source)
		}
	}

	// Nothing anywhere: exit 4's error, naming the missing record.
	if _, _, err := s.Latest(t.Context(), named); !errors.Is(err, ErrNoSnapshot) || !strings.Contains(err.Error(), "no agent-snapshot record") {
		t.Errorf("no snapshot: %v", err)
	}
	if _, _, err := s.Latest(t.Context(), unnamed); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("no snapshot, no name: %v", err)
	}

	save("alpha", &state.AgentState{Last: &state.Snapshot{BlobID: "firstBlob"}, Pending: &state.Pointer{Value: "firstBlob"}})
	check(named, "firstBlob", agent.SourcePending)
	save("local", &state.AgentState{Last: &state.Snapshot{BlobID: "localBlob"}})
	check(unnamed, "localBlob", agent.SourceLocal)

	// A record is followed only when it is a blob id (agent.ValidatePointer).
	chainBlob := "chainBlob" + strings.Repeat("0", 43-len("chainBlob"))
	if _, err := ec.Write(t.Context(), name, chainBlob, ""); err != nil {
		t.Fatal(err)
	}
	check(named, chainBlob, agent.SourceENS)
	// The record is enough: an unreadable state does not matter.
	if err := os.WriteFile(filepath.Join(state.AgentPath(stateDir, "alpha"), "state.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	check(named, chainBlob, agent.SourceENS)
}
