package config

import (
	"fmt"
	"time"
)

// ENS configures where agents' text records live when that is not their
// name's own L1 resolver (docs/design.md §7.2). Reading never needs it: a
// pointer is always read through L1 resolution (chain), which reaches a
// record on another chain through its name's CCIP-read resolver.
type ENS struct {
	// Records are contracts, on any chain, that hold agents' records:
	// an L2 resolver or registry with the PublicResolver's setText/text
	// ABI. An agent uses one by id (agents[].records, defaults.records).
	Records []RecordsTarget `yaml:"records"`
}

// RecordsL1 is the records id that means the name's own resolver on L1
// (chain), the default: an agent can opt out of defaults.records with it.
const RecordsL1 = "l1"

// RecordsTarget is one contract that holds records, and how hermesd
// writes there: its own RPC, chain id, signer, fees and timeouts, and how
// long a write may take to become visible through L1 resolution.
type RecordsTarget struct {
	// ID names the target for agents[].records and defaults.records.
	ID string `yaml:"id"`
	// RPC is the JSON-RPC URL of the chain the contract is on.
	RPC string `yaml:"rpc"`
	// ChainID is required and checked against eth_chainId before any
	// write: a key must never sign on the wrong network.
	ChainID uint64 `yaml:"chain_id"`
	// Resolver is the contract holding the records (setText/text).
	Resolver string `yaml:"resolver"`
	// Registry is the ENS registry on that chain (owner/setOwner ABI)
	// whose owner of a name may write its record there: pointer transfer
	// moves the name in it. Empty: names are not transferred there.
	Registry string `yaml:"registry"`
	// L1Resolver is the resolver on L1 (chain) that serves these records
	// through CCIP-read (an OffchainResolver whose gateway reads this
	// contract). A name whose L1 resolver it is has its record here:
	// `hermesd pointer move NAME --to ID` makes it the name's resolver,
	// and an agent whose name resolves through it must have records: ID.
	// Empty: no name is moved here, and the check is not made.
	L1Resolver string `yaml:"l1_resolver"`
	// Signer writes there; empty means chain.signer.
	Signer SecretRef `yaml:"signer"`
	// TxTimeout, MaxFeeGwei, GasLimit and PollInterval are as chain's,
	// for this chain.
	TxTimeout    Duration `yaml:"tx_timeout"`
	MaxFeeGwei   float64  `yaml:"max_fee_gwei"`
	GasLimit     uint64   `yaml:"gas_limit"`
	PollInterval Duration `yaml:"poll_interval"`
	// VisibilityTimeout bounds how long a value written here may take to
	// become visible through L1 resolution (its gateway lags): meanwhile
	// the pointer is "written, not yet visible from L1" and nothing is
	// written again; past it, an error that keeps the pointer pending.
	VisibilityTimeout Duration `yaml:"visibility_timeout"`
}

// Defaults of a records target's fields.
const (
	DefaultRecordsTxTimeout         = 5 * time.Minute
	DefaultRecordsMaxFeeGwei        = 1.0 // an L2's base fee is far below; a spike waits
	DefaultRecordsGasLimit          = 1_000_000
	DefaultRecordsPollInterval      = 2 * time.Second
	DefaultRecordsVisibilityTimeout = 30 * time.Minute
)

// fillRecordsDefaults gives every records target the defaults of the
// fields it leaves out.
func (c *Config) fillRecordsDefaults() {
	for i := range c.ENS.Records {
		r := &c.ENS.Records[i]
		if r.TxTimeout == 0 {
			r.TxTimeout = Duration(DefaultRecordsTxTimeout)
		}
		if r.MaxFeeGwei == 0 {
			r.MaxFeeGwei = DefaultRecordsMaxFeeGwei
		}
		if r.GasLimit == 0 {
			r.GasLimit = DefaultRecordsGasLimit
		}
		if r.PollInterval == 0 {
			r.PollInterval = Duration(DefaultRecordsPollInterval)
		}
		if r.VisibilityTimeout == 0 {
			r.VisibilityTimeout = Duration(DefaultRecordsVisibilityTimeout)
		}
	}
}

// RecordsOf is the records target agent a writes, or nil when its record
// lives on its name's own L1 resolver (or it has no name).
func (c *Config) RecordsOf(a *Agent) *RecordsTarget {
	if a.ENSName == "" {
		return nil
	}
	id := a.Records
	if id == "" {
		id = c.Defaults.Records
	}
	return c.RecordsTarget(id)
}

// RecordsTarget returns the records target id ("" and "l1": none).
func (c *Config) RecordsTarget(id string) *RecordsTarget {
	if id == "" || id == RecordsL1 {
		return nil
	}
	for i := range c.ENS.Records {
		if c.ENS.Records[i].ID == id {
			return &c.ENS.Records[i]
		}
	}
	return nil
}

// SignerOf is the signer that writes to r: its own, else chain.signer.
func (c *Config) SignerOf(r *RecordsTarget) SecretRef {
	if !r.Signer.IsZero() {
		return r.Signer
	}
	return c.Chain.Signer
}

func (c *Config) validateRecords(v *validator) {
	ids := map[string]int{}
	for i := range c.ENS.Records {
		r := &c.ENS.Records[i]
		f := func(name string) string { return fmt.Sprintf("ens.records[%d].%s", i, name) }
		if r.ID == RecordsL1 {
			v.add(f("id"), "%q is reserved: it means the name's own resolver on L1", RecordsL1)
		} else {
			checkID(v, "ens.records", i, r.ID, ids)
		}
		if r.RPC == "" {
			v.add(f("rpc"), "required")
		} else {
			checkRPC(v, f("rpc"), r.RPC)
		}
		if r.ChainID == 0 {
			v.add(f("chain_id"), "required: writes are signed for this chain only")
		}
		if !addressRe.MatchString(r.Resolver) {
			v.add(f("resolver"), "%q is not an address (0x + 40 hex digits) of the contract that holds the records", r.Resolver)
		}
		if r.Registry != "" && !addressRe.MatchString(r.Registry) {
			v.add(f("registry"), "%q is not an address (0x + 40 hex digits) of the ENS registry on that chain", r.Registry)
		}
		if r.L1Resolver != "" && !addressRe.MatchString(r.L1Resolver) {
			v.add(f("l1_resolver"), "%q is not an address (0x + 40 hex digits) of the L1 resolver that serves these records", r.L1Resolver)
		}
		if r.TxTimeout <= 0 {
			v.add(f("tx_timeout"), "must be positive")
		}
		if r.MaxFeeGwei <= 0 {
			v.add(f("max_fee_gwei"), "must be positive")
		}
		if r.GasLimit < 50_000 {
			v.add(f("gas_limit"), "%d is too low for a setText transaction (at least 50000)", r.GasLimit)
		}
		if r.PollInterval <= 0 {
			v.add(f("poll_interval"), "must be positive")
		}
		if r.VisibilityTimeout <= 0 {
			v.add(f("visibility_timeout"), "must be positive")
		}
	}
	ref := func(field, id string) {
		if id == "" || id == RecordsL1 {
			return
		}
		if _, ok := ids[id]; !ok {
			v.add(field, "%q is no ens.records id (nor %q, the name's own L1 resolver)", id, RecordsL1)
		}
	}
	ref("defaults.records", c.Defaults.Records)
	for i := range c.Agents {
		a := &c.Agents[i]
		ref(fmt.Sprintf("agents[%d].records", i), a.Records)
		if a.Records != "" && a.ENSName == "" {
			v.add(fmt.Sprintf("agents[%d].records", i), "only for an agent with an ens_name")
		}
	}
}
