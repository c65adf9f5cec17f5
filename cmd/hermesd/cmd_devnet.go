package main

import (
	"context"
	"errors"
)

// runDevnet arrives with a later change.
func runDevnet(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("devnet: not implemented yet")
}
