package ens

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/ensname"
)

// Errors callers branch on.
var (
	// ErrNoPointer: the name exists but has no agent-snapshot record.
	ErrNoPointer = errors.New("ens: no agent-snapshot record")
	// ErrNoResolver: the name exists but has no resolver, so it has no
	// records at all. errors.Is(err, ErrNoPointer) is true as well.
	ErrNoResolver error = &childError{msg: "ens: name has no resolver", parent: ErrNoPointer}
	// ErrNameNotFound: the name has neither an owner nor a resolver in the
	// registry (it was never registered, or was released).
	ErrNameNotFound = errors.New("ens: name not found in the registry")
	// ErrInvalidName: ENSIP-15 rejects the name.
	ErrInvalidName = ensname.ErrInvalid
	// ErrConflict: the record does not hold the expected previous value
	// (see *ConflictError).
	ErrConflict = errors.New("ens: agent-snapshot record changed by another writer")
	// ErrNotAuthorized: the signer may not set records of the name (see
	// *NotAuthorizedError).
	ErrNotAuthorized = errors.New("ens: signer not authorised for the name")
	// ErrReverted: the transaction reverted (see *RevertError).
	ErrReverted = errors.New("ens: transaction reverted")
	// ErrReadOnly: a write was attempted without a signer.
	ErrReadOnly = errors.New("ens: no signer configured (read-only client)")
	// ErrFeeTooHigh: the base fee is above the configured maximum fee per
	// gas; the write should wait rather than pay more.
	ErrFeeTooHigh = errors.New("ens: base fee above the maximum fee per gas")
	// ErrGasCap: the transaction needs more gas than the configured cap.
	ErrGasCap = errors.New("ens: gas above the configured cap")
	// ErrWrongChain: the node's chain id is not the configured one.
	ErrWrongChain = errors.New("ens: wrong chain")
	// ErrNoRegistry: there is no contract at the registry address.
	ErrNoRegistry = errors.New("ens: no ENS registry at the configured address")
	// ErrMixedResolvers: WriteMany got names with different resolvers.
	ErrMixedResolvers = errors.New("ens: names have different resolvers")
	// ErrUnavailable: the node could not be reached or gave no usable
	// answer (connection refused or reset, timeout, HTTP 5xx/429, a cut or
	// garbled response). Unlike the errors above it says nothing about the
	// name or the chain: try again later (Ping tells when).
	ErrUnavailable = errors.New("ens: chain unreachable")
	// ErrNoUniversalResolver: there is no contract at the configured
	// Universal Resolver address (errors.Is(err, ErrNoRegistry) is true as
	// well: the configuration names the wrong network or address).
	ErrNoUniversalResolver error = &childError{msg: "ens: no Universal Resolver at the configured address", parent: ErrNoRegistry}
	// ErrNoRecords: there is no contract at a records client's records
	// address (errors.Is(err, ErrNoRegistry) is true as well).
	ErrNoRecords error = &childError{msg: "ens: no records contract at the configured address", parent: ErrNoRegistry}
	// ErrRecordsClient: a registry method (Lookup, Owner, Transfer) was
	// called on a records client, which knows no registry.
	ErrRecordsClient = errors.New("ens: a records client has no registry")
	// ErrNoMulticall: WriteMany got several updates for a resolver without
	// multicall(bytes[]); WriteBatches sends them one by one.
	ErrNoMulticall = errors.New("ens: the resolver has no multicall")
	// ErrTxDropped: a sent transaction can never be mined as it is: the
	// node does not know it any more (a restarted node lost its pool), or
	// it waits for a nonce the chain will not reach (the chain went back,
	// a reorg or an older chain restored, below the nonce it was sent
	// with). The client's nonce is read from the node again; send again.
	ErrTxDropped = errors.New("ens: transaction dropped")

	// CCIP-read (EIP-3668). A gateway that cannot be reached is
	// ErrGatewayUnavailable, which matches ErrUnavailable (try again
	// later); every other failure of an offchain lookup matches ErrOffchain,
	// a definitive refusal of what a resolver or its gateway sent.

	// ErrGatewayUnavailable: no gateway of a lookup answered: connection
	// refused or reset, no complete answer within the gateway timeout, an
	// HTTP 5xx (after trying every URL the lookup names).
	ErrGatewayUnavailable error = &childError{msg: "ens: gateway unreachable", parent: ErrUnavailable}
	// ErrOffchain: an offchain lookup failed; one of the errors below.
	ErrOffchain = errors.New("ens: offchain lookup failed")
	// ErrLookupInvalid: the resolver's OffchainLookup breaks EIP-3668 or
	// hermesd's bounds: its sender is not the contract called, it is
	// malformed, or it names no gateway URL hermesd may fetch (only http
	// and https, without credentials).
	ErrLookupInvalid error = &childError{msg: "ens: invalid offchain lookup", parent: ErrOffchain}
	// ErrLookupLimit: more nested lookups (MaxLookups) or gateway
	// requests than one resolution may make.
	ErrLookupLimit error = &childError{msg: "ens: offchain lookups past the limit", parent: ErrOffchain}
	// ErrGatewayRefused: a gateway answered 4xx, which ends the lookup
	// (EIP-3668).
	ErrGatewayRefused error = &childError{msg: "ens: gateway refused the lookup", parent: ErrOffchain}
	// ErrGatewayAnswer: a gateway's answer is unusable: larger than the
	// bound, not {"data": "0x…"}, an unexpected status.
	ErrGatewayAnswer error = &childError{msg: "ens: unusable gateway answer", parent: ErrOffchain}
	// ErrAnswerRejected: the resolver's callback refused the gateway's
	// answer (e.g. a signature from a key it does not trust).
	ErrAnswerRejected error = &childError{msg: "ens: resolver rejected the gateway's answer", parent: ErrOffchain}
)

// childError is a sentinel that also matches a more general sentinel.
type childError struct {
	msg    string
	parent error
}

func (e *childError) Error() string        { return e.msg }
func (e *childError) Is(target error) bool { return errors.Is(e.parent, target) }

// ConflictError reports a failed compare-and-set. Nothing was sent.
type ConflictError struct {
	Name     string // normalised
	Expected string
	Actual   string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("ens: %s: agent-snapshot is %q, expected %q (changed by another writer; nothing sent)", e.Name, e.Actual, e.Expected)
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// NotAuthorizedError says who owns the name and who tried to write or
// transfer it. The contracts' own checks revert without a reason, so this
// is reported before anything is sent.
type NotAuthorizedError struct {
	Name   string // normalised
	Owner  common.Address
	Signer common.Address
	// Resolver is the resolver that refused a write; zero when the
	// registry refused a Transfer.
	Resolver common.Address
}

func (e *NotAuthorizedError) Error() string {
	if e.Owner == (common.Address{}) && e.Resolver != (common.Address{}) {
		// A records client: who may write is the contract's own rule.
		return fmt.Sprintf("ens: the records contract %s refused a simulated setText(bytes32,string,string) of %s from signer %s: "+
			"not authorised there (an L2 registry's owner or approved account?), or not a contract with that setter (nothing sent)", e.Resolver, e.Name, e.Signer)
	}
	if e.Resolver == (common.Address{}) {
		return fmt.Sprintf("ens: %s is owned by %s; signer %s is neither the owner nor an operator it approved in the registry, so it cannot transfer the name (nothing sent)", e.Name, e.Owner, e.Signer)
	}
	return fmt.Sprintf("ens: %s is owned by %s; signer %s is neither the owner nor authorised by it on resolver %s (nothing sent)", e.Name, e.Owner, e.Signer, e.Resolver)
}

func (e *NotAuthorizedError) Is(target error) bool { return target == ErrNotAuthorized }

// RevertError reports a transaction that reverted: mined with status 0, or
// (Simulated) rejected by gas estimation before it was sent.
type RevertError struct {
	Names       []string
	TxHash      common.Hash // zero when Simulated
	BlockNumber uint64
	GasUsed     uint64
	GasLimit    uint64
	Simulated   bool
	Cause       error // the node's error for a simulated revert
}

func (e *RevertError) Error() string {
	if e.Simulated {
		return fmt.Sprintf("ens: the transaction for %v would revert (nothing sent): %v", e.Names, e.Cause)
	}
	return fmt.Sprintf("ens: transaction %s for %v reverted in block %d (status 0, gas used %d of %d)", e.TxHash, e.Names, e.BlockNumber, e.GasUsed, e.GasLimit)
}

func (e *RevertError) Is(target error) bool { return target == ErrReverted }
func (e *RevertError) Unwrap() error        { return e.Cause }

// feeError reports a base fee above the cap.
type feeError struct {
	baseFee, maxFee *big.Int
}

func (e *feeError) Error() string {
	return fmt.Sprintf("ens: base fee %s wei is above the maximum fee per gas %s wei; not sending", e.baseFee, e.maxFee)
}

func (e *feeError) Is(target error) bool { return target == ErrFeeTooHigh }

// joinErrs returns the only error itself, several joined, or nil.
func joinErrs(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}
