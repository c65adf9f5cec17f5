package main

import (
	"context"
	"errors"
)

// runDrill arrives with a later change.
func runDrill(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("drill: not implemented yet")
}
