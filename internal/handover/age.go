package handover

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/secretfile"
)

// ageMagic starts every binary age file (age-encryption.org/v1).
const ageMagic = "age-encryption.org/v1\n"

// Seal writes h to w as an age file encrypted to recipient, an X25519
// recipient string ("age1…").
func Seal(w io.Writer, h Handover, recipient string) error {
	r, err := ParseRecipient(recipient)
	if err != nil {
		return err
	}
	doc, err := h.Encode()
	if err != nil {
		return err
	}
	wc, err := age.Encrypt(w, r)
	if err != nil {
		return fmt.Errorf("handover: encrypt: %w", err)
	}
	if _, err := wc.Write(doc); err != nil {
		return fmt.Errorf("handover: write: %w", err)
	}
	if err := wc.Close(); err != nil {
		return fmt.Errorf("handover: write: %w", err)
	}
	return nil
}

// ParseRecipient parses an age X25519 recipient ("age1…", as printed by
// `hermesd transfer request` and age-keygen).
func ParseRecipient(s string) (*age.X25519Recipient, error) {
	r, err := age.ParseX25519Recipient(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("handover: recipient %q is not an age X25519 recipient (age1…)", clip(s))
	}
	return r, nil
}

// Open reads an age-encrypted handover (binary or armored) of at most
// MaxSize bytes from r, decrypts it with the first identity that matches
// and decodes it strictly. A file for another identity matches
// ErrWrongIdentity; one that is not age, truncated or modified matches
// ErrCorrupt; a decrypted document that is not a handover, ErrInvalid.
func Open(r io.Reader, identities ...age.Identity) (Handover, error) {
	if len(identities) == 0 {
		return Handover{}, errors.New("handover: no identity to decrypt with")
	}
	file, err := readBounded(r)
	if err != nil {
		return Handover{}, err
	}
	var src io.Reader = bytes.NewReader(file)
	switch trimmed := bytes.TrimLeft(file, " \t\r\n"); {
	case bytes.HasPrefix(trimmed, []byte(armor.Header)):
		src = armor.NewReader(bytes.NewReader(trimmed))
	case !bytes.HasPrefix(file, []byte(ageMagic)):
		return Handover{}, fmt.Errorf("%w: not an age-encrypted file", ErrCorrupt)
	}
	plain, err := age.Decrypt(src, identities...)
	if err != nil {
		var noMatch *age.NoIdentityMatchError
		if errors.As(err, &noMatch) {
			return Handover{}, ErrWrongIdentity
		}
		// age's messages may quote the hostile header; they are not shown.
		return Handover{}, fmt.Errorf("%w: age header does not verify", ErrCorrupt)
	}
	doc, err := readBounded(plain)
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return Handover{}, err
		}
		return Handover{}, fmt.Errorf("%w: encrypted payload does not verify", ErrCorrupt)
	}
	return Decode(doc)
}

func readBounded(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("handover: read: %w", err)
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, MaxSize)
	}
	return b, nil
}

// ReadIdentityFile reads an age identity file (AGE-SECRET-KEY-1… lines and
// # comments, as `hermesd transfer request` and age-keygen write them),
// with the same rules as every secret file: regular, at most 64 KiB, not
// accessible by others nor writable by its group.
func ReadIdentityFile(path string) ([]age.Identity, error) {
	s, err := config.ReadSecretFile(path)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	ids, err := age.ParseIdentities(strings.NewReader(s))
	if err != nil {
		// The parser's message may quote part of the secret.
		return nil, fmt.Errorf("identity %s: not an age identity file (want AGE-SECRET-KEY-1… lines)", path)
	}
	return ids, nil
}

// NewIdentityFile creates path (which must not exist) with mode 0600,
// writes a new X25519 identity to it in age-keygen's format, comment
// lines first, and returns the identity's recipient.
func NewIdentityFile(path, comment string) (recipient string, err error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", fmt.Errorf("identity: %w", err)
	}
	var b strings.Builder
	for line := range strings.Lines(comment) {
		b.WriteString("# " + strings.TrimRight(line, "\r\n") + "\n")
	}
	fmt.Fprintf(&b, "# created: %s\n# public key: %s\n%s\n", time.Now().UTC().Format(time.RFC3339), id.Recipient(), id)
	if err := secretfile.Create(path, []byte(b.String())); err != nil {
		return "", fmt.Errorf("identity: %w", err)
	}
	return id.Recipient().String(), nil
}

// OpenFile opens the handover file at path (see Open). It must be a
// regular file; it is not secret (only its recipient can read it).
func OpenFile(path string, identities ...age.Identity) (Handover, error) {
	f, err := os.Open(path)
	if err != nil {
		return Handover{}, fmt.Errorf("handover: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return Handover{}, fmt.Errorf("handover: %w", err)
	} else if !st.Mode().IsRegular() {
		return Handover{}, fmt.Errorf("handover: %s is not a regular file", path)
	}
	h, err := Open(f, identities...)
	if err != nil {
		return Handover{}, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}
