// Package devetcd runs real etcd members in this process, on 127.0.0.1:
// the coordination store of a hermesd fleet for the devnet
// (`hermesd-devnet -nodes N`) and for the fleet's tests, which need a
// 3-member cluster whose members they can stop and bring back.
//
// A member is etcd's own server (go.etcd.io/etcd/server/v3/embed), not a
// stand-in: leases expire on its clock, transactions and watches are
// etcd's, and a cluster that lost its majority refuses writes as a real
// one does. Only hermesd-devnet and tests link it; the daemon reaches etcd
// over its client API (internal/arch checks that cmd/hermesd does not
// link the server).
package devetcd

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Options configure a cluster.
type Options struct {
	// Dir holds each member's data directory (Dir/<name>). A cluster
	// started again on the same Dir and ports keeps its keys, revisions
	// and leases.
	Dir string
	// Members is the cluster's size (default 1).
	Members int
	// ClientPort is the first member's client port on 127.0.0.1 and its
	// peer port the one after it, the other members following in pairs; 0
	// picks free ports.
	ClientPort int
	// Token tells this cluster's members from any other's (default
	// "hermesd-dev").
	Token string
	// Log receives the members' warnings and errors ("" prefix per
	// member); nil discards them.
	Log io.Writer
	// NoFsync skips fsync (tests: the data need not survive a machine
	// crash, and fsync on a shared disk is most of a write's time).
	NoFsync bool
	// StartTimeout bounds waiting for a member to join its cluster
	// (default 1 minute).
	StartTimeout time.Duration
}

// Cluster is a running etcd cluster of members in this process.
type Cluster struct {
	opts    Options
	members []*Member
	initial string // name=peerURL,…
}

// Member is one member of a Cluster.
type Member struct {
	Name      string
	Dir       string
	ClientURL string // http://127.0.0.1:PORT
	PeerURL   string

	mu     sync.Mutex
	e      *embed.Etcd   // nil while stopped
	closed chan struct{} // closed when the last stop has let go of Dir
}

// Start starts a cluster of o.Members members and waits until every one
// serves.
func Start(o Options) (*Cluster, error) {
	if o.Dir == "" {
		return nil, errors.New("devetcd: Dir is required")
	}
	if o.Members == 0 {
		o.Members = 1
	}
	if o.Members < 0 || o.Members > 9 {
		return nil, fmt.Errorf("devetcd: %d members: want 1 to 9", o.Members)
	}
	if o.Token == "" {
		o.Token = "hermesd-dev"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = time.Minute
	}
	c := &Cluster{opts: o}
	ports, err := ports(o.ClientPort, 2*o.Members)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range o.Members {
		m := &Member{
			Name:      fmt.Sprintf("etcd-%d", i+1),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
		}
		m.Dir = filepath.Join(o.Dir, m.Name)
		c.members = append(c.members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	c.initial = strings.Join(initial, ",")
	// Every member must be started before any can be ready: a member
	// waits for a quorum of its peers.
	for _, m := range c.members {
		if err := c.launch(m); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, m := range c.members {
		if err := c.ready(m); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// ports returns n ports on 127.0.0.1: first, first+1, … or, with first 0,
// ports that were free a moment ago.
func ports(first, n int) ([]int, error) {
	out := make([]int, 0, n)
	if first != 0 {
		for i := range n {
			out = append(out, first+i)
		}
		return out, nil
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("devetcd: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func (c *Cluster) config(m *Member) (*embed.Config, error) {
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = m.Name, m.Dir
	cu, err := url.Parse(m.ClientURL)
	if err != nil {
		return nil, err
	}
	pu, err := url.Parse(m.PeerURL)
	if err != nil {
		return nil, err
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = c.initial
	cfg.InitialClusterToken = c.opts.Token
	cfg.ClusterState = embed.ClusterStateFlagNew // ignored once the member has data
	cfg.UnsafeNoFsync = c.opts.NoFsync
	// No metrics listener, no compaction: the tests read the whole
	// revision history of a run.
	cfg.AutoCompactionRetention = "0"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger(c.opts.Log, m.Name))
	return cfg, nil
}

// logger writes warnings and errors to w, or nothing.
func logger(w io.Writer, name string) *zap.Logger {
	if w == nil {
		return zap.NewNop()
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.TimeKey = ""
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(w), zapcore.WarnLevel)
	return zap.New(core).Named(name)
}

// launch starts m's server without waiting for it to serve.
func (c *Cluster) launch(m *Member) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.e != nil {
		return nil
	}
	if m.closed != nil {
		<-m.closed // the stopped server still holds its data files
	}
	if err := os.MkdirAll(filepath.Dir(m.Dir), 0o700); err != nil {
		return fmt.Errorf("devetcd: %w", err)
	}
	cfg, err := c.config(m)
	if err != nil {
		return err
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("devetcd: start %s: %w", m.Name, err)
	}
	m.e = e
	return nil
}

// ready waits until m serves clients, which needs a quorum.
func (c *Cluster) ready(m *Member) error {
	m.mu.Lock()
	e := m.e
	m.mu.Unlock()
	if e == nil {
		return fmt.Errorf("devetcd: %s is stopped", m.Name)
	}
	t := time.NewTimer(c.opts.StartTimeout)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("devetcd: %s: %w", m.Name, err)
	case <-t.C:
		return fmt.Errorf("devetcd: %s did not join its cluster within %v", m.Name, c.opts.StartTimeout)
	}
}

// Endpoints are the members' client URLs, the ones stopped included (a
// client skips those it cannot reach).
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.ClientURL
	}
	return out
}

// Client is a client of the whole cluster (the devnet's and the tests';
// a hermesd node dials its own). It tries a member that comes back again
// within a second, where gRPC's default would back off for minutes.
func (c *Cluster) Client() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		})}})
	if err != nil {
		return nil, fmt.Errorf("devetcd: %w", err)
	}
	return cli, nil
}

// Members are the cluster's members, in order.
func (c *Cluster) Members() []*Member { return c.members }

// Member is the i-th member (0-based).
func (c *Cluster) Member(i int) *Member { return c.members[i] }

// Stop stops member i as a crash would (its data stays, for Restart).
// It returns once the member has let go of its clients, which may take
// seconds; a Restart meanwhile waits for it. With a majority stopped the
// cluster takes no writes and serves no linearizable reads.
func (c *Cluster) Stop(i int) { c.members[i].stop() }

// Restart starts member i again on its data and address. It does not wait
// for it to serve: with the majority down, no member can until enough are
// back; WaitReady waits.
func (c *Cluster) Restart(i int) error { return c.launch(c.members[i]) }

// RestartAll starts the members idx again together and waits until every
// running member serves (a lost majority coming back).
func (c *Cluster) RestartAll(idx ...int) error {
	for _, i := range idx {
		if err := c.Restart(i); err != nil {
			return err
		}
	}
	return c.WaitReady()
}

// WaitReady waits until every running member serves.
func (c *Cluster) WaitReady() error {
	for _, m := range c.members {
		if m.Running() {
			if err := c.ready(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// Running reports whether m's server runs.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e != nil
}

// IsLeader reports whether m runs and leads its cluster now.
func (m *Member) IsLeader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e != nil && m.e.Server.Leader() == m.e.Server.MemberID() && m.e.Server.Leader() != 0
}

// stop stops m as a crash would: raft stops at once, so the member
// neither leads nor expires leases from that moment (a graceful stop
// keeps it leader, expiring leases, while its gRPC server waits for the
// clients' streams to end). Its server then closes, which waits up to
// its request timeout (seconds) for the requests in flight.
func (m *Member) stop() {
	m.mu.Lock()
	e := m.e
	m.e = nil
	var closed chan struct{}
	if e != nil {
		closed = make(chan struct{})
		m.closed = closed
	}
	m.mu.Unlock()
	if e == nil {
		return
	}
	defer close(closed)
	e.Server.HardStop()
	e.Close()
}

// wait waits until m's last stop has finished.
func (m *Member) wait() {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed != nil {
		<-closed
	}
}

// Close stops every member.
func (c *Cluster) Close() error {
	for _, m := range c.members {
		m.stop()
	}
	for _, m := range c.members {
		m.wait()
	}
	return nil
}
