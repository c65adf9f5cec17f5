package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/redstuff"
	"github.com/hermesd/hermesd/internal/walruscost"
)

const walrusHelp = `Subcommands:
  serve   run a local Walrus-compatible publisher and aggregator

Run 'hermesd walrus serve -h' for its flags.`

const walrusServeHelp = `Run a Walrus-compatible publisher and aggregator on this machine, for the
devnet, tests and offline work. It speaks the real HTTP API (PUT /v1/blobs,
GET /v1/blobs/{id}, the quilt API, GET /status) and keeps blobs in DIR, so a
restart keeps them. Blob ids are Walrus's own, computed over --shards (a
client checks every blob it reads against its id over its own
cost.walrus_shards, so give both the same count), and quilts are laid out
as Walrus's QuiltV1. Epochs last --epoch each and blobs expire when their
end epoch begins. A store answer reports the encoded length and cost by
Walrus's formula over --shards at --storage-price and --write-price
(defaults: mainnet's 1000 shards and early mainnet's prices).

It listens on loopback only unless --allow-remote is given, and runs until
interrupted (SIGINT or SIGTERM).`

func runWalrus(ctx context.Context, env *cmdEnv, args []string) error {
	return group{name: "walrus", tail: "[flags]", help: walrusHelp, verbs: []command{
		{name: "serve", run: runWalrusServe},
	}}.run(ctx, env, args)
}

func runWalrusServe(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "walrus serve",
		"walrus serve --dir DIR [--listen ADDR] [--epoch DURATION] [--max-body SIZE] [--shards N] [--storage-price FROST] [--write-price FROST] [--allow-remote]", walrusServeHelp)
	dir := fs.String("dir", "", "keep blobs and the epoch clock in `DIR` (required)")
	listen := fs.String("listen", localwalrus.DefaultListen, "listen on `ADDR` (host:port)")
	epoch := fs.Duration("epoch", localwalrus.DefaultEpochDuration, "length of one epoch")
	startEpoch := fs.Uint("start-epoch", localwalrus.DefaultStartEpoch, "epoch `N` of a new DIR (an existing DIR keeps its clock)")
	maxBody := walrusSizeFlag(localwalrus.DefaultMaxBodySize)
	fs.Var(&maxBody, "max-body", "largest blob accepted, e.g. 10MiB (larger bodies get 413, as on public publishers)")
	shards := fs.Int("shards", walruscost.DefaultShards, "shard count `N` blob ids, quilt layouts and the encoded length (what a store is charged for) are computed over")
	storagePrice := fs.Uint64("storage-price", walruscost.DefaultPrice.Storage, "FROST per encoded MiB per epoch")
	writePrice := fs.Uint64("write-price", walruscost.DefaultPrice.Write, "FROST per encoded MiB written")
	allowRemote := fs.Bool("allow-remote", false, "allow listening on a non-loopback address")
	verbose := fs.Bool("v", false, "log every request")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageErrorf("walrus serve: unexpected argument %q", fs.Arg(0))
	case *dir == "":
		return usageErrorf("walrus serve: --dir DIR is required")
	case *epoch <= 0:
		return usageErrorf("walrus serve: --epoch must be positive")
	case *startEpoch == 0 || *startEpoch > 1<<31:
		return usageErrorf("walrus serve: --start-epoch must be at least 1")
	case maxBody <= 0:
		return usageErrorf("walrus serve: --max-body must be positive")
	case redstuff.CheckShards(*shards) != nil:
		return usageErrorf("walrus serve: --shards must be within 4..%d (RS2)", walruscost.MaxShards)
	case *storagePrice == 0 && *writePrice == 0:
		return usageErrorf("walrus serve: --storage-price and --write-price cannot both be 0")
	}
	if err := localwalrus.CheckLoopback(*listen, *allowRemote); err != nil {
		return usageErrorf("walrus serve: --listen %q is not a loopback host:port; pass --allow-remote to serve beyond this machine", *listen)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: level}))
	srv, err := localwalrus.New(localwalrus.Config{
		Dir:           *dir,
		EpochDuration: *epoch,
		StartEpoch:    uint32(*startEpoch),
		MaxBodySize:   int64(maxBody),
		Shards:        *shards,
		Price:         walruscost.Price{Storage: *storagePrice, Write: *writePrice},
		Logger:        log,
		AllowRemote:   *allowRemote,
	})
	if err != nil {
		return fmt.Errorf("walrus serve: %w", err)
	}
	if err := srv.Start(*listen); err != nil {
		return fmt.Errorf("walrus serve: %w", err)
	}
	log.Info("local walrus listening", "url", srv.URL(), "dir", *dir, "epoch", srv.Epoch(),
		"epoch_duration", *epoch, "max_body", config.ByteSize(maxBody).String())
	<-ctx.Done()
	start := time.Now()
	err = srv.Close()
	log.Info("local walrus stopped", "shutdown", time.Since(start).Round(time.Millisecond))
	return err
}

// walrusSizeFlag is a byte size flag accepting the configuration's syntax
// ("10MiB", "512KiB", "1048576").
type walrusSizeFlag int64

func (s *walrusSizeFlag) String() string { return config.ByteSize(*s).String() }

func (s *walrusSizeFlag) Set(v string) error {
	n, err := config.ParseByteSize(v)
	if err != nil {
		return err
	}
	*s = walrusSizeFlag(n)
	return nil
}
