package fleettest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hermesd/hermesd/internal/devetcd"
)

// TestEtcdRequests: the counter sees a client's requests, by service.
func TestEtcdRequests(t *testing.T) {
	cl, err := devetcd.Start(devetcd.Options{Dir: t.TempDir(), NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c, err := clientv3.New(clientv3.Config{Endpoints: cl.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before, err := EtcdRequests()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 5 {
		if _, err := c.Put(ctx, "k", "v"); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.KeepAliveOnce(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	after, err := EtcdRequests()
	if err != nil {
		t.Fatal(err)
	}
	if d := after["KV"] - before["KV"]; d != 5 {
		t.Errorf("KV requests counted: %v, want 5", d)
	}
	// A grant, and a keep-alive on a stream of its own (its opening may
	// count as one more).
	if d := after["Lease"] - before["Lease"]; d < 2 || d > 3 {
		t.Errorf("Lease requests counted: %v, want 2 or 3", d)
	}
}
