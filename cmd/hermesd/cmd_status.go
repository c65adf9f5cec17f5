package main

import (
	"context"
	"errors"
)

// runStatus arrives with a later change.
func runStatus(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("status: not implemented yet")
}
