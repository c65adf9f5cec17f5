package main

import (
	"context"
	"errors"
)

// runRestore arrives with a later change.
func runRestore(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("restore: not implemented yet")
}
