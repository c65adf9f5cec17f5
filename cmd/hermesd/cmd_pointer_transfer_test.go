package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/ens"
)

// TestPointerTransfer moves a name on the real ENS registry of a local
// chain: refused without --yes, sent with it, read back, and after it the
// old owner can neither write the record nor transfer the name again.
func TestPointerTransfer(t *testing.T) {
	chain, keyFile := pointerChain(t)
	rpc := "--rpc=" + chain.URL()
	key := "--key-file=" + keyFile
	buyer := crypto.PubkeyToAddress(devchain.DeriveKey("cli-buyer").PublicKey)
	seller := crypto.PubkeyToAddress(devchain.DeriveKey("cli-agent").PublicKey)
	reader, err := ens.New(t.Context(), ens.Config{RPCURL: chain.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	owner := func(name string) common.Address {
		t.Helper()
		o, err := reader.Owner(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	v1 := strings.Repeat("A", 43)
	if _, _, err := runPointerCmd(t, "set", "agent.eth", v1, "--expect=", rpc, key, "--poll=20ms"); err != nil {
		t.Fatal(err)
	}

	// Without --yes: the plan is printed, nothing is sent, exit 2.
	out, _, err := runPointerCmd(t, "transfer", "agent.eth", "--to", buyer.Hex(), rpc, key)
	if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("transfer without --yes: code %d, %v", code, err)
	}
	if !strings.Contains(out, "would transfer agent.eth from "+seller.Hex()+" to "+buyer.Hex()) {
		t.Fatalf("plan: %q", out)
	}
	if o := owner("agent.eth"); o != seller {
		t.Fatalf("owner %s after a transfer without --yes", o)
	}

	out, _, err = runPointerCmd(t, "transfer", "Agent.eth", "--to", strings.ToLower(buyer.Hex()), "--yes", "--json", rpc, key, "--poll=20ms")
	if err != nil {
		t.Fatal(err)
	}
	var res pointerTransferResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Name != "agent.eth" || res.To != buyer.Hex() || res.PreviousOwner != seller.Hex() || !res.Sent || res.Unchanged ||
		!strings.HasPrefix(res.TxHash, "0x") || res.GasUsed == 0 || res.From != seller.Hex() {
		t.Fatalf("result %+v", res)
	}
	if o := owner("agent.eth"); o != buyer {
		t.Fatalf("owner %s after the transfer, want %s", o, buyer)
	}
	// The record stays, and the old owner is locked out of it and of the name.
	if out, _, err := runPointerCmd(t, "get", "agent.eth", rpc); err != nil || out != v1+"\n" {
		t.Fatalf("record after transfer: %q, %v", out, err)
	}
	_, _, err = runPointerCmd(t, "set", "agent.eth", strings.Repeat("B", 43), "--expect", v1, rpc, key, "--poll=20ms")
	if !errorsIsNotAuthorized(err) {
		t.Fatalf("old owner's write after the transfer: %v", err)
	}
	_, _, err = runPointerCmd(t, "transfer", "agent.eth", "--to", seller.Hex(), "--yes", rpc, key, "--poll=20ms")
	if !errorsIsNotAuthorized(err) || !strings.Contains(err.Error(), "nothing sent") {
		t.Fatalf("old owner's transfer back: %v", err)
	}
	if o := owner("agent.eth"); o != buyer {
		t.Fatalf("owner %s after a refused transfer", o)
	}
	// To the current owner: nothing to do, with or without --yes.
	out, _, err = runPointerCmd(t, "transfer", "other.eth", "--to", seller.Hex(), rpc, key)
	if err != nil || !strings.HasPrefix(out, "unchanged") {
		t.Fatalf("transfer to the owner: %q, %v", out, err)
	}

	mixed := buyer.Hex()
	bad := mixed[:2] + strings.Map(func(r rune) rune { // flip the case of every letter: an invalid checksum
		if r >= 'a' && r <= 'f' {
			return r - 'a' + 'A'
		}
		if r >= 'A' && r <= 'F' {
			return r - 'A' + 'a'
		}
		return r
	}, mixed[2:])
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no --to", []string{"transfer", "other.eth", rpc, key}, exitUsage, "--to ADDRESS is required"},
		{"short address", []string{"transfer", "other.eth", "--to", "0x1234", rpc, key}, exitUsage, "not an address"},
		{"no 0x", []string{"transfer", "other.eth", "--to", buyer.Hex()[2:], rpc, key}, exitUsage, "not an address"},
		{"bad checksum", []string{"transfer", "other.eth", "--to", bad, "--yes", rpc, key}, exitUsage, "checksum"},
		{"zero address", []string{"transfer", "other.eth", "--to", "0x0000000000000000000000000000000000000000", "--yes", rpc, key}, exitUsage, "zero address"},
		{"no name", []string{"transfer", "--to", buyer.Hex(), rpc, key}, exitUsage, "exactly one NAME"},
		{"invalid name", []string{"transfer", "a_b.eth", "--to", buyer.Hex(), rpc, key}, exitUsage, ""},
		{"unregistered", []string{"transfer", "nobody.eth", "--to", buyer.Hex(), "--yes", rpc, key}, exitNotFound, "no owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runPointerCmd(t, tc.args...)
			if code := exitCode(err); code != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("code %d (want %d): %v (want %q)", code, tc.code, err, tc.msg)
			}
		})
	}
	if o := owner("other.eth"); o != seller {
		t.Fatalf("other.eth owner %s after refused transfers", o)
	}
}

func errorsIsNotAuthorized(err error) bool { return errors.Is(err, ens.ErrNotAuthorized) }
