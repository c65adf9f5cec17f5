package sealserver

import (
	"context"
	"fmt"

	"github.com/hermesd/hermesd/internal/seal"
)

// Request is what a policy decides on: a key request whose certificate and
// signatures have verified.
type Request struct {
	User    seal.Address // the certificate's user: the PTB's sender in Seal's dry run
	Package seal.Address // the package the PTB calls, which namespaces the IDs
	IDs     [][]byte     // the inner IDs, one per seal_approve call
	PTB     *seal.PTB
}

// Policy replaces the Move dry run of seal_approve: a nil error releases the
// keys, an error is answered 403 NoAccess with its message.
type Policy interface {
	Allow(ctx context.Context, r *Request) error
}

// PolicyFunc adapts a function to Policy.
type PolicyFunc func(ctx context.Context, r *Request) error

// Allow calls f.
func (f PolicyFunc) Allow(ctx context.Context, r *Request) error { return f(ctx, r) }

// Open releases keys to every requester whose signatures verify.
func Open() Policy {
	return PolicyFunc(func(context.Context, *Request) error { return nil })
}

// Allowlist releases keys only to the listed Sui addresses.
func Allowlist(users ...seal.Address) Policy {
	set := make(map[seal.Address]bool, len(users))
	for _, u := range users {
		set[u] = true
	}
	return PolicyFunc(func(_ context.Context, r *Request) error {
		if !set[r.User] {
			return fmt.Errorf("address %s is not on the allowlist", r.User)
		}
		return nil
	})
}
