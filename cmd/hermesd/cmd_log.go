package main

import (
	"context"
	"errors"
)

// runLog arrives with a later change.
func runLog(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("log: not implemented yet")
}
