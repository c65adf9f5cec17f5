package main

import (
	"context"
	"errors"
)

// runReceipts arrives with a later change.
func runReceipts(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("receipts: not implemented yet")
}
