// Package etcdtest runs real etcd members in the test's process
// (go.etcd.io/etcd/server/v3/embed) on 127.0.0.1: one, or a cluster of
// three whose members a test stops and starts again to lose and regain a
// majority. Only test files import it, so no binary links the etcd
// server.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Cluster is a running etcd cluster.
type Cluster struct {
	t       testing.TB
	Members []*Member
}

// Member is one etcd member.
type Member struct {
	Name      string
	ClientURL string
	cfg       *embed.Config

	mu sync.Mutex
	e  *embed.Etcd // nil while stopped
}

// startTimeout bounds a member's start (a cluster's first election).
const startTimeout = 60 * time.Second

// Start runs an n-member cluster until the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	dir := t.TempDir()
	var initial []string
	for i := range n {
		peer, client := freePort(t), freePort(t)
		name := fmt.Sprintf("m%d", i)
		cfg := embed.NewConfig()
		cfg.Name = name
		cfg.Dir = filepath.Join(dir, name)
		cfg.ListenPeerUrls = []url.URL{{Scheme: "http", Host: peer}}
		cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
		cfg.ListenClientUrls = []url.URL{{Scheme: "http", Host: client}}
		cfg.AdvertiseClientUrls = cfg.ListenClientUrls
		cfg.InitialClusterToken = "etcdtest"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.UnsafeNoFsync = true
		initial = append(initial, name+"=http://"+peer)
		c.Members = append(c.Members, &Member{Name: name, ClientURL: "http://" + client, cfg: cfg})
	}
	for _, m := range c.Members {
		m.cfg.InitialCluster = strings.Join(initial, ",")
	}
	// Members of a new cluster wait for each other: start them together.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, m := range c.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.start()
		}()
	}
	wg.Wait()
	t.Cleanup(c.Close)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// freePort returns a 127.0.0.1 port nothing listens on at the moment.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (m *Member) start() error {
	e, err := embed.StartEtcd(m.cfg)
	if err != nil {
		return fmt.Errorf("etcd member %s: %w", m.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd member %s: %w", m.Name, err)
	case <-time.After(startTimeout):
		e.Close()
		return fmt.Errorf("etcd member %s not ready after %s", m.Name, startTimeout)
	}
	m.mu.Lock()
	m.e = e
	m.mu.Unlock()
	return nil
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.ClientURL
	}
	return out
}

// Stop stops member i (as a crash would: its data stays).
func (c *Cluster) Stop(i int) {
	m := c.Members[i]
	m.mu.Lock()
	e := m.e
	m.e = nil
	m.mu.Unlock()
	if e != nil {
		// As a crash: raft stops at once (a graceful stop would keep
		// the member leader, expiring leases, while its gRPC server
		// waits for the clients' streams to end).
		e.Server.HardStop()
		e.Close()
	}
}

// Restart starts a stopped member i again on its data. Members that
// restart together (a lost majority coming back) must be restarted
// together: RestartAll.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if err := c.Members[i].start(); err != nil {
		c.t.Fatal(err)
	}
}

// RestartAll starts the stopped members among idx together.
func (c *Cluster) RestartAll(idx ...int) {
	c.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(idx))
	for k, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = c.Members[i].start()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.t.Fatal(err)
		}
	}
}

// Close stops every member.
func (c *Cluster) Close() {
	for i := range c.Members {
		c.Stop(i)
	}
}

// Client is a client of the whole cluster, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		// As fleet.Dial: a member that comes back is tried again within
		// a second.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
