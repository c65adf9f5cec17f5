package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const recordsConfig = `
state_dir: state
walrus: {publishers: ["http://127.0.0.1:1"], aggregators: ["http://127.0.0.1:1"]}
chain:
  rpc: http://127.0.0.1:8545
  chain_id: 1
  signer: {file: keys/l1.key}
ens:
  records:
    - id: base
      rpc: https://base.example/v2/${KEY}
      chain_id: 8453
      resolver: "0x0000000000000000000000000000000000000b0b"
      signer: {file: keys/base.key}
      visibility_timeout: 2h
    - id: l2
      rpc: http://127.0.0.1:18546
      chain_id: 1338
      resolver: "0x0000000000000000000000000000000000000b0c"
encryption: {key: {file: keys/snapshot.key}}
defaults:
  records: base
agents:
  - {id: a, brain_dir: brains/a, ens_name: a.base.eth}
  - {id: b, brain_dir: brains/b, ens_name: b.l2.eth, records: l2}
  - {id: c, brain_dir: brains/c, ens_name: c.eth, records: l1}
  - {id: d, brain_dir: brains/d}
`

func TestLoadRecords(t *testing.T) {
	t.Setenv("KEY", "secret")
	p := writeConfig(t, recordsConfig)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(p)
	base := c.RecordsOf(&c.Agents[0])
	if base == nil || base.ID != "base" || base.ChainID != 8453 || base.RPC != "https://base.example/v2/secret" ||
		base.VisibilityTimeout.D() != 2*time.Hour || base.Signer.File != filepath.Join(dir, "keys/base.key") {
		t.Fatalf("agent a (defaults.records): %+v", base)
	}
	l2 := c.RecordsOf(&c.Agents[1])
	if l2 == nil || l2.ID != "l2" {
		t.Fatalf("agent b: %+v", l2)
	}
	// Defaults of what the entry leaves out; the signer is chain's.
	if l2.TxTimeout.D() != DefaultRecordsTxTimeout || l2.MaxFeeGwei != DefaultRecordsMaxFeeGwei || l2.GasLimit != DefaultRecordsGasLimit ||
		l2.PollInterval.D() != DefaultRecordsPollInterval || l2.VisibilityTimeout.D() != DefaultRecordsVisibilityTimeout {
		t.Errorf("defaults: %+v", l2)
	}
	if s := c.SignerOf(l2); s.File != filepath.Join(dir, "keys/l1.key") {
		t.Errorf("l2's signer: %v, want chain.signer", s)
	}
	if r := c.RecordsOf(&c.Agents[2]); r != nil {
		t.Errorf("agent c (records: l1) writes on %s", r.ID)
	}
	if r := c.RecordsOf(&c.Agents[3]); r != nil {
		t.Errorf("agent d (no name) writes on %s", r.ID)
	}
}

func TestValidateRecords(t *testing.T) {
	base := func() *Config {
		c := validBase()
		c.ENS.Records = []RecordsTarget{{ID: "l2", RPC: "http://127.0.0.1:18546", ChainID: 1338,
			Resolver: "0x0000000000000000000000000000000000000b0c"}}
		c.fillRecordsDefaults()
		c.Agents[0].Records = "l2"
		return c
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("base config invalid: %v", err)
	}
	for _, tt := range []struct {
		name   string
		mutate func(c *Config)
		field  string
	}{
		{"no id", func(c *Config) { c.ENS.Records[0].ID = ""; c.Agents[0].Records = "" }, "ens.records[0].id"},
		{"id l1", func(c *Config) { c.ENS.Records[0].ID = "l1"; c.Agents[0].Records = "" }, "ens.records[0].id"},
		{"duplicate id", func(c *Config) { c.ENS.Records = append(c.ENS.Records, c.ENS.Records[0]) }, "ens.records[1].id"},
		{"no rpc", func(c *Config) { c.ENS.Records[0].RPC = "" }, "ens.records[0].rpc"},
		{"bad rpc", func(c *Config) { c.ENS.Records[0].RPC = "ftp://x" }, "ens.records[0].rpc"},
		{"no chain id", func(c *Config) { c.ENS.Records[0].ChainID = 0 }, "ens.records[0].chain_id"},
		{"bad resolver", func(c *Config) { c.ENS.Records[0].Resolver = "0x12" }, "ens.records[0].resolver"},
		{"low gas limit", func(c *Config) { c.ENS.Records[0].GasLimit = 1000 }, "ens.records[0].gas_limit"},
		{"negative fee", func(c *Config) { c.ENS.Records[0].MaxFeeGwei = -1 }, "ens.records[0].max_fee_gwei"},
		{"two signer sources", func(c *Config) { c.ENS.Records[0].Signer = SecretRef{File: "/k", Env: "K"} }, "ens.records[0].signer"},
		{"unknown agent records", func(c *Config) { c.Agents[0].Records = "base" }, "agents[0].records"},
		{"unknown default records", func(c *Config) { c.Defaults.Records = "base" }, "defaults.records"},
		{"records without a name", func(c *Config) { c.Agents[0].ENSName = "" }, "agents[0].records"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.mutate(c)
			wantFieldError(t, c.Validate(), tt.field)
		})
	}

	// No signer anywhere is valid for reading; writing the pointer needs one.
	c := base()
	c.Chain.Signer = SecretRef{}
	if err := c.Validate(); err != nil {
		t.Errorf("no signer anywhere: Validate() = %v, want nil", err)
	}
	wantFieldError(t, c.CheckSigners(), "chain.signer")
	// A records target with its own signer needs no chain.signer.
	c.ENS.Records[0].Signer = SecretRef{Env: "L2_KEY"}
	if err := c.Validate(); err != nil {
		t.Errorf("own signer, no chain.signer: %v", err)
	}
	if err := c.CheckSigners(); err != nil {
		t.Errorf("own signer, no chain.signer: CheckSigners() = %v", err)
	}
	// Unknown keys inside an entry are errors, like everywhere.
	if _, err := Parse(strings.NewReader("ens:\n  records:\n    - {id: x, rcp: http://x}\n"), func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), "rcp") {
		t.Errorf("a misspelt key: %v", err)
	}
}
