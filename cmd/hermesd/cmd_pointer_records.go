package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/pointer"
)

// loadConfig reads the configuration the flags name: nil when --rpc is
// given without -config (the flags are then the whole story), or when no
// -config is given and the default file does not exist.
func (f *chainFlags) loadConfig() (*config.Config, error) {
	if f.config == "" && f.rpc != "" {
		return nil, nil
	}
	path := config.ResolvePath(f.config)
	if f.config == "" && os.Getenv(config.EnvPath) == "" {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	c, err := config.Load(path)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	return c, nil
}

// recordsTarget says where name's record is written: the ens.records
// entry id names ("l1": nil), else the records of the configured agent
// whose ens_name is name (nil: the name's own resolver on L1).
func (f *chainFlags) recordsTarget(name, id string) (*config.RecordsTarget, error) {
	c, err := f.loadConfig()
	if err != nil {
		return nil, err
	}
	if id != "" {
		if id == config.RecordsL1 {
			return nil, nil
		}
		if c == nil {
			return nil, usageErrorf("--records %s: ens.records are read from the configuration; pass -config FILE", sanitize(id))
		}
		r := c.RecordsTarget(id)
		if r == nil {
			return nil, usageErrorf("--records %s: no such ens.records entry in the configuration", sanitize(id))
		}
		return r, nil
	}
	if c == nil {
		return nil, nil
	}
	norm, err := ens.Normalize(name)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	for i := range c.Agents {
		a := &c.Agents[i]
		if a.ENSName == "" {
			continue
		}
		if an, err := ens.Normalize(a.ENSName); err == nil && an == norm {
			return c.RecordsOf(a), nil
		}
	}
	return nil, nil
}

// recordsClient connects to records target r's contract, signed by the
// key flags or else r's signer (chain.signer when it names none).
func (f *chainFlags) recordsClient(ctx context.Context, r *config.RecordsTarget) (*ens.Client, error) {
	return f.recordsChain(ctx, r, compose.RecordsConfig)
}

// recordsRegistry connects to the registry of records target r's chain,
// signed as recordsClient is, and checks the registry is there.
func (f *chainFlags) recordsRegistry(ctx context.Context, r *config.RecordsTarget) (*ens.Client, error) {
	if r.Registry == "" {
		return nil, usageErrorf("the record lives at ens.records %s, which names no registry: set ens.records[].registry (the ENS registry on that chain) to transfer the name there", r.ID)
	}
	c, err := f.recordsChain(ctx, r, compose.RecordsRegistryConfig)
	if err != nil {
		return nil, err
	}
	if err := c.Ping(ctx); err != nil {
		c.Close()
		if errors.Is(err, ens.ErrWrongChain) || errors.Is(err, ens.ErrNoRegistry) {
			return nil, withCode(exitUsage, fmt.Errorf("ens.records %s: %w", r.ID, err))
		}
		return nil, err
	}
	return c, nil
}

func (f *chainFlags) recordsChain(ctx context.Context, r *config.RecordsTarget, mk func(*config.RecordsTarget, *ens.Signer, *slog.Logger) ens.Config) (*ens.Client, error) {
	c, err := f.loadConfig()
	if err != nil {
		return nil, err
	}
	var src ens.SignerSource
	if c != nil {
		src = compose.SignerSource(c.SignerOf(r))
	}
	if f.keyFile != "" || f.keyEnv != "" || f.keystore != "" {
		src = ens.SignerSource{KeyFile: f.keyFile, KeyEnv: f.keyEnv, Keystore: f.keystore, PasswordFile: f.passwordFile}
	}
	if src == (ens.SignerSource{}) {
		return nil, usageErrorf("no signing key for ens.records %s: set its signer (or chain.signer), or pass --key-file FILE, --key-env NAME or --keystore FILE --password-file FILE", r.ID)
	}
	s, err := ens.LoadSigner(src)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	ec := mk(r, s, slog.New(slog.DiscardHandler))
	if f.timeout > 0 {
		ec.TxTimeout = f.timeout
	}
	rc, err := ens.New(ctx, ec)
	if err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("ens.records %s: %w", r.ID, err))
	}
	return rc, nil
}

// setAtRecords is pointer set for a record that lives at an ens.records
// target: written there by compare-and-set, then confirmed through L1
// resolution as the daemon confirms it.
func setAtRecords(ctx context.Context, env *cmdEnv, cf *chainFlags, r *config.RecordsTarget, name, value, expected string, force, asJSON bool) error {
	norm, l1, err := cf.connect(ctx, name, false)
	if err != nil {
		return err
	}
	defer l1.Close()
	rc, err := cf.recordsClient(ctx, r)
	if err != nil {
		return err
	}
	defer rc.Close()
	req := compose.RecordsSet(r, rc, l1)
	req.Name, req.Value, req.Expected, req.Force = norm, value, expected, force
	res, err := pointer.Set(ctx, req)
	if err != nil && !errors.Is(err, pointer.ErrNotVisible) {
		return fmt.Errorf("pointer set at ens.records %s: %w", r.ID, err)
	}
	out := pointerSetResult{
		Name: norm, Value: value, Previous: res.Previous, Unchanged: res.Unchanged,
		From: rc.From().Hex(), Records: r.ID, Visible: &res.Visible,
	}
	if id := rc.ChainID(); id != nil {
		out.ChainID = id.String()
	}
	if !res.Unchanged {
		out.TxHash, out.BlockNumber, out.GasUsed = res.Tx.Hash, res.Tx.Block, res.Tx.Gas
		if res.Fee != nil {
			out.EffectiveGasPrice = bigString(res.Fee.GasPrice)
		}
	}
	if asJSON {
		if jerr := newJSONEncoder(env.stdout).Encode(out); jerr != nil {
			return jerr
		}
	} else {
		if res.Unchanged {
			fmt.Fprintf(env.stdout, "unchanged: %s already points at %s at ens.records %s (nothing sent)\n", norm, value, r.ID)
		} else {
			fmt.Fprintf(env.stdout, "%s → %s at ens.records %s (chain %s)\ntx %s in block %d, gas used %d\n",
				norm, value, r.ID, out.ChainID, out.TxHash, out.BlockNumber, out.GasUsed)
		}
		if res.Visible {
			fmt.Fprintf(env.stdout, "visible through L1 resolution after %s\n", res.Waited.Round(1e6))
		}
	}
	if err != nil {
		return fmt.Errorf("pointer set: %w; 'hermesd pointer get %s' shows it once the gateway serves it", err, norm)
	}
	return nil
}
