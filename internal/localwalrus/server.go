package localwalrus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/redstuff"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// Defaults for the zero fields of Config.
const (
	DefaultEpochDuration        = time.Hour
	DefaultStartEpoch           = 1
	DefaultMaxEpochsAhead       = 53
	DefaultMaxBodySize    int64 = 10 << 20 // the real publisher's default
	DefaultListen               = "127.0.0.1:31415"
)

// Config configures a Server.
type Config struct {
	// Dir holds the blobs, their metadata and the epoch clock. Required.
	Dir string
	// EpochDuration is how long one epoch lasts (mainnet: two weeks).
	EpochDuration time.Duration
	// StartEpoch is the epoch when Dir is first used; later the persisted
	// clock wins.
	StartEpoch uint32
	// MaxEpochsAhead bounds the epochs query parameter.
	MaxEpochsAhead uint32
	// MaxBodySize is the largest PUT /v1/blobs body; larger ones get 413.
	// A limit above the largest blob Shards encode is lowered to it.
	MaxBodySize int64
	// MaxQuiltBodySize is the largest PUT /v1/quilts body (default
	// DefaultMaxQuiltBodySize); MaxQuiltSize bounds the laid-out quilt
	// blob (default DefaultMaxQuiltSize, and at most the largest blob
	// Shards encode).
	MaxQuiltBodySize int64
	MaxQuiltSize     int64
	// Shards is the shard count blob ids (RS2) and quilt layouts are
	// computed over, and a store's encoded length
	// (walruscost.EncodedLength); 0 means walruscost.DefaultShards, as on
	// mainnet and testnet. RS2 needs at least 4.
	Shards int
	// Price is what a store costs: FROST per encoded unit (1 MiB) per
	// epoch, and per unit written. The zero Price means
	// walruscost.DefaultPrice (early mainnet's figures).
	Price walruscost.Price
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Logger receives a debug line per request; nil discards.
	Logger *slog.Logger
	// OnRequest, when set, is called after every request with what
	// happened to it. It must be safe for concurrent use.
	OnRequest func(RequestInfo)
	// Faults is the initial fault configuration (see SetFaults).
	Faults Faults
	// AllowRemote lets Start listen on a non-loopback address.
	AllowRemote bool
}

// Server is a Walrus-compatible publisher and aggregator. It is an
// http.Handler; Start and Close run it on a listener of its own.
type Server struct {
	cfg   Config
	now   func() time.Time
	log   *slog.Logger
	mux   *http.ServeMux
	store *store

	clockMu sync.Mutex
	clock   clockState

	faults   faultState
	forged   forgeries
	stats    statsState
	inflight inflight
	held     atomic.Int32 // requests waiting out a fault's latency
	ids      idCache

	srv  *http.Server
	ln   net.Listener
	wg   sync.WaitGroup
	once sync.Once
}

// clockState is persisted in Dir/clock.json so epochs keep counting across
// restarts instead of resetting.
type clockState struct {
	Version    int       `json:"version"`
	StartTime  time.Time `json:"startTime"`
	StartEpoch uint32    `json:"startEpoch"`
	// Offset counts epochs added by AdvanceEpochs.
	Offset uint32 `json:"offset"`
	// EpochDuration is informational; Config decides.
	EpochDuration string `json:"epochDuration"`
}

// New opens (or creates) the server's directory.
func New(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("localwalrus: Dir is required")
	}
	if cfg.EpochDuration <= 0 {
		cfg.EpochDuration = DefaultEpochDuration
	}
	if cfg.StartEpoch == 0 {
		cfg.StartEpoch = DefaultStartEpoch
	}
	if cfg.MaxEpochsAhead == 0 {
		cfg.MaxEpochsAhead = DefaultMaxEpochsAhead
	}
	if cfg.MaxBodySize <= 0 {
		cfg.MaxBodySize = DefaultMaxBodySize
	}
	if cfg.MaxQuiltBodySize <= 0 {
		cfg.MaxQuiltBodySize = DefaultMaxQuiltBodySize
	}
	if cfg.MaxQuiltSize <= 0 {
		cfg.MaxQuiltSize = DefaultMaxQuiltSize
	}
	if cfg.Shards == 0 {
		cfg.Shards = walruscost.DefaultShards
	}
	if cfg.Price == (walruscost.Price{}) {
		cfg.Price = walruscost.DefaultPrice
	}
	if err := redstuff.CheckShards(cfg.Shards); err != nil {
		return nil, fmt.Errorf("localwalrus: %w", err)
	}
	maxBlob, err := walruscost.MaxBlobSize(cfg.Shards)
	if err != nil {
		return nil, fmt.Errorf("localwalrus: %w", err)
	}
	// No network stores a larger blob, and a quilt is stored as one.
	if uint64(cfg.MaxBodySize) > maxBlob {
		cfg.MaxBodySize = int64(maxBlob)
	}
	if uint64(cfg.MaxQuiltSize) > maxBlob {
		cfg.MaxQuiltSize = int64(maxBlob)
	}
	s := &Server{cfg: cfg, now: cfg.Now, log: cfg.Logger}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	st, err := openStore(cfg.Dir)
	if err != nil {
		return nil, err
	}
	s.store = st
	if err := s.loadClock(); err != nil {
		return nil, err
	}
	s.faults.set(cfg.Faults)

	s.mux = http.NewServeMux()
	s.mux.HandleFunc("PUT /v1/blobs", s.putBlob)
	s.mux.HandleFunc("GET /v1/blobs/{id}", s.getBlob)
	s.mux.HandleFunc("PUT /v1/quilts", s.putQuilt)
	s.mux.HandleFunc("GET /v1/blobs/by-quilt-patch-id/{id}", s.getPatchByID)
	s.mux.HandleFunc("GET /v1/blobs/by-quilt-id/{quilt}/{identifier}", s.getPatchByIdentifier)
	s.mux.HandleFunc("GET /v1/quilts/{quilt}/patches", s.listPatches)
	s.mux.HandleFunc("GET /status", s.status)
	s.mux.HandleFunc("GET /v1/api", s.apiDocs)
	return s, nil
}

func (s *Server) loadClock() error {
	path := filepath.Join(s.cfg.Dir, "clock.json")
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &s.clock); err != nil {
			return fmt.Errorf("localwalrus: parse %s: %w", path, err)
		}
		if s.clock.Version != 1 || s.clock.StartTime.IsZero() {
			return fmt.Errorf("localwalrus: %s: unsupported clock state", path)
		}
		return nil
	case errors.Is(err, os.ErrNotExist):
		s.clock = clockState{Version: 1, StartTime: s.now().UTC(), StartEpoch: s.cfg.StartEpoch}
		return s.saveClock()
	default:
		return fmt.Errorf("localwalrus: read clock: %w", err)
	}
}

func (s *Server) saveClock() error {
	s.clock.EpochDuration = s.cfg.EpochDuration.String()
	data, err := json.MarshalIndent(s.clock, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(s.cfg.Dir, "clock.json"), append(data, '\n'), 0o644)
}

// charge is the encoded length of a blob of size bytes and what storing it
// for epochs epochs costs, by Walrus's formula over the configured shards
// at the configured price (walruscost). A quilt is charged as the one blob
// it is stored as.
func (s *Server) charge(size int64, epochs uint32) (encoded, cost uint64, err error) {
	encoded, err = walruscost.EncodedLength(uint64(size), s.cfg.Shards)
	if err != nil {
		return 0, 0, err
	}
	return encoded, s.cfg.Price.Cost(encoded, uint64(epochs)), nil
}

// Epoch returns the current epoch: the start epoch plus the whole epochs
// elapsed since the directory was first used plus any AdvanceEpochs.
func (s *Server) Epoch() uint32 {
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	elapsed := s.now().Sub(s.clock.StartTime)
	if elapsed < 0 {
		elapsed = 0
	}
	return s.clock.StartEpoch + s.clock.Offset + uint32(elapsed/s.cfg.EpochDuration)
}

// AdvanceEpochs moves the epoch clock n epochs forward, persistently.
func (s *Server) AdvanceEpochs(n uint32) error {
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	s.clock.Offset += n
	return s.saveClock()
}

// Start listens on addr ("" means 127.0.0.1:0, a free port) and serves in
// the background until Close. Non-loopback addresses are refused unless
// Config.AllowRemote is set.
func (s *Server) Start(addr string) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if err := CheckLoopback(addr, s.cfg.AllowRemote); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("localwalrus: listen: %w", err)
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("localwalrus: serve", "error", err)
		}
	}()
	return nil
}

// Addr is the listening address after Start.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// URL is the base URL (http://host:port) after Start.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Close stops a started server: it lets requests in flight finish for a few
// seconds, then drops them. It is safe to call more than once.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		if s.srv == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if e := s.srv.Shutdown(ctx); e != nil {
			err = s.srv.Close()
		}
		s.wg.Wait()
	})
	return err
}

// Quiesce waits until no request is being handled. A client can see a
// complete response before the server has finished the request (and called
// OnRequest); tests call Quiesce after their clients returned to see every
// request in OnRequest and Stats.
func (s *Server) Quiesce(ctx context.Context) error { return s.inflight.wait(ctx) }

// inflight counts requests being handled.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0
}

func (f *inflight) enter() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.zero = make(chan struct{})
	}
	f.n++
}

func (f *inflight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 {
		close(f.zero)
	}
}

func (f *inflight) wait(ctx context.Context) error {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return nil
	}
	ch := f.zero
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CheckLoopback accepts host:port on a loopback address (or localhost), or
// anything when allowRemote is set.
func CheckLoopback(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("localwalrus: %q is not host:port", addr)
	}
	if allowRemote || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("localwalrus: refusing to listen on %q, which is not a loopback address (allow it explicitly to serve beyond this machine)", addr)
}
