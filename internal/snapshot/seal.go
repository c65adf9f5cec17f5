package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/seal"
)

// FormatSeal is the reference runtime's Seal cipher: the whole tar as one
// Seal EncryptedObject (Boneh–Franklin BLS12-381 KEM, AES-256-GCM DEM),
// with no wrapper, so the Seal SDK's decrypt opens it. It is whole-buffer
// and capped at Sealing.MaxSize, like v1.
const FormatSeal Format = "seal"

var (
	// ErrSealNotConfigured means a blob is a Seal object but the
	// configuration has no seal section to open it with.
	ErrSealNotConfigured = errors.New("no seal configuration")
	// ErrSealIdentity means a Seal blob was not sealed for this agent under
	// the configured seal section: another policy package, another
	// requester's or agent's identity, or key servers not configured.
	ErrSealIdentity = errors.New("blob is not sealed for this agent")
	// ErrNoKey means a v1 or v2 blob needs the snapshot key, and none is
	// configured (format seal needs none of its own).
	ErrNoKey = errors.New("no snapshot key configured")
)

// Seal policies (the seal_approve module of the policy package).
const (
	// SealAccountBased is Seal's patterns::account_based: the identity is
	// the requester's Sui address, which only that account can open.
	SealAccountBased = "account_based"
	// SealAllowlist is the reference runtime's agent_seal::allowlist: the
	// identity is the allowlist object's ID followed by the agent's name
	// or token id, opened by the addresses on the allowlist.
	SealAllowlist = "allowlist"
)

// Associated data bound into every Seal object hermesd writes, followed by
// the agent's identity: a blob names the agent it was sealed for, and a
// snapshot can never pass for a key escrow or the other way round.
const (
	sealSnapshotAAD = "hermesd/seal:"
	sealEscrowAAD   = "hermesd/escrow:"
)

// sealHeaderAllowance bounds everything of an EncryptedObject besides its
// payload (255 shares, the identity, the associated data): a blob larger
// than the payload cap plus this is refused before it is read.
const sealHeaderAllowance = 64 << 10

// SealPolicy is the seal_approve call that guards an agent's snapshots, and
// so the identity they are sealed to.
type SealPolicy struct {
	Module string // SealAccountBased or SealAllowlist
	// Allowlist and AllowlistVersion (its initial shared version) name the
	// shared Allowlist object of SealAllowlist.
	Allowlist        seal.Address
	AllowlistVersion uint64
	// ByToken ends allowlist identities in the agent's token id (decimal)
	// instead of its identity; restores accept either.
	ByToken bool
}

// Sealing is what format seal needs, shared by every agent of a process:
// the key-server client (the policy package, the servers and the
// threshold), the requester's Sui key and the policy. It caches one signed
// session key until it expires; the client caches fetched keys.
type Sealing struct {
	Client *seal.Client
	Signer seal.Signer
	Policy SealPolicy
	// SessionTTL is the life of a session key (default 10 minutes).
	SessionTTL time.Duration
	// MaxSize caps the tar of one snapshot.
	MaxSize int64
	Now     func() time.Time

	mu      sync.Mutex
	session *seal.SessionKey
}

// SealAgent names the agent a Seal object is for.
type SealAgent struct {
	Identity string // the agent's normalized ENS name, or its id
	TokenID  *uint64
	// Others are the other configured agents' identities, so that a blob
	// of theirs is reported as such.
	Others []string
}

func (p *Pipeline) sealAgent() SealAgent {
	return SealAgent{Identity: p.Identity, TokenID: p.TokenID, Others: p.others()}
}

// checkSeal is the seal part of Pipeline.check.
func (p *Pipeline) checkSeal() error {
	if p.Seal == nil {
		return fmt.Errorf("snapshot: %w: format seal needs the seal section (key servers, threshold, policy)", ErrSealNotConfigured)
	}
	if p.Seal.Policy.Module == SealAllowlist && p.Seal.Policy.ByToken && p.TokenID == nil {
		return fmt.Errorf("snapshot: agent %s has no token id to seal its snapshots to", p.AgentID)
	}
	return nil
}

// newSealWriter buffers the tar, up to the cap, and writes it to dst as one
// Seal object on Close. Sealing needs no key server: only their public keys.
func (p *Pipeline) newSealWriter(dst io.Writer) io.WriteCloser {
	return &sealWriter{dst: dst, max: p.Seal.MaxSize, seal: func(b []byte) ([]byte, error) {
		return p.Seal.sealFor(p.sealAgent(), sealSnapshotAAD, b)
	}}
}

type sealWriter struct {
	dst  io.Writer
	max  int64
	buf  []byte
	seal func([]byte) ([]byte, error)
}

func (w *sealWriter) Write(b []byte) (int, error) {
	if int64(len(w.buf))+int64(len(b)) > w.max {
		return 0, fmt.Errorf("%w: the snapshot is over seal.max_size (%d bytes); a Seal blob is encrypted in one piece", ErrTooLarge, w.max)
	}
	w.buf = append(w.buf, b...)
	return len(b), nil
}

func (w *sealWriter) Close() error {
	blob, err := w.seal(w.buf)
	clear(w.buf)
	w.buf = nil
	if err != nil {
		return err
	}
	_, err = w.dst.Write(blob)
	return err
}

// decryptStream returns the plaintext of the blob r delivers: a Seal
// EncryptedObject, whose first byte (its version) is 0, through the key
// servers; otherwise a v1 (01 00 00 00) or v2 ("HRMS") envelope under the
// snapshot key. A seekable r (a spool file) is passed to the envelope
// reader as it is, so truncation checks can re-read it.
func (p *Pipeline) decryptStream(ctx context.Context, r io.Reader) (io.Reader, error) {
	var prefix []byte
	if ra, ok := r.(io.ReaderAt); ok {
		buf := make([]byte, sealHeaderAllowance)
		n, err := ra.ReadAt(buf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read blob: %w", err)
		}
		prefix = buf[:n]
	} else {
		br := bufio.NewReaderSize(r, sealHeaderAllowance)
		prefix, _ = br.Peek(sealHeaderAllowance)
		r = br
	}
	if len(prefix) > 0 && prefix[0] == 0 {
		if p.Seal != nil {
			return p.openSeal(ctx, r)
		}
		if seal.Looks(prefix) {
			return nil, fmt.Errorf("%w: the blob is a Seal object; restoring it needs the seal section (its package, key servers and requester key)", ErrSealNotConfigured)
		}
	}
	if p.Key == (cipher.Key{}) {
		return nil, fmt.Errorf("%w: the blob is not a Seal object, and opening it needs encryption.key", ErrNoKey)
	}
	var opts []cipher.DecryptOption
	if p.V1MaxSize > 0 {
		opts = append(opts, cipher.WithMaxV1Size(p.V1MaxSize))
	}
	return cipher.Decrypt(r, p.Key, p.Identity, opts...)
}

// openSeal reads a whole Seal blob, bounded by the cap, and opens it.
func (p *Pipeline) openSeal(ctx context.Context, r io.Reader) (io.Reader, error) {
	limit := p.Seal.MaxSize + sealHeaderAllowance
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read blob: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: the Seal blob is over seal.max_size (%d bytes) plus its header", ErrTooLarge, p.Seal.MaxSize)
	}
	pt, err := p.Seal.openFor(ctx, p.sealAgent(), sealSnapshotAAD, b)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(pt), nil
}

// identity is the inner identity (without the package) an agent's objects
// are sealed to under the policy.
func (s *Sealing) identity(a SealAgent) ([]byte, error) {
	switch s.Policy.Module {
	case SealAccountBased:
		addr := s.Signer.Address()
		return addr[:], nil
	case SealAllowlist:
		suffix := a.Identity
		if s.Policy.ByToken {
			if a.TokenID == nil {
				return nil, fmt.Errorf("seal: agent %s has no token id to seal to", a.Identity)
			}
			suffix = strconv.FormatUint(*a.TokenID, 10)
		}
		return seal.AllowlistID(s.Policy.Allowlist, suffix), nil
	}
	return nil, fmt.Errorf("seal: unknown policy module %q", s.Policy.Module)
}

func (s *Sealing) approve() seal.Approve {
	a := seal.Approve{Module: s.Policy.Module}
	if s.Policy.Module == SealAllowlist {
		a.Args = []seal.CallArg{seal.SharedObjectArg(s.Policy.Allowlist, s.Policy.AllowlistVersion, false)}
	}
	return a
}

// sealFor encrypts plaintext for agent a, binding purpose ‖ its identity as
// associated data. The object's symmetric key is dropped: kept, it would
// open the blob without asking the policy.
func (s *Sealing) sealFor(a SealAgent, purpose string, plaintext []byte) ([]byte, error) {
	id, err := s.identity(a)
	if err != nil {
		return nil, err
	}
	cfg := s.Client.Config()
	blob, _, err := seal.Encrypt(&cfg, id, plaintext, &seal.EncryptOptions{AAD: []byte(purpose + a.Identity)})
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return blob, nil
}

// openFor parses a Seal blob, checks it was sealed for agent a under the
// configuration, fetches keys from threshold key servers and decrypts,
// checking that every share lies on one polynomial. The associated data
// must be purpose ‖ the agent's identity, as hermesd writes it; a snapshot
// may also have none (the reference runtime's).
func (s *Sealing) openFor(ctx context.Context, a SealAgent, purpose string, blob []byte) ([]byte, error) {
	o, err := seal.ParseEncryptedObject(blob)
	if err != nil {
		return nil, fmt.Errorf("not a valid Seal object: %w", err)
	}
	if err := s.check(a, purpose, o); err != nil {
		return nil, err
	}
	pt, err := s.decrypt(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("open Seal blob: %w", oneLine{err})
	}
	return pt, nil
}

// oneLine keeps an error on one line: the client joins the failures of
// several key servers with newlines, and an operator's error is one line.
type oneLine struct{ err error }

func (e oneLine) Error() string { return strings.ReplaceAll(e.err.Error(), "\n", "; ") }
func (e oneLine) Unwrap() error { return e.err }

func (s *Sealing) check(a SealAgent, purpose string, o *seal.EncryptedObject) error {
	cfg := s.Client.Config()
	if o.PackageID != cfg.PackageID {
		return fmt.Errorf("%w: it is sealed under policy package %s, seal.package_id is %s", ErrSealIdentity, o.PackageID, cfg.PackageID)
	}
	if o.DEM == seal.Plain {
		return fmt.Errorf("%w: the object carries no payload (Plain DEM)", ErrSealIdentity)
	}
	if err := s.checkIdentity(a, o.ID); err != nil {
		return err
	}
	want := purpose + a.Identity
	switch {
	case string(o.AAD) == want:
	case len(o.AAD) == 0 && purpose == sealSnapshotAAD:
		// The reference runtime seals without associated data.
	default:
		for _, other := range a.Others {
			if string(o.AAD) == purpose+other {
				return fmt.Errorf("%w: it is sealed for %q, not for %q", ErrWrongAgent, other, a.Identity)
			}
		}
		return fmt.Errorf("%w: its associated data is %s, want %q", ErrSealIdentity, quoteUntrusted(o.AAD), want)
	}
	for _, svc := range o.Services {
		if !slices.ContainsFunc(cfg.Servers, func(k seal.KeyServer) bool { return k.ObjectID == svc.ObjectID }) {
			return fmt.Errorf("%w: it is sealed to key server %s, which seal.key_servers does not list (add its object ID, URL and public key)", ErrSealIdentity, svc.ObjectID)
		}
	}
	return nil
}

func (s *Sealing) checkIdentity(a SealAgent, id []byte) error {
	switch s.Policy.Module {
	case SealAccountBased:
		addr := s.Signer.Address()
		if !bytes.Equal(id, addr[:]) {
			return fmt.Errorf("%w: its identity is %s, not the requester %s (policy account_based)", ErrSealIdentity, quoteUntrusted(id), addr)
		}
		return nil
	case SealAllowlist:
		if !bytes.HasPrefix(id, s.Policy.Allowlist[:]) {
			return fmt.Errorf("%w: its identity %s is not under allowlist %s", ErrSealIdentity, quoteUntrusted(id), s.Policy.Allowlist)
		}
		suffix := string(id[len(s.Policy.Allowlist):])
		if suffix == a.Identity || (a.TokenID != nil && suffix == strconv.FormatUint(*a.TokenID, 10)) {
			return nil
		}
		if slices.Contains(a.Others, suffix) {
			return fmt.Errorf("%w: it is sealed for %q, not for %q", ErrWrongAgent, suffix, a.Identity)
		}
		return fmt.Errorf("%w: it is sealed for %s under the allowlist, not for %q", ErrSealIdentity, quoteUntrusted([]byte(suffix)), a.Identity)
	}
	return fmt.Errorf("seal: unknown policy module %q", s.Policy.Module)
}

// quoteUntrusted prints bytes from a blob for an error: quoted text when
// it is short UTF-8, else hex, truncated either way.
func quoteUntrusted(b []byte) string {
	const max = 96
	cut := b
	if len(cut) > max {
		cut = cut[:max]
	}
	var s string
	if utf8.Valid(cut) && !bytes.ContainsFunc(cut, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		s = strconv.Quote(string(cut))
	} else {
		s = fmt.Sprintf("0x%x", cut)
	}
	if len(b) > max {
		s += fmt.Sprintf("… (%d bytes)", len(b))
	}
	return s
}

// decrypt fetches the object's keys under the cached session key (a fresh
// one once if the servers find it expired) and decrypts.
func (s *Sealing) decrypt(ctx context.Context, o *seal.EncryptedObject) ([]byte, error) {
	opts := &seal.DecryptOptions{CheckShareConsistency: true}
	for retried := false; ; retried = true {
		sk, err := s.sessionKey()
		if err != nil {
			return nil, err
		}
		pt, err := s.Client.DecryptObject(ctx, o, sk, s.approve(), opts)
		if errors.Is(err, seal.ErrSessionExpired) && !retried {
			s.dropSession(sk)
			continue
		}
		return pt, err
	}
}

func (s *Sealing) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Sealing) sessionKey() (*seal.SessionKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil && !s.session.Expired(s.now()) {
		return s.session, nil
	}
	ttl := s.SessionTTL
	if ttl == 0 {
		ttl = 10 * time.Minute
	}
	sk, err := seal.NewSessionKey(s.Signer, s.Client.Config().PackageID, &seal.SessionOptions{TTL: ttl, Now: s.now()})
	if err != nil {
		return nil, fmt.Errorf("seal session key: %w", err)
	}
	s.session = sk
	return sk, nil
}

func (s *Sealing) dropSession(sk *seal.SessionKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == sk {
		s.session = nil
	}
}
