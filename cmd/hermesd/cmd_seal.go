package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/redact"
	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/sealserver"
	"github.com/hermesd/hermesd/internal/secretfile"
)

const sealHelp = `Subcommands:
  serve    run a local Seal key server (one master key, the real HTTP API)
  keygen   create a key server master key file, or (--sui) a requester's Sui key
  pubkey   print the public side of a key file: a master key's public key and
           object ID, or (--sui) a Sui key's address
  check    verify the configured key servers: each proves it holds the
           master key of its configured public key (GET /v1/service)

Run 'hermesd seal <subcommand> -h' for its flags.`

func runSeal(ctx context.Context, env *cmdEnv, args []string) error {
	return group{name: "seal", tail: "[flags]", help: sealHelp, verbs: []command{
		{name: "serve", run: runSealServe},
		{name: "keygen", run: runSealKeygen},
		{name: "pubkey", run: runSealPubkey},
		{name: "check", run: runSealCheck},
	}}.run(ctx, env, args)
}

const sealServeHelp = `Run a Seal key server on this machine: one master key behind the real key
server's HTTP API (POST /v1/fetch_key, GET /v1/service), for the devnet,
tests, offline drills, or a self-hosted server the seal section lists.
Requests are verified as Seal's server verifies them (PTB, certificate,
signatures); the policy is native instead of a Move dry run:

  account_based  the identity must be the requester's Sui address (Seal's
                 patterns::account_based; what hermesd seals to by default)
  allowlist      only the --allow addresses get keys, for any identity
  open           every requester whose signatures verify gets keys

The server's object ID defaults to one derived from its public key ('hermesd
seal pubkey' prints it); give the on-chain KeyServer object's ID with
--object-id for a registered server. It listens on loopback only unless
--allow-remote is given, and runs until interrupted.`

func runSealServe(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "seal serve",
		"seal serve --master-key FILE [--listen ADDR] [--policy account_based|allowlist|open] [--allow ADDR]... [--package ID]... [--object-id ID] [--allow-remote]",
		sealServeHelp)
	keyFile := fs.String("master-key", "", "the master key `FILE` ('hermesd seal keygen -o FILE'; required)")
	listen := fs.String("listen", sealserver.DefaultAddr, "listen on `ADDR` (host:port)")
	policy := fs.String("policy", "account_based", "who gets keys: account_based, allowlist or open")
	var allow, packages listFlag
	fs.Var(&allow, "allow", "a Sui `ADDRESS` the allowlist policy serves (repeatable)")
	fs.Var(&packages, "package", "serve only this policy package `ID` (repeatable; default: any)")
	objectID := fs.String("object-id", "", "the server's on-chain KeyServer object `ID` (default: derived from its public key)")
	allowRemote := fs.Bool("allow-remote", false, "allow listening on a non-loopback address")
	verbose := fs.Bool("v", false, "log every request")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageErrorf("seal serve: unexpected argument %q", fs.Arg(0))
	case *keyFile == "":
		return usageErrorf("seal serve: --master-key FILE is required (create one with 'hermesd seal keygen -o FILE')")
	}
	var pol sealserver.Policy
	switch *policy {
	case "account_based":
		pol = sealserver.AccountBased()
	case "open":
		pol = sealserver.Open()
	case "allowlist":
		if len(allow) == 0 {
			return usageErrorf("seal serve: --policy allowlist needs at least one --allow ADDRESS")
		}
		var users []seal.Address
		for _, a := range allow {
			u, err := seal.ParseAddress(a)
			if err != nil {
				return usageErrorf("seal serve: --allow %q: not a Sui address", a)
			}
			users = append(users, u)
		}
		pol = sealserver.Allowlist(users...)
	default:
		return usageErrorf("seal serve: --policy %q is not one of account_based, allowlist, open", *policy)
	}
	if len(allow) > 0 && *policy != "allowlist" {
		return usageErrorf("seal serve: --allow is only used with --policy allowlist")
	}
	var pkgs []seal.Address
	for _, p := range packages {
		a, err := seal.ParseAddress(p)
		if err != nil {
			return usageErrorf("seal serve: --package %q: not a Sui object ID", p)
		}
		pkgs = append(pkgs, a)
	}
	if err := config.CheckListen(*listen, *allowRemote); err != nil {
		return usageErrorf("seal serve: --listen: %v", err)
	}
	mk, err := seal.ReadMasterKeyFile(*keyFile)
	if err != nil {
		return usageErrorf("seal serve: %v", err)
	}
	id := sealserver.LocalObjectID(mk.PublicKey())
	if *objectID != "" {
		if id, err = seal.ParseAddress(*objectID); err != nil {
			return usageErrorf("seal serve: --object-id %q: not a Sui object ID", *objectID)
		}
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: level}))
	srv, err := sealserver.New(sealserver.Config{
		ObjectID:         id,
		MasterKey:        mk,
		Policy:           pol,
		Packages:         pkgs,
		AllowNonLoopback: *allowRemote,
		Logger:           log,
	})
	if err != nil {
		return fmt.Errorf("seal serve: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", *listen)
	if err != nil {
		return fmt.Errorf("seal serve: %w", err)
	}
	// Printed, not only logged, so that scripts can wait for this line.
	fmt.Fprintf(env.stderr, "seal key server listening on http://%s (object %s, policy %s)\n", ln.Addr(), id, *policy)
	start := time.Now()
	err = srv.Serve(ctx, ln)
	fmt.Fprintf(env.stderr, "seal key server stopped after %s\n", time.Since(start).Round(time.Second))
	return err
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

const sealKeygenHelp = `Create a Seal key file, mode 0600, never overwriting FILE, and print its
public side (never the key):

  default  a key server master key (32 bytes, hex, as Seal's key server
           and seal-cli write it), for 'hermesd seal serve'; prints the
           public key and the derived object ID for the seal section
  --sui    a requester's Ed25519 Sui key (suiprivkey1…, as the Sui CLI
           exports it), for seal.sui_key; prints its address. Import it
           into the Sui CLI with: sui keytool import "$(cat FILE)" ed25519

Keep a copy of either somewhere safe: a lost master key makes every share
its server held unrecoverable; a lost Sui key loses the identity the
policy lets in.`

func runSealKeygen(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "seal keygen", "seal keygen -o FILE [--sui] [--json]", sealKeygenHelp)
	out := fs.String("o", "", "write the key to `FILE`, which must not exist (required)")
	sui := fs.Bool("sui", false, "create a requester's Sui key instead of a master key")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageErrorf("seal keygen: unexpected argument %q (the output file goes after -o)", fs.Arg(0))
	case *out == "" || *out == "-":
		return usageErrorf("seal keygen: -o FILE is required: keys are written to a file, never printed")
	}
	path, err := filepath.Abs(*out)
	if err != nil {
		return fmt.Errorf("seal keygen: %w", err)
	}
	if *sui {
		k, err := seal.GenerateSuiKey(nil)
		if err != nil {
			return fmt.Errorf("seal keygen: %w", err)
		}
		if err := secretfile.Create(path, []byte(k.Export()+"\n")); err != nil {
			return fmt.Errorf("seal keygen: %w", err)
		}
		return printSealKey(env, path, nil, k, *asJSON)
	}
	mk, err := seal.GenerateMasterKey(nil)
	if err != nil {
		return fmt.Errorf("seal keygen: %w", err)
	}
	if err := seal.WriteMasterKeyFile(path, mk); err != nil {
		return fmt.Errorf("seal keygen: %w", err)
	}
	return printSealKey(env, path, mk, nil, *asJSON)
}

func runSealPubkey(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "seal pubkey", "seal pubkey [--sui] [--json] FILE",
		`Print the public side of a Seal key file: for a master key its public key
and the object ID 'hermesd seal serve' uses by default (the lines to paste
into a seal.key_servers entry); with --sui, a Sui key's address.`)
	sui := fs.Bool("sui", false, "FILE is a Sui key (suiprivkey1… or hex), not a master key")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("seal pubkey needs exactly one FILE")
	}
	path, err := filepath.Abs(pos[0])
	if err != nil {
		return err
	}
	if *sui {
		k, err := seal.ReadSuiKeyFile(path)
		if err != nil {
			return usageErrorf("seal pubkey: %v", err)
		}
		return printSealKey(env, path, nil, k, *asJSON)
	}
	mk, err := seal.ReadMasterKeyFile(path)
	if err != nil {
		return usageErrorf("seal pubkey: %v (a Sui key needs --sui)", err)
	}
	return printSealKey(env, path, mk, nil, *asJSON)
}

func printSealKey(env *cmdEnv, path string, mk *seal.MasterKey, sui *seal.SuiKey, asJSON bool) error {
	type out struct {
		Path      string `json:"path"`
		Kind      string `json:"kind"`
		ObjectID  string `json:"object_id,omitempty"`
		PublicKey string `json:"public_key,omitempty"`
		Address   string `json:"address,omitempty"`
	}
	o := out{Path: path}
	if mk != nil {
		pk := mk.PublicKey()
		o.Kind, o.ObjectID, o.PublicKey = "master", sealserver.LocalObjectID(pk).String(), pk.String()
	} else {
		o.Kind, o.Address = "sui", sui.Address().String()
	}
	if asJSON {
		return json.NewEncoder(env.stdout).Encode(o)
	}
	if mk != nil {
		_, err := fmt.Fprintf(env.stdout, "%s\n  object_id: %q\n  public_key: %s\n", o.Path, o.ObjectID, o.PublicKey)
		return err
	}
	_, err := fmt.Fprintf(env.stdout, "%s\n  address: %s\n", o.Path, o.Address)
	return err
}

func runSealCheck(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "seal check", "seal check [-config FILE]",
		`Ask every key server of the seal section for its proof of possession
(GET /v1/service) and verify it against the configured public key and
object ID: run it after copying public keys into the configuration, before
sealing anything to them. Also prints the requester's Sui address (the
identity policy account_based seals to). Committee aggregators do not
answer /v1/service. Exit 0 only when every server checks out.`)
	cfgPath := configFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("seal check: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if !cfg.SealEnabled() {
		return usageErrorf("seal check: %s has no seal section", config.ResolvePath(*cfgPath))
	}
	s, err := compose.Sealing(cfg, nil)
	if err != nil {
		return withCode(exitUsage, err)
	}
	fmt.Fprintf(env.stdout, "requester %s, policy %s, package %s, threshold %d\n",
		s.Signer.Address(), s.Policy.Module, s.Client.Config().PackageID, s.Client.Config().Threshold)
	failed := 0
	for _, k := range s.Client.Config().Servers {
		if err := s.Client.CheckServer(ctx, k.ObjectID); err != nil {
			failed++
			fmt.Fprintf(env.stdout, "FAIL %s: %s\n", k.ObjectID, sanitize(err.Error()))
			continue
		}
		fmt.Fprintf(env.stdout, "ok   %s %s\n", k.ObjectID, sanitize(redact.URL(k.URL)))
	}
	if failed > 0 {
		return fmt.Errorf("seal check: %d of %d key servers failed", failed, len(s.Client.Config().Servers))
	}
	return nil
}
