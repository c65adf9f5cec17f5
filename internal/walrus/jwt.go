package walrus

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ParseJWTSecret decodes an authenticated publisher's HS256 secret as the
// publisher takes it (--jwt-decode-secret): hex, with or without 0x.
func ParseJWTSecret(s string) ([]byte, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "0x"))
	if err != nil || len(b) == 0 {
		return nil, errors.New("walrus: JWT secret must be hex (as the publisher's --jwt-decode-secret)")
	}
	return b, nil
}

// HS256Tokens returns a TokenSource minting a fresh HS256 JWT for every
// upload attempt: authenticated publishers accept each token once (jti),
// so a fixed token works for one upload only. Claims: iat, exp (now + ttl),
// jti (random), and send_object_to when set.
func HS256Tokens(secret []byte, ttl time.Duration, sendObjectTo string, now func() time.Time) func(context.Context) (string, error) {
	if now == nil {
		now = time.Now
	}
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	return func(context.Context) (string, error) {
		var jti [16]byte
		if _, err := rand.Read(jti[:]); err != nil {
			return "", fmt.Errorf("walrus: jwt id: %w", err)
		}
		t := now()
		claims := map[string]any{
			"iat": t.Unix(),
			"exp": t.Add(ttl).Unix(),
			"jti": hex.EncodeToString(jti[:]),
		}
		if sendObjectTo != "" {
			claims["send_object_to"] = sendObjectTo
		}
		payload, err := json.Marshal(claims)
		if err != nil {
			return "", err
		}
		signing := header + "." + base64.RawURLEncoding.EncodeToString(payload)
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(signing))
		return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
	}
}
