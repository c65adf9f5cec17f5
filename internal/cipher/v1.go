package cipher

import (
	"crypto/aes"
	gocipher "crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
)

// v1 envelope layout: u32le(1) ‖ IV[12] ‖ ciphertext ‖ tag[16].
const (
	v1IVSize     = 12
	v1TagSize    = 16
	v1HeaderSize = 4 + v1IVSize
	// V1Overhead is how much longer a v1 envelope is than its plaintext.
	V1Overhead = v1HeaderSize + v1TagSize
)

// DefaultMaxV1Size is the plaintext cap [Decrypt] applies to v1 envelopes
// unless [WithMaxV1Size] says otherwise. A v1 envelope is decrypted in one
// buffer, so the cap is also the memory it may take.
const DefaultMaxV1Size = 256 << 20

func newGCM(key Key) gocipher.AEAD {
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic("cipher: internal error: " + err.Error()) // 32-byte keys are always valid
	}
	gcm, err := gocipher.NewGCM(block)
	if err != nil {
		panic("cipher: internal error: " + err.Error())
	}
	return gcm
}

// SealV1 returns the v1 envelope of plaintext, byte-compatible with the
// reference runtime's AES cipher.
func SealV1(key Key, plaintext []byte) ([]byte, error) {
	buf := make([]byte, v1HeaderSize, len(plaintext)+V1Overhead)
	return sealV1(newGCM(key), append(buf, plaintext...))
}

// sealV1 seals buf[v1HeaderSize:] in place; buf's first bytes are reserved
// for the header.
func sealV1(gcm gocipher.AEAD, buf []byte) ([]byte, error) {
	if cap(buf)-len(buf) < v1TagSize {
		buf = append(buf, make([]byte, v1TagSize)...)[:len(buf)]
	}
	copy(buf, v1Magic)
	iv := buf[4:v1HeaderSize]
	if _, err := rand.Read(iv); err != nil {
		return nil, fmt.Errorf("seal v1: %w", err)
	}
	pt := buf[v1HeaderSize:]
	ct := gcm.Seal(pt[:0], iv, pt, nil)
	return buf[:v1HeaderSize+len(ct)], nil
}

// OpenV1 authenticates and decrypts a whole v1 envelope into a new buffer.
// v1 has no associated data, so it says nothing about which agent the
// envelope belongs to.
func OpenV1(key Key, envelope []byte) ([]byte, error) {
	return openV1(key, envelope, make([]byte, 0, max(len(envelope)-V1Overhead, 0)))
}

func openV1(key Key, envelope, dst []byte) ([]byte, error) {
	if f, err := Detect(envelope[:min(len(envelope), DetectSize)]); f != FormatV1 {
		if err == nil {
			err = fmt.Errorf("%w: a %s blob, not a v1 envelope", ErrUnsupportedVersion, f)
		}
		return nil, err
	}
	if len(envelope) < V1Overhead {
		return nil, fmt.Errorf("%w: v1 envelope is %d bytes, shorter than the %d-byte minimum", ErrTruncated, len(envelope), V1Overhead)
	}
	pt, err := newGCM(key).Open(dst, envelope[4:v1HeaderSize], envelope[v1HeaderSize:], nil)
	if err != nil {
		return nil, &AuthError{Format: FormatV1, Final: true, msg: "cipher: v1 envelope does not authenticate: wrong key, or the envelope is corrupted, truncated or has data appended (indistinguishable by design)"}
	}
	return pt, nil
}

// readV1 reads the rest of a v1 envelope whose first bytes (prefix) were
// already read from src, holding at most maxSize bytes of plaintext, and
// opens it in place.
func readV1(src io.Reader, prefix []byte, key Key, maxSize int64) ([]byte, error) {
	limit := maxSize + V1Overhead
	buf := make([]byte, len(prefix), max(min(limit+1, 64<<10), int64(len(prefix))))
	copy(buf, prefix)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, fmt.Errorf("%w: v1 envelope exceeds the %d-byte plaintext cap", ErrTooLarge, maxSize)
			}
			// Doubling up to one byte past the limit is enough to see that
			// an envelope is too large.
			nb := make([]byte, len(buf), min(2*int64(cap(buf)), limit+1))
			copy(nb, buf)
			buf = nb
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read v1 envelope: %w", err)
		}
	}
	if int64(len(buf)) > limit {
		return nil, fmt.Errorf("%w: v1 envelope exceeds the %d-byte plaintext cap", ErrTooLarge, maxSize)
	}
	// Open in place: the plaintext overwrites the ciphertext it came from.
	return openV1(key, buf, buf[v1HeaderSize:v1HeaderSize])
}

// EncryptV1 returns a writer that buffers up to maxSize bytes of plaintext
// and, on Close, writes its v1 envelope to dst in one Write. The caller must
// call Close. A write beyond maxSize fails with ErrTooLarge, and every later
// call returns the same error. Close does not close dst.
func EncryptV1(dst io.Writer, key Key, maxSize int64) (io.WriteCloser, error) {
	if maxSize < 0 {
		return nil, errors.New("cipher: negative v1 size cap")
	}
	return &v1Writer{dst: dst, gcm: newGCM(key), max: maxSize, buf: make([]byte, v1HeaderSize, min(maxSize, 64<<10)+V1Overhead)}, nil
}

// v1Writer holds the expanded key, never a Key value (see Format in
// format.go).
type v1Writer struct {
	dst io.Writer
	gcm gocipher.AEAD
	max int64
	buf []byte // header space, then the plaintext
	err error
}

var errClosed = errors.New("cipher: writer already closed")

func (w *v1Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if int64(len(w.buf)-v1HeaderSize)+int64(len(p)) > w.max {
		w.err = fmt.Errorf("%w: plaintext exceeds the %d-byte cap of a v1 envelope", ErrTooLarge, w.max)
		return 0, w.err
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *v1Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	w.err = errClosed
	env, err := sealV1(w.gcm, w.buf)
	w.buf = nil
	if err != nil {
		w.err = err
		return err
	}
	if _, err := w.dst.Write(env); err != nil {
		w.err = fmt.Errorf("write v1 envelope: %w", err)
		return w.err
	}
	return nil
}
