package main

import (
	"context"
	"errors"
)

// runBlob arrives with a later change.
func runBlob(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("blob: not implemented yet")
}
