package handover

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/ensname"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/repo"
)

// Format is the version string of the handover document.
const Format = "hermesd/handover/v1"

// MaxSize bounds both the encrypted file and its plaintext: a handover is
// well under 1 KiB, so anything near this is not one.
const MaxSize = 64 << 10

// Errors Open and Decode return; each is matched with errors.Is.
var (
	// ErrWrongIdentity: the file is an age file, but not for this identity.
	ErrWrongIdentity = errors.New("handover is not encrypted to this identity")
	// ErrCorrupt: not an age file, or one that was truncated or modified.
	ErrCorrupt = errors.New("handover is damaged or was tampered with")
	// ErrInvalid: the file decrypts, but is not a valid handover document.
	ErrInvalid = errors.New("not a valid handover")
	// ErrTooLarge: more than MaxSize bytes.
	ErrTooLarge = errors.New("handover is too large")
)

// Handover is what a seller hands the buyer of one agent.
type Handover struct {
	Agent      string        // the seller's configured agent id
	Identity   string        // the v3 identity the agent's objects are bound to
	ENSName    string        // the agent's normalized ENS name
	TokenID    *uint64       // the agent's iNFT token id; nil without one
	Head       string        // head reference of the snapshot to restore (docs/format-v3.md §14)
	BundleHash hash.Digest   // bundle hash of the head snapshot
	Key        repo.AgentKey // the agent's own v3 key; prints as [REDACTED]
	Created    time.Time     // when the seller wrote it (UTC, seconds)
	Seller     common.Address
}

// KeyID returns the public id of the handover's key (repo.AgentKey.ID).
func (h *Handover) KeyID() string { return h.Key.ID() }

var agentIDRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Validate checks every field. A key of all zero bytes is refused: it is
// what a forgotten field leaves, never a derived key.
func (h *Handover) Validate() error {
	if !agentIDRe.MatchString(h.Agent) {
		return fmt.Errorf("agent %q: want 1-64 characters of a-z, 0-9, '.', '_' or '-'", clip(h.Agent))
	}
	if err := checkIdentity(h.Identity); err != nil {
		return err
	}
	if h.ENSName == "" {
		return errors.New("ens_name is empty: only a published agent can be handed over")
	}
	if n, err := ensname.Normalize(h.ENSName); err != nil || n != h.ENSName || !strings.Contains(n, ".") {
		return fmt.Errorf("ens_name %q is not a normalized ENS name", clip(h.ENSName))
	}
	if h.Identity != h.ENSName {
		return fmt.Errorf("identity %q is not the ENS name %q (a published agent's identity is its name)", clip(h.Identity), clip(h.ENSName))
	}
	if _, err := headref.Parse(h.Head); err != nil {
		return fmt.Errorf("head is not a blob id: %w", err)
	}
	if h.Key.Bytes() == [repo.KeySize]byte{} {
		return errors.New("key is all zero")
	}
	if h.Created.IsZero() || h.Created.Year() < 2000 || h.Created.Year() > 9999 {
		return fmt.Errorf("created %s is out of range", h.Created.Format(time.RFC3339))
	}
	if h.Seller == (common.Address{}) {
		return errors.New("seller is the zero address")
	}
	return nil
}

func checkIdentity(id string) error {
	switch {
	case id == "":
		return errors.New("identity is empty")
	case len(id) > repo.MaxIdentityLen:
		return fmt.Errorf("identity is longer than %d bytes", repo.MaxIdentityLen)
	case !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0:
		return errors.New("identity is not valid UTF-8 without NUL")
	}
	return nil
}

// wire is the JSON form. Every field is a pointer so a missing one is
// told apart from a zero one.
type wire struct {
	Format     *string `json:"format"`
	Agent      *string `json:"agent"`
	Identity   *string `json:"identity"`
	ENSName    *string `json:"ens_name"`
	TokenID    *uint64 `json:"token_id"` // null without an iNFT
	Head       *string `json:"head"`
	BundleHash *string `json:"bundle_hash"`
	Key        *string `json:"key"`
	KeyID      *string `json:"key_id"`
	Created    *string `json:"created"`
	Seller     *string `json:"seller"`
}

// fields lists wire's JSON names, in the order Encode writes them.
var fields = []string{"format", "agent", "identity", "ens_name", "token_id", "head", "bundle_hash", "key", "key_id", "created", "seller"}

var keyEncoding = base64.RawURLEncoding.Strict()

// Encode returns the document's JSON after validating it. The created time
// is written in UTC to the second.
func (h *Handover) Encode() ([]byte, error) {
	if err := h.Validate(); err != nil {
		return nil, fmt.Errorf("handover: %w", err)
	}
	key := h.Key.Bytes()
	var token *uint64
	if h.TokenID != nil {
		v := *h.TokenID
		token = &v
	}
	// A plain struct keeps the field order of the documentation.
	doc := struct {
		Format     string  `json:"format"`
		Agent      string  `json:"agent"`
		Identity   string  `json:"identity"`
		ENSName    string  `json:"ens_name"`
		TokenID    *uint64 `json:"token_id"`
		Head       string  `json:"head"`
		BundleHash string  `json:"bundle_hash"`
		Key        string  `json:"key"`
		KeyID      string  `json:"key_id"`
		Created    string  `json:"created"`
		Seller     string  `json:"seller"`
	}{
		Format, h.Agent, h.Identity, h.ENSName, token, h.Head, h.BundleHash.String(),
		keyEncoding.EncodeToString(key[:]), h.Key.ID(),
		h.Created.UTC().Truncate(time.Second).Format(time.RFC3339), h.Seller.Hex(),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("handover: encode: %w", err)
	}
	return buf.Bytes(), nil
}

// Decode parses a handover document strictly: exactly the documented
// fields, each once and with its exact name, scalar values, nothing after
// the object. Every refusal matches ErrInvalid.
func Decode(b []byte) (Handover, error) {
	h, err := decode(b)
	if err != nil {
		return Handover{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return h, nil
}

func decode(b []byte) (Handover, error) {
	if len(b) > MaxSize {
		return Handover{}, fmt.Errorf("%d bytes, more than %d", len(b), MaxSize)
	}
	if !utf8.Valid(b) {
		return Handover{}, errors.New("not UTF-8")
	}
	if err := checkShape(b); err != nil {
		return Handover{}, err
	}
	var w wire
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Handover{}, fmt.Errorf("json: %v", err)
	}
	return w.handover()
}

// checkShape walks the tokens: one object of known, distinct, exactly
// spelled keys with scalar values, then the end of input. encoding/json
// alone would take the last of two equal keys and match keys ignoring
// case, so two readers of one file could disagree on what it says.
func checkShape(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("want one JSON object")
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("json: %v", err)
		}
		k, _ := t.(string)
		known := false
		for _, f := range fields {
			known = known || f == k
		}
		switch {
		case !known:
			return fmt.Errorf("unknown field %q", clip(k))
		case seen[k]:
			return fmt.Errorf("field %q appears twice", k)
		}
		seen[k] = true
		v, err := dec.Token()
		if err != nil {
			return fmt.Errorf("json: %v", err)
		}
		if _, nested := v.(json.Delim); nested {
			return fmt.Errorf("field %q: want a string, number or null", k)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return fmt.Errorf("json: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the object")
	}
	for _, f := range fields {
		if !seen[f] {
			return fmt.Errorf("field %q is missing", f)
		}
	}
	return nil
}

func (w *wire) handover() (Handover, error) {
	for _, f := range []struct {
		name string
		p    *string
	}{
		{"format", w.Format}, {"agent", w.Agent}, {"identity", w.Identity}, {"ens_name", w.ENSName},
		{"head", w.Head}, {"bundle_hash", w.BundleHash}, {"key", w.Key}, {"key_id", w.KeyID},
		{"created", w.Created}, {"seller", w.Seller},
	} {
		if f.p == nil { // present (checkShape) but null
			return Handover{}, fmt.Errorf("field %q: want a string, not null", f.name)
		}
	}
	if *w.Format != Format {
		return Handover{}, fmt.Errorf("format %q is not %q (written by a newer hermesd?)", clip(*w.Format), Format)
	}
	h := Handover{Agent: *w.Agent, Identity: *w.Identity, ENSName: *w.ENSName, TokenID: w.TokenID, Head: *w.Head}
	d, err := hash.ParseDigest(*w.BundleHash)
	if err != nil || *w.BundleHash != d.String() {
		return Handover{}, fmt.Errorf("bundle_hash %q: want 0x and 64 lowercase hex digits", clip(*w.BundleHash))
	}
	h.BundleHash = d
	raw, err := keyEncoding.DecodeString(*w.Key)
	if err != nil || len(raw) != repo.KeySize {
		return Handover{}, errors.New("key: want 43 characters of unpadded base64url (32 bytes)")
	}
	h.Key = repo.NewAgentKey([repo.KeySize]byte(raw))
	if *w.KeyID != h.Key.ID() {
		return Handover{}, fmt.Errorf("key_id %q does not belong to the key", clip(*w.KeyID))
	}
	t, err := time.Parse(time.RFC3339, *w.Created)
	if err != nil || t.UTC().Format(time.RFC3339) != *w.Created {
		return Handover{}, fmt.Errorf("created %q: want RFC 3339 in UTC to the second (2006-01-02T15:04:05Z)", clip(*w.Created))
	}
	h.Created = t.UTC()
	h.Seller = common.HexToAddress(*w.Seller)
	if s := *w.Seller; !common.IsHexAddress(s) || s != h.Seller.Hex() && s != strings.ToLower(h.Seller.Hex()) {
		return Handover{}, fmt.Errorf("seller %q is not an address (0x + 40 hex digits, lower case or EIP-55)", clip(s))
	}
	if err := h.Validate(); err != nil {
		return Handover{}, err
	}
	return h, nil
}

func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
