package ens

import (
	"errors"
	"testing"
)

// A closed write gate sends no transaction: the nonce does not move and
// the record keeps its value; opened again, the write goes through.
func TestWriteGateRefusesBeforeSigning(t *testing.T) {
	e := newEnv(t, "agent.eth")
	ctx := t.Context()
	refused := errors.New("fenced")
	var gate error = refused
	e.client.writeGate = func() error { return gate }
	before := e.nonce(t, agentKey)
	if _, err := e.client.Write(ctx, "agent.eth", blobID(1), ""); !errors.Is(err, refused) {
		t.Fatalf("write with the gate closed: %v", err)
	}
	if after := e.nonce(t, agentKey); after != before {
		t.Fatalf("nonce moved from %d to %d: a transaction was sent", before, after)
	}
	if _, err := e.client.Read(ctx, "agent.eth"); !errors.Is(err, ErrNoPointer) {
		t.Fatalf("record written through a closed gate: %v", err)
	}
	gate = nil
	if _, err := e.client.Write(ctx, "agent.eth", blobID(1), ""); err != nil {
		t.Fatal(err)
	}
	e.mustRead(t, "agent.eth", blobID(1))
}
