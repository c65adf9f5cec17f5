package main

import (
	"context"
	"fmt"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// escrowOutput is how restore --escrow found the agent key (never the key).
type escrowOutput struct {
	KeyID   string   `json:"keyId"`
	Bytes   int      `json:"bytes"`
	Servers []string `json:"servers"`
	MS      int64    `json:"ms"`
	KeyFile string   `json:"keyFile,omitempty"` // --write-key
}

// restoreEscrow is restore --escrow: services without the key file, the
// head blob from --blob or the ENS pointer, the agent key from its escrow,
// then the usual verified restore into an empty target; keyFile, if set,
// receives the agent key once the restore verified.
func restoreEscrow(ctx context.Context, env *cmdEnv, cfgPath, id, blob, dir, path, keyFile string, jsonOut bool) error {
	cfg, ac, log, err := loadAgentConfig(env, cfgPath, id, "")
	if err != nil {
		return err
	}
	target := dir
	if target == "" {
		if path != "" {
			return usageErrorf("--path restores into --dir DIR")
		}
		target = ac.BrainDir
	}
	svc, err := compose.Build(ctx, cfg, log, compose.Options{ReadOnly: true, NoKey: true})
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("startup: %w", err))
	}
	defer svc.Close()
	if blob == "" {
		if blob, _, err = svc.Latest(ctx, ac); err != nil {
			return err
		}
	}
	sd, err := compose.OpenState(cfg)
	if err != nil {
		return err
	}
	defer sd.Close()
	// NoKey: only the escrow's key, never one derived from an absent
	// key file.
	pipe := svc.Pipeline(ac, sd.SpoolDir(), nil)
	rec, err := pipe.RecoverAgentKey(ctx, blob)
	if err != nil {
		return err
	}
	res, err := pipe.RestoreWith(ctx, blob, target, snapshot.RestoreOptions{Path: path})
	if err != nil {
		return err
	}
	if keyFile != "" {
		// Only a key that just restored a verified brain is saved.
		if err := cipher.WriteKeyFile(keyFile, cipher.Key(pipe.AgentKey.Bytes())); err != nil {
			return fmt.Errorf("brain restored in %s, but the agent key was not saved: %w", target, err)
		}
	}
	out := restoreOutput{Agent: id, Dir: target, Origin: "restored", BlobID: blob, Path: path,
		Escrow: &escrowOutput{KeyID: rec.KeyID, Bytes: rec.EscrowBytes, Servers: rec.Servers, MS: rec.Took.Milliseconds(), KeyFile: keyFile}}
	out.BundleHash, out.Files, out.Bytes = res.BundleHash.String(), res.Files, res.Bytes
	out.BlobBytes, out.Skipped, out.Warnings = res.BlobSize, res.Skipped, res.Warnings
	out.Format, out.Downloaded, out.Ranges = string(res.Format), res.Downloaded, res.Ranges
	out.DownloadMS, out.UnpackMS = res.Download.Milliseconds(), res.Unpack.Milliseconds()
	return printRestore(env, out, jsonOut)
}
