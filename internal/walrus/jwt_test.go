package walrus

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestHS256Tokens(t *testing.T) {
	secret, err := ParseJWTSecret("0x00112233445566778899aabbccddeeff")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 0)
	mint := HS256Tokens(secret, time.Minute, "0x"+strings.Repeat("ab", 32), func() time.Time { return now })
	a, err := mint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := mint(t.Context())
	if a == b {
		t.Fatal("two tokens are identical; publishers accept each jti once")
	}
	parts := strings.Split(a, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q", a)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if got := base64.RawURLEncoding.EncodeToString(mac.Sum(nil)); got != parts[2] {
		t.Fatal("signature does not verify with the secret")
	}
	var hdr map[string]string
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	json.Unmarshal(hb, &hdr)
	if hdr["alg"] != "HS256" {
		t.Errorf("header %v", hdr)
	}
	var claims map[string]any
	cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(cb, &claims); err != nil {
		t.Fatal(err)
	}
	if claims["exp"].(float64) != 1700000060 || claims["iat"].(float64) != 1700000000 ||
		len(claims["jti"].(string)) != 32 || claims["send_object_to"] == nil {
		t.Errorf("claims %v", claims)
	}
	for _, bad := range []string{"", "0x", "not hex"} {
		if _, err := ParseJWTSecret(bad); err == nil {
			t.Errorf("ParseJWTSecret(%q) accepted", bad)
		}
	}
}
