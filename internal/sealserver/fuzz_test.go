package sealserver_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzFetchKey: any request body gets one of the real server's answers,
// never a panic, and a 200 only with a well-formed key list.
func FuzzFetchKey(f *testing.F) {
	fx := newFixture(f, nil)
	sk := session(f, fx.allowed, pkg, nil)
	f.Add(mustJSON(f, request(f, sk, ptbFor(f, pkg, "a"))))
	f.Add([]byte(`{"ptb":"AA==","enc_key":"","enc_verification_key":"","request_signature":"","certificate":{}}`))
	allowed := map[int]bool{200: true, 400: true, 403: true, 413: true, 415: true, 422: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/fetch_key", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Client-Sdk-Version", "1.0.0")
		rec := httptest.NewRecorder()
		fx.srv.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
		}
		if rec.Code == 200 {
			var resp struct {
				DecryptionKeys []struct {
					ID           []int    `json:"id"`
					EncryptedKey []string `json:"encrypted_key"`
				} `json:"decryption_keys"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || len(resp.DecryptionKeys) == 0 {
				t.Fatalf("200 with body %s", rec.Body.Bytes())
			}
		}
	})
}
