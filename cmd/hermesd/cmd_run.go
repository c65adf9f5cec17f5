package main

import (
	"context"
	"errors"
)

// runRun arrives with a later change.
func runRun(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("run: not implemented yet")
}
