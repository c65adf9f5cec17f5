package compose

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/handover"
	"github.com/hermesd/hermesd/internal/repo"
)

// agents[].key resolves to an own key ({file}) or to the read-only key of
// a handover ({handover, identity}) that must name the agent's ENS name.
func TestAgentKeys(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "alpha.key")
	own, _ := cipher.GenerateKey()
	if err := cipher.WriteKeyFile(keyFile, own); err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(dir, "buyer.key")
	recipient, err := handover.NewIdentityFile(idFile, "test")
	if err != nil {
		t.Fatal(err)
	}
	sellerKey := repo.DeriveAgentKey([32]byte{7}, "beta.hermes.eth")
	h := handover.Handover{Agent: "beta", Identity: "beta.hermes.eth", ENSName: "beta.hermes.eth",
		Head: "fsnpjmKMerftdnfQfub2Ci4tAjQsN-uHpFcFn9wUZpc", Key: sellerKey,
		Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Seller: common.HexToAddress("0xa1")}
	hoFile := filepath.Join(dir, "beta.handover")
	f, err := os.Create(hoFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := handover.Seal(f, h, recipient); err != nil {
		t.Fatal(err)
	}
	f.Close()

	c := &config.Config{Agents: []config.Agent{
		{ID: "plain", ENSName: "plain.hermes.eth"},
		{ID: "alpha", ENSName: "alpha.hermes.eth", Key: config.AgentKey{File: keyFile}},
		{ID: "beta", ENSName: "beta.hermes.eth", Key: config.AgentKey{Handover: hoFile, Identity: idFile}},
	}}
	keys, _, err := agentKeys(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := keys["plain"]; ok || len(keys) != 2 {
		t.Errorf("keys for %d agents: %v", len(keys), keys)
	}
	if k := keys["alpha"]; k.Own == nil || k.Own.Bytes() != [32]byte(own) || k.Read != nil {
		t.Errorf("alpha's own key not resolved")
	}
	if k := keys["beta"]; k.Own != nil || len(k.Read) != 1 || k.Read[0].ID() != sellerKey.ID() || k.Handover == nil || k.Handover.Head != h.Head {
		t.Errorf("beta's handover not resolved: %+v", k.Handover)
	}
	// The handover of beta configured for another name is refused.
	c.Agents[2].ENSName = "gamma.hermes.eth"
	if _, _, err := agentKeys(c); err == nil || !strings.Contains(err.Error(), "agents[2].key.handover: it hands over beta.hermes.eth") {
		t.Errorf("a handover for another name: %v", err)
	}
	// Another identity than the handover's recipient.
	c.Agents[2].ENSName = "beta.hermes.eth"
	other := filepath.Join(dir, "other.key")
	if _, err := handover.NewIdentityFile(other, "x"); err != nil {
		t.Fatal(err)
	}
	c.Agents[2].Key.Identity = other
	if _, _, err := agentKeys(c); err == nil || !strings.Contains(err.Error(), "agents[2].key.handover") || !strings.Contains(err.Error(), handover.ErrWrongIdentity.Error()) {
		t.Errorf("a handover opened with another identity: %v", err)
	}
}

// A pipeline's agent key: derived from the snapshot key, or agents[].key's
// own key; none at all from services without keys (restore --escrow, the
// drill's escrow path), which must not touch the services they copy.
func TestPipelineKeys(t *testing.T) {
	master, _ := cipher.GenerateKey()
	own := repo.NewAgentKey([32]byte{9})
	read := []repo.AgentKey{repo.DeriveAgentKey([32]byte{7}, "beta.hermes.eth")}
	c := &config.Config{Agents: []config.Agent{
		{ID: "alpha", ENSName: "alpha.hermes.eth"},
		{ID: "beta", ENSName: "beta.hermes.eth"},
	}}
	s := &Services{Config: c, Log: slog.New(slog.DiscardHandler), Key: master,
		AgentKeys: map[string]AgentKeys{"beta": {Own: &own, Read: read}}}

	derived := repo.DeriveAgentKey([32]byte(master), "alpha.hermes.eth")
	if p := s.Pipeline(&c.Agents[0], "", nil); p.AgentKey == nil || p.AgentKey.ID() != derived.ID() || p.Key != master || p.ReadKeys != nil {
		t.Errorf("alpha: want the key derived from the snapshot key")
	}
	if p := s.Pipeline(&c.Agents[1], "", nil); p.AgentKey == nil || p.AgentKey.ID() != own.ID() || len(p.ReadKeys) != 1 {
		t.Errorf("beta: want its own key and its read key")
	}
	bare := s.WithoutKeys()
	for i := range c.Agents {
		if p := bare.Pipeline(&c.Agents[i], "", nil); p.AgentKey != nil || p.Key != (cipher.Key{}) || p.ReadKeys != nil {
			t.Errorf("%s without keys: agent key %v, read keys %d, snapshot key set %v",
				c.Agents[i].ID, p.AgentKey != nil, len(p.ReadKeys), p.Key != (cipher.Key{}))
		}
	}
	if p := s.Pipeline(&c.Agents[1], "", nil); p.AgentKey == nil || p.Key != master {
		t.Error("WithoutKeys changed the services it copied")
	}
}
