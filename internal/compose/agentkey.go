package compose

import (
	"fmt"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/handover"
	"github.com/hermesd/hermesd/internal/repo"
)

// AgentKeys are the v3 keys of one agent configured with agents[].key.
type AgentKeys struct {
	// Own, when set, replaces the key derived from encryption.key.
	Own *repo.AgentKey
	// Read are keys that only read (the seller's, from a handover).
	Read []repo.AgentKey
	// Handover is the handover the agent was configured with.
	Handover *handover.Handover
}

// agentKeys resolves the agents[].key of every agent: an own key is read
// and parsed; a handover is opened with its identity and must name the
// agent's ENS name. Errors name the field and never the key.
func agentKeys(c *config.Config) (map[string]AgentKeys, error) {
	out := map[string]AgentKeys{}
	for i := range c.Agents {
		ac := &c.Agents[i]
		k := ac.Key
		field := fmt.Sprintf("agents[%d].key", i)
		switch {
		case k.IsZero():
			continue
		case k.IsHandover():
			ids, err := handover.ReadIdentityFile(k.Identity)
			if err != nil {
				return nil, fmt.Errorf("%s.identity: %w", field, err)
			}
			h, err := handover.OpenFile(k.Handover, ids...)
			if err != nil {
				return nil, fmt.Errorf("%s.handover: %w", field, err)
			}
			if h.ENSName != ac.ENSName || h.Identity != ac.Identity() {
				return nil, fmt.Errorf("%s.handover: it hands over %s, but agent %s is %s", field, h.ENSName, ac.ID, ac.ENSName)
			}
			out[ac.ID] = AgentKeys{Read: []repo.AgentKey{h.Key}, Handover: &h}
		default:
			key, err := LoadKey(k.Secret())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", field, err)
			}
			ak := repo.NewAgentKey([repo.KeySize]byte(key))
			out[ac.ID] = AgentKeys{Own: &ak}
		}
	}
	return out, nil
}
