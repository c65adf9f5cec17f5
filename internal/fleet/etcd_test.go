package fleet

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermesd/hermesd/internal/devetcd"
)

// testEtcd is a cluster of real etcd members in the test's process.
type testEtcd struct {
	*devetcd.Cluster
	t testing.TB
}

// startEtcd runs a cluster of members until the test ends.
func startEtcd(t testing.TB, members int) *testEtcd {
	t.Helper()
	c, err := devetcd.Start(devetcd.Options{Dir: t.TempDir(), Members: members, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &testEtcd{Cluster: c, t: t}
}

// Client is a client of the whole cluster, as a node dials it, closed
// when the test ends.
func (c *testEtcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := Dial(Conn{Endpoints: c.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Restart starts member i again and waits until it serves.
func (c *testEtcd) Restart(i int) { c.RestartAll(i) }

// RestartAll starts the members idx again together and waits until
// they serve.
func (c *testEtcd) RestartAll(idx ...int) {
	c.t.Helper()
	if err := c.Cluster.RestartAll(idx...); err != nil {
		c.t.Fatal(err)
	}
}
