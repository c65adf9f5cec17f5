package devetcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func client(t *testing.T, c *Cluster) *clientv3.Client {
	t.Helper()
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// put writes k until etcd takes it or limit passes: a write in flight
// when a member crashes fails (etcd cannot say whether it applied), and a
// client retries it.
func put(t *testing.T, cl *clientv3.Client, k, v string, limit time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	for {
		_, err := cl.Put(ctx, k, v)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func get(t *testing.T, cl *clientv3.Client, k string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := cl.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return ""
	}
	return string(r.Kvs[0].Value)
}

// TestThreeMembers: a 3-member cluster on 127.0.0.1 takes writes with one
// member down (its leader, the harder case), refuses them with two down,
// and serves everything written before once the majority is back.
func TestThreeMembers(t *testing.T) {
	c, err := Start(Options{Dir: t.TempDir(), Members: 3, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := client(t, c)
	if err := put(t, cl, "k", "1", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	leader := -1
	for i, m := range c.Members() {
		if m.IsLeader() {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no member leads")
	}
	c.Stop(leader)
	if c.Member(leader).Running() {
		t.Fatal("a stopped member runs")
	}
	if err := put(t, cl, "k", "2", 30*time.Second); err != nil {
		t.Fatalf("one member of three down: %v", err)
	}
	other := (leader + 1) % 3
	c.Stop(other)
	err = put(t, cl, "k", "3", 2*time.Second)
	if err == nil {
		t.Fatal("two members of three down, and a write succeeded")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	_, err = cl.Get(ctx, "k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) && status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Unavailable {
		t.Fatalf("a linearizable read without a majority: %v, want it to time out", err)
	}
	for _, i := range []int{leader, other} {
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitReady(); err != nil {
		t.Fatal(err)
	}
	// The write that timed out may still be applied: it was proposed to
	// the member that stayed up, as with any etcd.
	if v := get(t, cl, "k"); v != "2" && v != "3" {
		t.Fatalf("after the majority came back: k = %q, want 2 (or 3)", v)
	}
	if err := put(t, cl, "k", "4", 30*time.Second); err != nil {
		t.Fatalf("after the majority came back: %v", err)
	}
}

// TestRestartKeepsData: a single member started again on its directory and
// fixed ports keeps its keys (the devnet's etcd across make fleet runs).
func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	// Fixed ports: the client port and the peer port after it, both
	// free a moment ago.
	first := 0
	for try := 0; first == 0 && try < 20; try++ {
		p, err := ports(0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p[0]+1)); err == nil {
			l.Close()
			first = p[0]
		}
	}
	if first == 0 {
		t.Fatal("no two free ports in a row")
	}
	o := Options{Dir: dir, ClientPort: first, NoFsync: true}
	c, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	cl := client(t, c)
	if err := put(t, cl, "k", "kept", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	c.Close()
	if c, err = Start(o); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v := get(t, client(t, c), "k"); v != "kept" {
		t.Fatalf("k = %q after a restart", v)
	}
}
