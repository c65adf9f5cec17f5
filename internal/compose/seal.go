package compose

import (
	"fmt"
	"log/slog"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// Sealing builds the Seal side of a configuration from its seal section —
// the key-server client, the requester's Sui key and the policy — or
// returns nil when the configuration does not use Seal. Everything is
// checked here (points on the curve, the key file), so a Seal setup that
// cannot work stops start-up with the field it is about.
func Sealing(c *config.Config, log *slog.Logger) (*snapshot.Sealing, error) {
	if !c.SealEnabled() {
		return nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &c.Seal
	bad := func(field string, err error) error {
		return &config.ValidationError{Fields: []*config.FieldError{{Field: field, Msg: err.Error()}}}
	}
	pkg, err := seal.ParseAddress(s.PackageID)
	if err != nil {
		return nil, bad("seal.package_id", err)
	}
	cfg := seal.Config{PackageID: pkg, Threshold: s.Threshold}
	for i, k := range s.KeyServers {
		field := func(name string) string { return fmt.Sprintf("seal.key_servers[%d].%s", i, name) }
		ks := seal.KeyServer{URL: k.URL, Weight: k.Weight, APIKeyHeader: k.APIKeyHeader}
		if ks.ObjectID, err = seal.ParseAddress(k.ObjectID); err != nil {
			return nil, bad(field("object_id"), err)
		}
		if ks.PublicKey, err = seal.ParsePublicKeyHex(k.PublicKey); err != nil {
			return nil, bad(field("public_key"), err)
		}
		if !k.APIKey.IsZero() {
			v, err := config.ReadSecret(k.APIKey)
			if err != nil {
				return nil, bad(field("api_key"), err)
			}
			ks.APIKey = seal.NewSecret(v)
		}
		cfg.Servers = append(cfg.Servers, ks)
	}
	client, err := seal.NewClient(cfg, &seal.ClientOptions{
		RequestTimeout: s.RequestTimeout.D(),
		Logger:         log.With("component", "seal"),
	})
	if err != nil {
		return nil, bad("seal", err)
	}
	signer, err := loadSuiKey(s.SuiKey)
	if err != nil {
		return nil, bad("seal.sui_key", err)
	}
	policy := snapshot.SealPolicy{Module: s.Policy, ByToken: s.Allowlist.ID == "token"}
	if s.Policy == config.SealPolicyAllowlist {
		if policy.Allowlist, err = seal.ParseAddress(s.Allowlist.ObjectID); err != nil {
			return nil, bad("seal.allowlist.object_id", err)
		}
		policy.AllowlistVersion = s.Allowlist.InitialSharedVersion
	}
	return &snapshot.Sealing{
		Client:     client,
		Signer:     signer,
		Policy:     policy,
		SessionTTL: s.SessionTTL.D(),
		MaxSize:    int64(s.MaxSize),
	}, nil
}

func loadSuiKey(ref config.SecretRef) (*seal.SuiKey, error) {
	if ref.File != "" {
		return seal.ReadSuiKeyFile(ref.File)
	}
	v, err := config.ReadSecret(ref)
	if err != nil {
		return nil, err
	}
	return seal.ParseSuiKey(v)
}
