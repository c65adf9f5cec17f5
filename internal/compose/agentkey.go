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
// agent's ENS name. Errors name the field and never the key. In a fleet
// (cluster set) a key this node cannot open is no start-up error: the
// agent is missing here (missing says why), and the node never takes it.
func agentKeys(c *config.Config) (keys map[string]AgentKeys, missing map[string]string, err error) {
	keys, missing = map[string]AgentKeys{}, map[string]string{}
	for i := range c.Agents {
		ac := &c.Agents[i]
		k, err := agentKey(c, i)
		if err != nil {
			if c.Cluster == nil {
				return nil, nil, err
			}
			missing[ac.ID] = err.Error()
			continue
		}
		if k != nil {
			keys[ac.ID] = *k
		}
	}
	return keys, missing, nil
}

// agentKey resolves agents[i].key (nil: none configured).
func agentKey(c *config.Config, i int) (*AgentKeys, error) {
	ac := &c.Agents[i]
	k := ac.Key
	field := fmt.Sprintf("agents[%d].key", i)
	switch {
	case k.IsZero():
		return nil, nil
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
		return &AgentKeys{Read: []repo.AgentKey{h.Key}, Handover: &h}, nil
	default:
		key, err := LoadKey(k.Secret())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		ak := repo.NewAgentKey([repo.KeySize]byte(key))
		return &AgentKeys{Own: &ak}, nil
	}
}
