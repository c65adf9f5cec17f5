package main

import (
	"context"
	"errors"
)

// runWalrus arrives with a later change.
func runWalrus(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("walrus: not implemented yet")
}
