package sealserver

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/seal"
)

// Version headers. The TypeScript SDK requires X-KeyServer-Version ≥ 0.4.1.
const (
	// APIVersion is the Seal key-server release whose HTTP API this server
	// implements, sent as X-KeyServer-Version.
	APIVersion = "0.6.10"
	gitVersion = "hermesd-sealserver"

	// DefaultAddr is Seal's default port, on loopback.
	DefaultAddr = "127.0.0.1:2024"
	// DefaultMaxRequestBytes is the real server's body limit (a 128 KiB
	// transaction in base64 plus room for the other fields).
	DefaultMaxRequestBytes = 180 << 10
)

// Config configures a Server.
type Config struct {
	// ObjectID is this key server's on-chain KeyServer object ID, which
	// clients list in encrypted objects; /v1/service proves possession of
	// the master key for it.
	ObjectID  seal.Address
	MasterKey *seal.MasterKey
	// Policy decides who gets keys (Open, Allowlist); required.
	Policy Policy
	// Packages, if set, restricts the identity namespaces served (the real
	// server's permissioned mode); others get 400 UnsupportedPackageId.
	Packages []seal.Address
	// MaxSessionTTL bounds certificates' TTL; default 30 minutes.
	MaxSessionTTL time.Duration
	// MaxRequestBytes bounds request bodies; default 180 KiB.
	MaxRequestBytes int64
	// AllowNonLoopback lets ListenAndServe bind addresses other than
	// loopback ones.
	AllowNonLoopback bool
	Now              func() time.Time // default time.Now
	Rand             io.Reader        // ElGamal randomness; default crypto/rand
	Logger           *slog.Logger
}

// Server is a Seal key server holding one master key: an http.Handler for
// POST /v1/fetch_key and GET /v1/service with the real server's checks, its
// error kinds and status codes, and a native policy instead of the Move dry
// run.
type Server struct {
	cfg  Config
	pk   seal.PublicKey
	pop  [seal.G1Size]byte
	pkgs map[seal.Address]bool
	log  *slog.Logger
	mux  *http.ServeMux
}

// New checks cfg and returns a server.
func New(cfg Config) (*Server, error) {
	if cfg.MasterKey == nil {
		return nil, errors.New("sealserver: no master key")
	}
	if cfg.Policy == nil {
		return nil, errors.New("sealserver: no policy (use Open() to serve every requester)")
	}
	if cfg.MaxSessionTTL <= 0 {
		cfg.MaxSessionTTL = seal.MaxSessionTTL
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	s := &Server{cfg: cfg, pk: cfg.MasterKey.PublicKey(), log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.pop = cfg.MasterKey.ProofOfPossession(cfg.ObjectID)
	if len(cfg.Packages) > 0 {
		s.pkgs = map[seal.Address]bool{}
		for _, p := range cfg.Packages {
			s.pkgs[p] = true
		}
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/fetch_key", s.withHeaders(s.handleFetchKey))
	s.mux.HandleFunc("GET /v1/service", s.withHeaders(s.handleService))
	return s, nil
}

// PublicKey is the server's IBE public key.
func (s *Server) PublicKey() seal.PublicKey { return s.pk }

// KeyServer describes this server for a client configuration at baseURL.
func (s *Server) KeyServer(baseURL string) seal.KeyServer {
	return seal.KeyServer{ObjectID: s.cfg.ObjectID, URL: baseURL, PublicKey: s.pk, Weight: 1}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-KeyServer-Version", APIVersion)
	h.Set("X-KeyServer-GitVersion", gitVersion)
	s.mux.ServeHTTP(w, r)
}

// ListenAndServe serves on addr until ctx ends, then shuts down gracefully.
// Unless AllowNonLoopback is set, addr must be a loopback address.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	if addr == "" {
		addr = DefaultAddr
	}
	if !s.cfg.AllowNonLoopback {
		if err := checkLoopback(addr); err != nil {
			return err
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("sealserver: listen: %w", err)
	}
	return s.Serve(ctx, ln)
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("sealserver: address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("sealserver: refusing to listen on %q: not a loopback address (set AllowNonLoopback to serve beyond this host)", addr)
}

// Serve serves on ln until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("sealserver: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Past the grace period (a slow client, or a connection dialed
		// but never used: Shutdown counts those as active for 5 s), cut
		// off what is left, as localwalrus and devchain do.
		s.log.Warn("key server: connections still open after the grace period; closing them", "error", err)
		if err := srv.Close(); err != nil {
			return fmt.Errorf("sealserver: close: %w", err)
		}
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("sealserver: %w", err)
	}
	return nil
}

// apiError is an error answer: {"error": Kind, "message": …}.
type apiError struct {
	status  int
	kind    string
	message string
}

func (e *apiError) Error() string { return e.kind + ": " + e.message }

func fail(status int, kind, message string) *apiError {
	return &apiError{status: status, kind: kind, message: message}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, map[string]string{"error": e.kind, "message": e.message})
}

// semverRE is semantic versioning 2.0, which the real server parses the
// Client-Sdk-Version header as.
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// withHeaders enforces the required Client-Sdk-Version header.
func (s *Server) withHeaders(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, ok := r.Header["Client-Sdk-Version"]
		if !ok || len(v) == 0 {
			writeError(w, fail(http.StatusBadRequest, "MissingRequiredHeader", "Missing required header: Client-Sdk-Version"))
			return
		}
		if !semverRE.MatchString(v[0]) {
			writeError(w, fail(http.StatusBadRequest, "InvalidSDKVersion", "Invalid SDK version"))
			return
		}
		next(w, r)
	}
}

func (s *Server) handleService(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("service_id")
	id, err := seal.ParseAddress(q)
	if !strings.HasPrefix(q, "0x") || err != nil || id != s.cfg.ObjectID {
		writeError(w, fail(http.StatusBadRequest, "InvalidServiceId", "Invalid service ID"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"service_id": s.cfg.ObjectID.String(),
		"pop":        base64.StdEncoding.EncodeToString(s.pop[:]),
	})
}

// fetchKeyBody is the request body; pointers tell missing fields apart.
type fetchKeyBody struct {
	PTB                *string          `json:"ptb"`
	EncKey             *string          `json:"enc_key"`
	EncVerificationKey *string          `json:"enc_verification_key"`
	RequestSignature   *string          `json:"request_signature"`
	Certificate        *certificateBody `json:"certificate"`
}

type certificateBody struct {
	User         *string `json:"user"`
	SessionVK    *string `json:"session_vk"`
	CreationTime *uint64 `json:"creation_time"`
	TTLMin       *uint16 `json:"ttl_min"`
	Signature    *string `json:"signature"`
	MVRName      *string `json:"mvr_name"`
}

// request is a decoded, structurally valid fetch_key body.
type request struct {
	ptbBytes, encKey, encVK, reqSig []byte
	user                            seal.Address
	vk                              ed25519.PublicKey
	creation                        uint64
	ttlMin                          uint16
	signature                       string
	mvrName                         *string
}

// rejection is a body the JSON extractor refuses: answered as axum does,
// with a plain-text body.
type rejection struct {
	status int
	msg    string
}

func (s *Server) handleFetchKey(w http.ResponseWriter, r *http.Request) {
	req, rej := s.decode(w, r)
	if rej != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(rej.status)
		io.WriteString(w, rej.msg)
		return
	}
	resp, apiErr := s.fetchKey(r.Context(), req)
	if apiErr != nil {
		s.log.Info("seal key request refused", "user", req.user, "error", apiErr.kind, "message", apiErr.message)
		writeError(w, apiErr)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) decode(w http.ResponseWriter, r *http.Request) (*request, *rejection) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return nil, &rejection{http.StatusUnsupportedMediaType, "Expected request with `Content-Type: application/json`"}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &rejection{http.StatusRequestEntityTooLarge, "length limit exceeded"}
		}
		return nil, &rejection{http.StatusBadRequest, "Failed to buffer the request body"}
	}
	var b fetchKeyBody
	if err := json.Unmarshal(body, &b); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, &rejection{http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: " + te.Field}
		}
		return nil, &rejection{http.StatusBadRequest, "Failed to parse the request body as JSON"}
	}
	unprocessable := func(what string) *rejection {
		return &rejection{http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: " + what}
	}
	c := b.Certificate
	if b.PTB == nil || b.EncKey == nil || b.EncVerificationKey == nil || b.RequestSignature == nil || c == nil ||
		c.User == nil || c.SessionVK == nil || c.CreationTime == nil || c.TTLMin == nil || c.Signature == nil {
		return nil, unprocessable("missing field")
	}
	req := &request{creation: *c.CreationTime, ttlMin: *c.TTLMin, signature: *c.Signature, mvrName: c.MVRName}
	if req.encKey, err = base64.StdEncoding.DecodeString(*b.EncKey); err != nil || seal.CheckG1(req.encKey) != nil {
		return nil, unprocessable("enc_key: invalid G1 element")
	}
	if req.encVK, err = base64.StdEncoding.DecodeString(*b.EncVerificationKey); err != nil || seal.CheckG2(req.encVK) != nil {
		return nil, unprocessable("enc_verification_key: invalid G2 element")
	}
	if req.reqSig, err = base64.StdEncoding.DecodeString(*b.RequestSignature); err != nil || len(req.reqSig) != ed25519.SignatureSize {
		return nil, unprocessable("request_signature: invalid Ed25519 signature")
	}
	vk, err := base64.StdEncoding.DecodeString(*c.SessionVK)
	if err != nil || len(vk) != ed25519.PublicKeySize {
		return nil, unprocessable("certificate.session_vk: invalid Ed25519 public key")
	}
	req.vk = vk
	if req.user, err = seal.ParseAddress(*c.User); err != nil || !strings.HasPrefix(*c.User, "0x") {
		return nil, unprocessable("certificate.user: invalid address")
	}
	if req.ptbBytes, err = base64.StdEncoding.DecodeString(*b.PTB); err != nil {
		req.ptbBytes = nil // answered 403 InvalidPTB, as the real server does
	}
	return req, nil
}

// fetchKeyResponse is the 200 body.
type fetchKeyResponse struct {
	DecryptionKeys []decryptionKey `json:"decryption_keys"`
}

type decryptionKey struct {
	ID           byteArray `json:"id"`
	EncryptedKey [2]string `json:"encrypted_key"`
}

// byteArray encodes as a JSON array of numbers, serde's Vec<u8>.
type byteArray []byte

func (b byteArray) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 2+4*len(b))
	out = append(out, '[')
	for i, c := range b {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendUint(out, uint64(c), 10)
	}
	return append(out, ']'), nil
}

// fetchKey runs the real server's checks in its order: PTB, package,
// MVR name, certificate time and TTL, the user's personal-message
// signature, the session signature, then the policy.
func (s *Server) fetchKey(ctx context.Context, req *request) (*fetchKeyResponse, *apiError) {
	if req.ptbBytes == nil {
		return nil, fail(http.StatusForbidden, "InvalidPTB", "Invalid PTB: invalid base64")
	}
	ptb, err := seal.ParsePTB(req.ptbBytes)
	if err != nil {
		return nil, fail(http.StatusForbidden, "InvalidPTB", "Invalid PTB: "+err.Error())
	}
	pkg, ids, err := ptb.ApproveIDs()
	if err != nil {
		return nil, fail(http.StatusForbidden, "InvalidPTB", "Invalid PTB: "+err.Error())
	}
	if s.pkgs != nil && !s.pkgs[pkg] {
		return nil, fail(http.StatusBadRequest, "UnsupportedPackageId", "Unsupported package ID")
	}
	if req.mvrName != nil {
		// MVR names resolve through Sui RPC, which this server has not.
		return nil, fail(http.StatusForbidden, "InvalidMVRName", "Invalid MVR name")
	}

	ttl := time.Duration(req.ttlMin) * time.Minute
	now := s.cfg.Now().UnixMilli()
	if ttl > s.cfg.MaxSessionTTL || now < 0 || req.creation > uint64(now) ||
		uint64(now)-req.creation > uint64(ttl.Milliseconds()) {
		return nil, fail(http.StatusForbidden, "InvalidCertificate", "Invalid certificate time or ttl")
	}
	msg := seal.PersonalMessage(pkg.String(), req.vk, int64(req.creation), req.ttlMin)
	if err := seal.VerifyPersonalMessage([]byte(msg), req.signature, req.user); err != nil {
		return nil, fail(http.StatusForbidden, "InvalidSignature", "Invalid user signature")
	}
	if !ed25519.Verify(req.vk, seal.SignedRequest(req.ptbBytes, req.encKey, req.encVK), req.reqSig) {
		return nil, fail(http.StatusForbidden, "InvalidSessionSignature", "Invalid session key signature")
	}
	if err := s.cfg.Policy.Allow(ctx, &Request{User: req.user, Package: pkg, IDs: ids, PTB: ptb}); err != nil {
		return nil, fail(http.StatusForbidden, "NoAccess", "Access denied: "+err.Error())
	}

	resp := &fetchKeyResponse{DecryptionKeys: make([]decryptionKey, 0, len(ids))}
	for _, id := range ids {
		full := seal.FullID(pkg, id)
		c1, c2, err := seal.ElGamalEncrypt(s.cfg.Rand, s.cfg.MasterKey.Extract(full), req.encKey)
		if err != nil {
			return nil, fail(http.StatusServiceUnavailable, "Failure", "Internal server error, please try again later")
		}
		resp.DecryptionKeys = append(resp.DecryptionKeys, decryptionKey{
			ID:           full,
			EncryptedKey: [2]string{base64.StdEncoding.EncodeToString(c1[:]), base64.StdEncoding.EncodeToString(c2[:])},
		})
	}
	s.log.Info("seal keys released", "user", req.user, "package", pkg, "ids", len(ids))
	return resp, nil
}
