package devnet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/sealserver"
)

// SealPackage is the devnet's Seal policy package ID. There is no Sui
// chain: the local key servers enforce account_based natively, and any
// fixed 32 bytes serve as the identity namespace.
var SealPackage = func() seal.Address {
	return seal.Address(sha256.Sum256([]byte("hermesd devnet seal policy package")))
}()

// KeyServer is a local Seal key server on 127.0.0.1 that can be stopped
// and started again on the same address (an outage, for tests).
type KeyServer struct {
	ObjectID  seal.Address
	PublicKey seal.PublicKey
	KeyPath   string // its master key file, for the devnet's

	srv  *sealserver.Server
	addr string

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
}

// StartKeyServer starts a key server for cfg on addr, a loopback
// host:port ("127.0.0.1:0" picks a port).
func StartKeyServer(cfg sealserver.Config, addr string) (*KeyServer, error) {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("devnet seal key server: %q is not a loopback address", addr)
	}
	srv, err := sealserver.New(cfg)
	if err != nil {
		return nil, err
	}
	k := &KeyServer{ObjectID: cfg.ObjectID, PublicKey: srv.PublicKey(), srv: srv, addr: addr}
	if err := k.Start(); err != nil {
		return nil, err
	}
	return k, nil
}

// URL is the server's base URL.
func (k *KeyServer) URL() string { return "http://" + k.addr }

// Addr is the server's host:port on 127.0.0.1.
func (k *KeyServer) Addr() string { return k.addr }

// Start serves on the server's address (the first start picks it).
func (k *KeyServer) Start() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cancel != nil {
		return nil
	}
	ln, err := net.Listen("tcp", k.addr)
	if err != nil {
		return fmt.Errorf("devnet seal key server: %w", err)
	}
	k.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel, k.done = cancel, make(chan error, 1)
	go func() { k.done <- k.srv.Serve(ctx, ln) }()
	return nil
}

// Stop stops serving; connections to its address are refused until Start.
func (k *KeyServer) Stop() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cancel == nil {
		return nil
	}
	k.cancel()
	err := <-k.done
	k.cancel, k.done = nil, nil
	return err
}

// startSeal starts n key servers with the master keys in <Dir>/keys
// (created on the first start, kept after), all enforcing account_based
// for the devnet package, and creates the requester's Sui key.
func (d *Devnet) startSeal(n int, port int, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d.SuiKeyPath = filepath.Join(d.Dir, "keys", "sui.key")
	if _, err := os.Stat(d.SuiKeyPath); errors.Is(err, fs.ErrNotExist) {
		k, err := seal.GenerateSuiKey(nil)
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(d.SuiKeyPath, []byte(k.Export()+"\n"), 0o600); err != nil {
			return fmt.Errorf("devnet: %w", err)
		}
	}
	for i := range n {
		path := filepath.Join(d.Dir, "keys", fmt.Sprintf("seal-master-%d.key", i+1))
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			mk, err := seal.GenerateMasterKey(nil)
			if err != nil {
				return err
			}
			if err := seal.WriteMasterKeyFile(path, mk); err != nil {
				return fmt.Errorf("devnet: %w", err)
			}
		}
		mk, err := seal.ReadMasterKeyFile(path)
		if err != nil {
			return fmt.Errorf("devnet: %w", err)
		}
		addr := "127.0.0.1:0"
		if port != 0 {
			addr = fmt.Sprintf("127.0.0.1:%d", port+i)
		}
		ks, err := StartKeyServer(sealserver.Config{
			ObjectID:  sealserver.LocalObjectID(mk.PublicKey()),
			MasterKey: mk,
			Policy:    sealserver.AccountBased(),
			Packages:  []seal.Address{SealPackage},
			Logger:    log.With("component", "seal", "server", i+1),
		}, addr)
		if err != nil {
			return fmt.Errorf("devnet: %w", err)
		}
		ks.KeyPath = path
		d.Seal = append(d.Seal, ks)
	}
	return nil
}
