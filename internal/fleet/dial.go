package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/hermesd/hermesd/internal/secretfile"
)

// Conn is how to reach etcd.
type Conn struct {
	Endpoints []string
	// CAFile, CertFile and KeyFile configure TLS (KeyFile is read as a
	// secret file).
	CAFile, CertFile, KeyFile string
	Username, Password        string
	// DialTimeout bounds the first connection (default 5 s).
	DialTimeout time.Duration
}

// maxPEM bounds a certificate or key file.
const maxPEM = 1 << 20

// Dial returns a client of the etcd cluster. It does not wait for a
// member to answer: requests do, each bounded by its context.
func Dial(c Conn) (*clientv3.Client, error) {
	if len(c.Endpoints) == 0 {
		return nil, errors.New("no etcd endpoints")
	}
	cfg := clientv3.Config{
		Endpoints:            c.Endpoints,
		DialTimeout:          c.DialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Username:             c.Username,
		Password:             c.Password,
		Logger:               zap.NewNop(),
		// Bounded answers: a node record lists every agent of a fleet.
		MaxCallRecvMsgSize: 64 << 20,
		DialOptions:        []grpc.DialOption{ReconnectQuickly()},
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if c.CAFile != "" || c.CertFile != "" {
		t := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.CAFile != "" {
			pem, err := readBounded(c.CAFile)
			if err != nil {
				return nil, fmt.Errorf("cluster.tls.ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("cluster.tls.ca_file: %s holds no PEM certificate", c.CAFile)
			}
			t.RootCAs = pool
		}
		if c.CertFile != "" {
			certPEM, err := readBounded(c.CertFile)
			if err != nil {
				return nil, fmt.Errorf("cluster.tls.cert_file: %w", err)
			}
			keyPEM, err := secretfile.Read(c.KeyFile, maxPEM)
			if err != nil {
				return nil, fmt.Errorf("cluster.tls.key_file: %w", err)
			}
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				return nil, fmt.Errorf("cluster.tls: the certificate and key do not make a pair: %w", err)
			}
			t.Certificates = []tls.Certificate{pair}
		}
		cfg.TLS = t
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}

// ReconnectQuickly makes the client try a member that went away again
// within a second at most (gRPC's default backs off to two minutes): a
// node must renew its lease within half its TTL of etcd coming back.
func ReconnectQuickly() grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: time.Second,
	})
}

func readBounded(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if info.Size() > maxPEM {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxPEM)
	}
	return os.ReadFile(path)
}
