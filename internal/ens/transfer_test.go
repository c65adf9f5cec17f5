package ens

import (
	"errors"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/hermesd/hermesd/internal/devchain"
)

// TestTransfer moves a name to a second, funded key: the old owner's next
// write is refused before anything is sent, the new owner writes, a
// repeated transfer sends nothing, and keys that own nothing are refused.
func TestTransfer(t *testing.T) {
	e := newEnv(t, "agent.eth", "spare.eth")
	ctx := t.Context()
	heirKey := devchain.DeriveKey("heir")
	heirAddr := crypto.PubkeyToAddress(heirKey.PublicKey)
	if err := e.chain.Fund(ctx, nil, heirAddr); err != nil {
		t.Fatal(err)
	}
	v1 := blobID(1)
	if _, err := e.client.Write(ctx, "agent.eth", v1, ""); err != nil {
		t.Fatal(err)
	}
	if owner, err := e.client.Owner(ctx, "Agent.eth"); err != nil || owner != agentAddr {
		t.Fatalf("Owner = %s, %v", owner, err)
	}

	// Someone who owns nothing cannot transfer, and nothing is sent.
	intruder := newClient(t, e.chain, intruderKey)
	before := e.nonce(t, intruderKey)
	_, err := intruder.Transfer(ctx, "agent.eth", intruder.From())
	var na *NotAuthorizedError
	if !errors.As(err, &na) || na.Owner != agentAddr || na.Resolver != (common.Address{}) || !strings.Contains(err.Error(), "transfer") {
		t.Fatalf("intruder's transfer: %v", err)
	}
	if e.nonce(t, intruderKey) != before {
		t.Fatal("the intruder's transfer was sent")
	}

	res, err := e.client.Transfer(ctx, "Agent.ETH", heirAddr)
	if err != nil {
		t.Fatal(err)
	}
	if res.Unchanged || res.TxHash == (common.Hash{}) || res.BlockNumber == 0 || len(res.Names) != 1 || res.Names[0] != "agent.eth" {
		t.Fatalf("transfer result %+v", res)
	}
	if rcpt, err := e.rpc.TransactionReceipt(ctx, res.TxHash); err != nil || rcpt.Status != 1 || rcpt.Type != 2 {
		t.Fatalf("receipt %+v, %v", rcpt, err)
	}
	if owner, err := e.client.Owner(ctx, "agent.eth"); err != nil || owner != heirAddr {
		t.Fatalf("owner after the transfer: %s, %v", owner, err)
	}
	// Again: the heir owns it already; nothing is sent.
	before = e.nonce(t, agentKey)
	res, err = e.client.Transfer(ctx, "agent.eth", heirAddr)
	if err != nil || !res.Unchanged || res.TxHash != (common.Hash{}) {
		t.Fatalf("repeated transfer: %+v, %v", res, err)
	}

	// The old owner may no longer write, and learns it before sending.
	_, err = e.client.Write(ctx, "agent.eth", blobID(2), v1)
	if !errors.As(err, &na) || na.Owner != heirAddr || na.Signer != agentAddr {
		t.Fatalf("old owner's write: %v", err)
	}
	// Nor transfer it back.
	if _, err := e.client.Transfer(ctx, "agent.eth", agentAddr); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("old owner's transfer: %v", err)
	}
	if e.nonce(t, agentKey) != before {
		t.Fatal("the old owner sent a transaction")
	}
	// The new owner writes, from the record as it was.
	heir := newClient(t, e.chain, heirKey)
	if _, err := heir.Write(ctx, "agent.eth", blobID(2), v1); err != nil {
		t.Fatalf("new owner's write: %v", err)
	}
	e.mustRead(t, "agent.eth", blobID(2))

	// An operator the owner approved in the registry may transfer.
	data, err := e.chain.Artifacts().Registry.ABI.Pack("setApprovalForAll", heirAddr, true)
	if err != nil {
		t.Fatal(err)
	}
	reg := e.chain.RegistryAddress()
	if _, err := e.chain.Transact(ctx, agentKey, devchain.Call{To: &reg, Data: data}); err != nil {
		t.Fatal(err)
	}
	if _, err := heir.Transfer(ctx, "spare.eth", heirAddr); err != nil {
		t.Fatalf("approved operator's transfer: %v", err)
	}
	if owner, err := heir.Owner(ctx, "spare.eth"); err != nil || owner != heirAddr {
		t.Fatalf("spare.eth owner %s, %v", owner, err)
	}

	// What is refused before any check.
	if _, err := heir.Transfer(ctx, "nobody.eth", heirAddr); !errors.Is(err, ErrNameNotFound) {
		t.Fatalf("unregistered: %v", err)
	}
	if _, err := heir.Transfer(ctx, "agent.eth", common.Address{}); err == nil || !strings.Contains(err.Error(), "zero address") {
		t.Fatalf("to the zero address: %v", err)
	}
	if _, err := heir.Transfer(ctx, "a..eth", agentAddr); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("invalid name: %v", err)
	}
	if _, err := newClient(t, e.chain, nil).Transfer(ctx, "agent.eth", agentAddr); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only: %v", err)
	}
	if owner, err := heir.Owner(ctx, "nobody.eth"); err != nil || owner != (common.Address{}) {
		t.Fatalf("owner of an unregistered name: %s, %v", owner, err)
	}

	t.Run("resolver change", func(t *testing.T) { testResolverChange(t, e, heir, intruder) })
}

// testResolverChange moves agent.eth (owned by owner's signer, its record
// blobID(2) on the PublicResolver) to an extended resolver holding
// blobID(3): ResolveAt shows what the name will resolve to before the
// change; someone who owns nothing is refused before anything is sent; a
// resolver that is no contract is refused; the change is one
// setResolver, after which resolution shows the new value; again, nothing
// is sent.
func testResolverChange(t *testing.T, e *env, owner, intruder *Client) {
	ctx := t.Context()
	wild, err := e.chain.DeployWildcardResolver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.chain.SetText(ctx, nil, wild, "agent.eth", TextKey, blobID(3)); err != nil {
		t.Fatal(err)
	}
	if r, err := owner.ResolveAt(ctx, "agent.eth", wild); err != nil || r.Value != blobID(3) || r.Resolver != wild || r.Via != PathExtended {
		t.Fatalf("ResolveAt before the change: %+v, %v", r, err)
	}
	e.mustRead(t, "agent.eth", blobID(2))
	if r, err := owner.ResolverOf(ctx, "agent.eth"); err != nil || r != e.chain.ResolverAddress() {
		t.Fatalf("ResolverOf before the change: %s, %v", r, err)
	}

	before := e.nonce(t, intruderKey)
	_, err = intruder.SetResolver(ctx, "agent.eth", wild)
	var na *NotAuthorizedError
	if !errors.As(err, &na) || !strings.Contains(err.Error(), "cannot change its resolver (nothing sent)") || e.nonce(t, intruderKey) != before {
		t.Fatalf("the intruder's resolver change: %v", err)
	}
	if _, err := owner.PlanResolver(ctx, "agent.eth", common.Address{0xde, 0xad}); err == nil || !strings.Contains(err.Error(), "is not a contract") {
		t.Fatalf("a resolver that is no contract: %v", err)
	}
	if _, err := owner.PlanResolver(ctx, "nobody.eth", wild); !errors.Is(err, ErrNameNotFound) {
		t.Fatalf("an unregistered name: %v", err)
	}
	p, err := owner.PlanResolver(ctx, "agent.eth", wild)
	if err != nil || p.Unchanged || p.Gas == 0 || p.GasPrice == nil || p.GasPrice.Sign() <= 0 || p.From != e.chain.ResolverAddress() {
		t.Fatalf("plan %+v, %v", p, err)
	}
	res, err := owner.SetResolver(ctx, "agent.eth", wild)
	if err != nil || res.Unchanged || res.GasUsed == 0 || res.GasUsed > p.Gas {
		t.Fatalf("SetResolver: %+v, %v (estimate %d)", res, err, p.Gas)
	}
	t.Logf("setResolver: %d gas (estimated %d)", res.GasUsed, p.Gas)
	e.mustRead(t, "agent.eth", blobID(3))
	if rec, err := owner.Lookup(ctx, "agent.eth"); err != nil || rec.Resolver != wild {
		t.Fatalf("registry after the change: %+v, %v", rec, err)
	}
	if r, err := owner.ResolverOf(ctx, "agent.eth"); err != nil || r != wild {
		t.Fatalf("ResolverOf after the change: %s, %v", r, err)
	}
	if res, err := owner.SetResolver(ctx, "agent.eth", wild); err != nil || !res.Unchanged || res.TxHash != (common.Hash{}) {
		t.Fatalf("again: %+v, %v", res, err)
	}
}
