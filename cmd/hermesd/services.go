package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/state"
)

// agentCommand is what the one-shot agent commands (restore, log) share:
// the configuration, the agent, a logger and read-only services.
type agentCommand struct {
	cfg   *config.Config
	agent *config.Agent
	log   *slog.Logger
	svc   *compose.Services
}

// openAgent loads the configuration and builds read-only services (an
// init container or a listing needs no chain key). Close it when done.
func openAgent(ctx context.Context, env *cmdEnv, cfgPath, id, level string) (*agentCommand, error) {
	cfg, ac, log, err := loadAgentConfig(env, cfgPath, id, level)
	if err != nil {
		return nil, err
	}
	svc, err := compose.Build(ctx, cfg, log, compose.Options{ReadOnly: true})
	if err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("startup: %w", err))
	}
	return &agentCommand{cfg: cfg, agent: ac, log: log, svc: svc}, nil
}

// loadAgentConfig loads the configuration, finds the agent and sets up the
// logger.
func loadAgentConfig(env *cmdEnv, cfgPath, id, level string) (*config.Config, *config.Agent, *slog.Logger, error) {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return nil, nil, nil, err
	}
	ac, err := cfg.Agent(id)
	if err != nil {
		return nil, nil, nil, withCode(exitUsage, err)
	}
	if level == "" {
		level = cfg.Log.Level
	}
	log, err := newLogger(env.stderr, level, cfg.Log.Format)
	if err != nil {
		return nil, nil, nil, withCode(exitUsage, err)
	}
	return cfg, ac, log, nil
}

func (a *agentCommand) Close() { a.svc.Close() }

// agentState is an agent opened on the locked state directory.
type agentState struct {
	*agent.Agent
	dir *state.Dir
}

// openAgentState is how a command acts on an agent with no daemon
// running: it takes the state directory's lock and opens agent id on it.
// When a running hermesd holds the lock, lockedHint (what to do instead)
// ends the error. Close it when done.
func openAgentState(svc *compose.Services, cfg *config.Config, id, lockedHint string) (*agentState, error) {
	sd, err := compose.OpenState(cfg)
	if err != nil {
		if errors.Is(err, state.ErrLocked) {
			return nil, fmt.Errorf("%w; %s", err, lockedHint)
		}
		return nil, err
	}
	a, err := svc.OpenAgent(sd, id, nil)
	if err != nil {
		sd.Close()
		return nil, err
	}
	return &agentState{Agent: a, dir: sd}, nil
}

// Close closes the agent, which saves its state, then releases the state
// directory, and reports what failed.
func (s *agentState) Close() error { return errors.Join(s.Agent.Close(), s.dir.Close()) }
