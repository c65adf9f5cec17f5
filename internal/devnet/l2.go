package devnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/devchain"
)

// The L2 layout (docs/design.md §7.2): agents whose records live on a
// second chain, reached from L1 the way names on L2s are — the parent
// name's resolver on L1 is ENS's OffchainResolver, whose gateway answers
// text() by reading the record from the L2's resolver and signing it.

// DefaultL2ChainID is the devnet L2's chain id.
const DefaultL2ChainID = 1338

// DefaultL2Parent is the L1 name under which the L2 agents' names are.
const DefaultL2Parent = "l2.hermes.eth"

// L2RecordsID is the ens.records id of the L2 in the generated
// configuration.
const L2RecordsID = "l2"

// DefaultL2Visibility is the visibility_timeout of the generated
// configuration: the devnet's gateway reads the L2's head.
const DefaultL2Visibility = 30 * time.Second

// L2Options configure the devnet's L2.
type L2Options struct {
	// ChainPort (JSON-RPC) and GatewayPort on 127.0.0.1; 0 picks free
	// ports.
	ChainPort, GatewayPort int
	// ChainID defaults to DefaultL2ChainID.
	ChainID uint64
	// DataDir persists the L2 like Options.ChainDataDir the L1; "" keeps
	// it in memory.
	DataDir string
	// Parent is the L1 name whose resolver is the OffchainResolver
	// (default DefaultL2Parent); the L2 agents' names are under it.
	Parent string
	// Lag makes the gateway answer from block head − Lag of the L2.
	Lag uint64
	// VisibilityTimeout goes into the configuration (default
	// DefaultL2Visibility).
	VisibilityTimeout time.Duration
}

// L2 is the devnet's second chain and its gateway.
type L2 struct {
	Chain *devchain.Chain
	// Records answers the gateway's lookups from the L2's resolver;
	// Records.SetLag makes the gateway lag.
	Records *devchain.ChainRecords
	// GatewayURL is the OffchainResolver's URL template.
	GatewayURL string
	// GatewayKey signs the gateway's answers.
	GatewayKey common.Address
	// OffchainResolver is Parent's resolver on L1.
	OffchainResolver common.Address
	Parent           string
	ChainID          uint64

	gw         *http.Server
	gwServed   chan error
	visibility time.Duration
}

// gatewayKey is the devnet gateway's signing key (well known: devnet only).
var gatewayKey = devchain.DeriveKey("devnet-gateway")

// gatewayTimeouts bound one gateway request on the devnet's server.
const (
	gatewayReadTimeout  = 10 * time.Second
	gatewayWriteTimeout = 30 * time.Second
)

// startL2 starts the L2 chain with names (owned by owner, each under
// o.Parent) and movable (the L1 agents' names, which a move may bring
// there) registered, and the gateway, and points o.Parent on l1 at an
// OffchainResolver that uses it. The gateway answers for any name it is
// asked about, from the L2's record of that very name: every name whose
// L1 resolver is the OffchainResolver, its own or its parent's, has its
// record on the L2.
func startL2(ctx context.Context, l1 *devchain.Chain, o L2Options, names, movable []devchain.Name, owner common.Address, artifacts string, log *slog.Logger) (l2 *L2, err error) {
	if o.ChainID == 0 {
		o.ChainID = DefaultL2ChainID
	}
	if o.Parent == "" {
		o.Parent = DefaultL2Parent
	}
	if o.VisibilityTimeout <= 0 {
		o.VisibilityTimeout = DefaultL2Visibility
	}
	if o.ChainID == l1.ChainID().Uint64() {
		return nil, fmt.Errorf("devnet: the L2's chain id %d is the L1's", o.ChainID)
	}
	for _, n := range names {
		if !strings.HasSuffix(n.Name, "."+o.Parent) {
			return nil, fmt.Errorf("devnet: %s is on the L2, so it must be a name under %s", n.Name, o.Parent)
		}
	}
	l2 = &L2{Parent: o.Parent, ChainID: o.ChainID, GatewayKey: crypto.PubkeyToAddress(gatewayKey.PublicKey), visibility: o.VisibilityTimeout}
	defer func() {
		if err != nil {
			l2.close()
		}
	}()
	l2.Chain, err = devchain.Start(ctx, devchain.Config{
		Port:         o.ChainPort,
		ChainID:      o.ChainID,
		DevKey:       l1.DevKey(),
		Names:        append(slices.Clip(names), movable...),
		ArtifactsDir: artifacts,
		DataDir:      o.DataDir,
		Logger:       log,
	})
	if err != nil {
		return nil, fmt.Errorf("devnet L2 chain: %w", err)
	}
	l2.Records = &devchain.ChainRecords{Chain: l2.Chain.Client(), Resolver: l2.Chain.ResolverAddress()}
	l2.Records.SetLag(o.Lag)
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", o.GatewayPort))
	if err != nil {
		return nil, fmt.Errorf("devnet L2 gateway: %w", err)
	}
	l2.GatewayURL = "http://" + ln.Addr().String() + "/{sender}/{data}.json"
	l2.gw = &http.Server{
		Handler:           &devchain.Gateway{Key: gatewayKey, Answer: l2.Records.Answer},
		ReadHeaderTimeout: gatewayReadTimeout,
		ReadTimeout:       gatewayReadTimeout,
		WriteTimeout:      gatewayWriteTimeout,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	l2.gwServed = make(chan error, 1)
	go func() { l2.gwServed <- l2.gw.Serve(ln) }()
	if l2.OffchainResolver, err = l1.EnsureOffchainResolver(ctx, o.Parent, owner, l2.GatewayURL, l2.GatewayKey); err != nil {
		return nil, fmt.Errorf("devnet: the L1 resolver of %s: %w", o.Parent, err)
	}
	return l2, nil
}

// RPC is the L2's JSON-RPC URL.
func (l *L2) RPC() string { return l.Chain.URL() }

// Resolver is where the L2 agents' records live: the L2's PublicResolver.
func (l *L2) Resolver() common.Address { return l.Chain.ResolverAddress() }

func (l *L2) close() error {
	var errs []error
	if l.gw != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := l.gw.Shutdown(ctx); err != nil {
			l.gw.Close()
		}
		cancel()
		if err := <-l.gwServed; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	if l.Chain != nil {
		errs = append(errs, l.Chain.Close())
	}
	return errors.Join(errs...)
}
