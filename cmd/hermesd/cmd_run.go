package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/daemon"
	"github.com/hermesd/hermesd/internal/gcpace"
)

func runRun(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "run", "run [-config FILE]",
		`Run the daemon: restore missing brains, watch every configured agent,
snapshot on change, publish pointers. SIGINT/SIGTERM stop it after flushing
pending pointers (shutdown_timeout); a second signal aborts the flush.
The local devnet (chain + Walrus) is its own command, hermesd-devnet;
'make run' starts it and this daemon together.`)
	cfgPath := configFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("run takes no arguments")
	}
	// Count signals ourselves: the first one cancels ctx (main's
	// NotifyContext); the second aborts the pointer flush.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if err := requireSigners(cfg, "run"); err != nil {
		return err
	}
	log, err := newLogger(env.stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return withCode(exitUsage, err)
	}
	return runDaemon(ctx, cfg, log, sigs)
}

// runDaemon runs a daemon for cfg until ctx is cancelled, then shuts it down
// within cfg.ShutdownTimeout (sigs aborts the flush).
func runDaemon(ctx context.Context, cfg *config.Config, log *slog.Logger, sigs <-chan os.Signal) error {
	// The daemon's services read and check every secret and touch no
	// network (the chain and Walrus are reached lazily, so an outage does
	// not stop the start): all their errors are the configuration's.
	d, err := daemon.New(ctx, cfg, log, compose.Options{Batch: true, Version: buildVersion()})
	if errors.Is(err, daemon.ErrConfig) {
		return withCode(exitUsage, fmt.Errorf("startup: %w", err))
	}
	if err != nil {
		return err // a locked state directory (5), a port in use (1), ...
	}
	// The collector collects at the live heap plus a bounded headroom, not
	// at twice it (unless GOGC is set): docs/design.md §9, Memory.
	defer gcpace.Start(gcpace.Daemon).Stop()
	log.Info("hermesd started", "version", buildVersion(), "agents", len(cfg.Agents), "state_dir", cfg.StateDir)
	for _, w := range cfg.Warnings() {
		log.Warn("configuration", "warning", w)
	}
	// The first signal cancels ctx (main's NotifyContext); a second one,
	// counted here, aborts the pointer flush.
	abort, done := make(chan struct{}), make(chan struct{})
	defer close(done)
	go func() {
		for n := 0; ; {
			select {
			case <-sigs:
				if n++; n == 2 {
					close(abort)
					return
				}
			case <-done:
				return
			}
		}
	}()
	// The daemon runs until Close, not until the signal: its stop takes
	// the agents' last snapshots before it stops them.
	d.Start(context.WithoutCancel(ctx))
	<-ctx.Done()

	limit := cfg.ShutdownTimeout.D()
	log.Info("shutting down; flushing pending pointers", "limit", limit)
	flushCtx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	go func() {
		select {
		case <-abort:
			log.Warn("second signal: aborting the flush; pending pointers are published on the next start")
			cancel()
		case <-flushCtx.Done():
		}
	}()
	start := time.Now()
	if err := d.Close(flushCtx); err != nil {
		// Nothing is lost (pending pointers are in the state directory
		// and published at the next start), but a supervisor must know.
		if errors.Is(flushCtx.Err(), context.DeadlineExceeded) {
			log.Warn("the flush reached shutdown_timeout", "limit", limit)
		}
		log.Warn("stopped with work left", "error", err, "took", time.Since(start).Round(time.Millisecond))
		return err
	}
	log.Info("hermesd stopped", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// configFlag registers -config.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "configuration file (default $"+config.EnvPath+" or "+config.DefaultPath+")")
}

// requireSigners refuses a command that writes pointers (of agents, or of
// every configured agent) when the configuration has no key to write one
// with; the reading commands never ask for it. One line says which command
// needed the key.
func requireSigners(cfg *config.Config, command string, agents ...*config.Agent) error {
	if err := cfg.CheckSigners(agents...); err != nil {
		return withCode(exitUsage, fmt.Errorf("config %s: %w ('hermesd %s' writes ENS records; restore, drill, status and pointer get need no signer)", cfg.Path, err, command))
	}
	return nil
}

// loadConfig loads the configuration; an invalid one is a usage error.
func loadConfig(flagValue string) (*config.Config, error) {
	c, err := config.Load(config.ResolvePath(flagValue))
	if err != nil {
		if errors.Is(err, config.ErrInvalid) || errors.Is(err, os.ErrNotExist) {
			return nil, withCode(exitUsage, err)
		}
		return nil, withCode(exitUsage, err)
	}
	return c, nil
}
