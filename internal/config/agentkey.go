package config

import "fmt"

// AgentKey names an agent's own format v3 key (docs/format-v3.md §2)
// instead of the one derived from encryption.key. Exactly one form:
//
//   - file or env: a secret holding the agent key itself (43 characters
//     of base64url, as `hermesd keygen` writes), used to read and write
//     the agent's snapshots; for an agent whose key must not follow from
//     the operator's master key.
//   - handover and identity: a transfer (internal/handover). The
//     handover file (age-encrypted, from the seller's `hermesd transfer
//     export`) holds the key of the seller's snapshots, opened with the
//     age identity file from `hermesd transfer request`. That key only
//     reads what the seller wrote: the agent's next snapshot is written
//     under the key derived from this operator's encryption.key, so
//     nothing new is readable by the seller.
//
// Like every SecretRef it never holds the secret itself.
type AgentKey struct {
	File     string `yaml:"file"`
	Env      string `yaml:"env"`
	Handover string `yaml:"handover"`
	Identity string `yaml:"identity"`
}

// IsZero reports whether no key is configured (the derived key is used).
func (k AgentKey) IsZero() bool { return k == AgentKey{} }

// IsHandover reports whether the key comes from a handover.
func (k AgentKey) IsHandover() bool { return k.Handover != "" }

// Secret returns the file or env form as a SecretRef, for ReadSecret.
func (k AgentKey) Secret() SecretRef { return SecretRef{File: k.File, Env: k.Env} }

// String describes the source without revealing anything secret.
func (k AgentKey) String() string {
	switch {
	case k.Handover != "":
		return "handover " + k.Handover + " (identity " + k.Identity + ")"
	case k.File != "" || k.Env != "":
		return k.Secret().String()
	}
	return "derived from encryption.key"
}

func (k *AgentKey) resolvePaths(abs func(*string)) {
	abs(&k.File)
	abs(&k.Handover)
	abs(&k.Identity)
}

func (c *Config) validateAgentKeys(v *validator) {
	for i := range c.Agents {
		a := &c.Agents[i]
		k := a.Key
		if k.IsZero() {
			continue
		}
		f := fmt.Sprintf("agents[%d].key", i)
		n := 0
		for _, set := range []bool{k.File != "", k.Env != "", k.Handover != ""} {
			if set {
				n++
			}
		}
		switch {
		case n > 1:
			v.add(f, "give exactly one of file, env or handover")
		case n == 0:
			v.add(f, "identity is only used with handover")
		case k.Handover != "" && k.Identity == "":
			v.add(f+".identity", "required with handover: the age identity file from 'hermesd transfer request'")
		case k.Handover == "" && k.Identity != "":
			v.add(f+".identity", "only used with handover")
		}
		if k.Env != "" && !validEnvName(k.Env) {
			v.add(f+".env", "%s is not an environment variable name (give the variable's name, not its value)", shown(k.Env))
		}
		if k.Handover != "" && k.Handover == k.Identity {
			v.add(f+".identity", "is the handover file itself")
		}
		if c.Encryption.Format != "v3" {
			v.add(f, "per-agent keys exist in format v3 only (encryption.format is %s)", shown(c.Encryption.Format))
		}
		if k.Handover != "" && a.ENSName == "" {
			v.add(f+".handover", "a handed-over agent needs its ens_name (the name the seller transferred)")
		}
	}
}
