package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/daemon"
)

// agentCommand is what the one-shot agent commands (restore, log) share:
// the configuration, the agent, a logger and read-only services.
type agentCommand struct {
	cfg   *config.Config
	agent *config.Agent
	log   *slog.Logger
	svc   daemon.Services
}

// openAgent loads the configuration and builds read-only services (an
// init container or a listing needs no chain key). Close it when done.
func openAgent(ctx context.Context, env *cmdEnv, cfgPath, id, level string) (*agentCommand, error) {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	ac, err := cfg.Agent(id)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	if level == "" {
		level = cfg.Log.Level
	}
	log, err := newLogger(env.stderr, level, cfg.Log.Format)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	svc, err := daemon.Build(ctx, cfg, log, daemon.BuildOptions{ReadOnly: true})
	if err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("startup: %w", err))
	}
	return &agentCommand{cfg: cfg, agent: ac, log: log, svc: svc}, nil
}

func (a *agentCommand) Close() {
	if a.svc.ENS != nil {
		a.svc.ENS.Close()
	}
}
