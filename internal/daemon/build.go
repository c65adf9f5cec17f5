package daemon

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"log/slog"
	"math/big"
	"sync/atomic"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/walrus"
)

// LoadKey reads the snapshot encryption key the configuration names. A key
// that cannot be read is a startup error: hermesd never uploads plaintext
// and never invents an ephemeral key.
func LoadKey(ref config.SecretRef) (cipher.Key, error) {
	switch {
	case ref.File != "":
		return cipher.ReadKeyFile(ref.File)
	case ref.Env != "":
		v, err := config.ReadSecret(ref)
		if err != nil {
			return cipher.Key{}, err
		}
		return cipher.ParseKey(v)
	}
	return cipher.Key{}, fmt.Errorf("no snapshot key configured (encryption.key); create one with 'hermesd keygen -o FILE'")
}

// WalrusConfig maps the configuration onto the Walrus client's.
func WalrusConfig(c *config.Config, log *slog.Logger) (walrus.Config, error) {
	wc := walrus.Config{
		Publishers:     c.Walrus.Publishers,
		Aggregators:    c.Walrus.Aggregators,
		Epochs:         c.Walrus.Epochs,
		Permanent:      c.Walrus.Permanent,
		SendObjectTo:   c.Walrus.SendObjectTo,
		Share:          c.Walrus.Share,
		MaxBlobSize:    int64(c.Walrus.MaxBlobSize),
		AttemptTimeout: c.Walrus.AttemptTimeout.D(),
		Timeout:        c.Walrus.Timeout.D(),
		RetryMax:       c.Walrus.RetryMax,
		RetryWaitMin:   c.Walrus.RetryWaitMin.D(),
		RetryWaitMax:   c.Walrus.RetryWaitMax.D(),
		Logger:         log,
	}
	if wc.RetryMax == 0 {
		wc.RetryMax = -1 // the client reads 0 as "default"; the config means none
	}
	if !c.Walrus.JWTSecret.IsZero() {
		raw, err := config.ReadSecret(c.Walrus.JWTSecret)
		if err != nil {
			return walrus.Config{}, fmt.Errorf("walrus.jwt_secret: %w", err)
		}
		secret, err := walrus.ParseJWTSecret(raw)
		if err != nil {
			return walrus.Config{}, fmt.Errorf("walrus.jwt_secret: %w", err)
		}
		wc.TokenSource = walrus.HS256Tokens(secret, c.Walrus.JWTTTL.D(), c.Walrus.SendObjectTo, nil)
	}
	if !c.Walrus.Token.IsZero() {
		tok, err := config.ReadSecret(c.Walrus.Token)
		if err != nil {
			return walrus.Config{}, fmt.Errorf("walrus.token: %w", err)
		}
		wc.BearerToken = tok
	}
	return wc, nil
}

// SignerSource maps a configured secret onto the ens package's.
func SignerSource(ref config.SecretRef) ens.SignerSource {
	return ens.SignerSource{KeyFile: ref.File, KeyEnv: ref.Env, Keystore: ref.Keystore, PasswordFile: ref.PasswordFile}
}

// ENSConfig maps the configuration onto the ENS client's. signer may be nil
// for a read-only client.
func ENSConfig(c *config.Config, signer *ens.Signer, log *slog.Logger) ens.Config {
	maxFee, _ := new(big.Float).Mul(big.NewFloat(c.Chain.MaxFeeGwei), weiPerGwei).Int(nil)
	return ens.Config{
		RPCURL:       c.Chain.RPC,
		Registry:     common.HexToAddress(c.Chain.ENSRegistry),
		Signer:       signer,
		ChainID:      c.Chain.ChainID,
		TxTimeout:    c.Chain.TxTimeout.D(),
		GasCap:       c.Chain.GasLimit,
		MaxFeePerGas: maxFee,
		PollInterval: c.Chain.PollInterval.D(),
		Logger:       log,
	}
}

// BuildOptions adjust Build.
type BuildOptions struct {
	// ReadOnly builds an ENS client without a signer (restores and drills
	// only read pointers; an init container need not hold the chain key).
	ReadOnly bool
}

// Build creates the services the configuration asks for: the key, the
// Walrus client, the ENS client (when an agent publishes) and the receipt
// signer. Every secret is checked here, so a bad one stops startup.
func Build(ctx context.Context, c *config.Config, log *slog.Logger, opts BuildOptions) (Services, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var svc Services
	key, err := LoadKey(c.Encryption.Key)
	if err != nil {
		return svc, fmt.Errorf("encryption.key: %w", err)
	}
	svc.Key = key
	wcfg := c
	if opts.ReadOnly {
		// Reads need no publisher credentials.
		cc := *c
		cc.Walrus.Token, cc.Walrus.JWTSecret = config.SecretRef{}, config.SecretRef{}
		wcfg = &cc
	}
	wc, err := WalrusConfig(wcfg, log.With("component", "walrus"))
	if err != nil {
		return svc, err
	}
	hook := new(atomic.Pointer[func(walrus.Attempt)])
	svc.walrusHook = hook
	wc.OnAttempt = func(a walrus.Attempt) {
		if f := hook.Load(); f != nil {
			(*f)(a)
		}
	}
	if svc.Walrus, err = walrus.New(wc); err != nil {
		return svc, fmt.Errorf("walrus: %w", err)
	}
	publishing := false
	for _, a := range c.Agents {
		if a.ENSName != "" {
			publishing = true
		}
	}
	if publishing {
		var signer *ens.Signer
		if !opts.ReadOnly {
			if signer, err = ens.LoadSigner(SignerSource(c.Chain.Signer)); err != nil {
				return svc, fmt.Errorf("chain.signer: %w", err)
			}
		}
		svc.ENS, err = ens.New(ctx, ENSConfig(c, signer, log.With("component", "ens")))
		if err != nil {
			return svc, fmt.Errorf("chain: %w", err)
		}
	}
	if !c.Receipts.Signer.IsZero() && !opts.ReadOnly {
		s, err := ens.LoadSigner(SignerSource(c.Receipts.Signer))
		if err != nil {
			return svc, fmt.Errorf("receipts.signer: %w", err)
		}
		svc.ReceiptSigner = s.PrivateKey()
	}
	for _, t := range c.Receipts.Trusted {
		svc.Trusted = append(svc.Trusted, common.HexToAddress(t))
	}
	if svc.ReceiptSigner != nil {
		// hermesd trusts its own transition receipts.
		self := publicAddress(svc.ReceiptSigner)
		found := false
		for _, t := range svc.Trusted {
			found = found || t == self
		}
		if !found {
			svc.Trusted = append(svc.Trusted, self)
		}
	}
	return svc, nil
}

func publicAddress(k *ecdsa.PrivateKey) common.Address {
	return ens.NewSigner(k).Address()
}
