package main

import (
	"context"
	"errors"
)

// runPointer arrives with a later change.
func runPointer(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("pointer: not implemented yet")
}
