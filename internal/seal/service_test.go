package seal_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/seal"
)

func TestCheckServer(t *testing.T) {
	tn := newTestNet(t, []int{1, 1}, 1, nil)
	c, err := seal.NewClient(tn.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tn.cfg.Servers {
		if err := c.CheckServer(t.Context(), s.ObjectID); err != nil {
			t.Errorf("server %s: %v", s.ObjectID, err)
		}
	}
	if err := c.CheckServer(t.Context(), seal.Address{9}); !errors.Is(err, seal.ErrInvalidConfig) {
		t.Errorf("unconfigured server: %v", err)
	}

	// The public keys swapped: each server's proof names its own key.
	swapped := tn.cfg
	swapped.Servers = append([]seal.KeyServer(nil), tn.cfg.Servers...)
	swapped.Servers[0].PublicKey, swapped.Servers[1].PublicKey = tn.cfg.Servers[1].PublicKey, tn.cfg.Servers[0].PublicKey
	c, err = seal.NewClient(swapped, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.CheckServer(t.Context(), swapped.Servers[0].ObjectID)
	if !errors.Is(err, seal.ErrInvalidSignature) || !strings.Contains(err.Error(), "public_key") {
		t.Errorf("wrong public key: %v", err)
	}

	// A server answering for another object ID, or junk.
	for name, body := range map[string]string{
		"other service": `{"service_id":"0x01","pop":""}`,
		"not json":      `<html>`,
		"bad base64":    `{"service_id":"` + tn.cfg.Servers[0].ObjectID.String() + `","pop":"!!"}`,
	} {
		t.Run(name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/service" || r.URL.Query().Get("service_id") != tn.cfg.Servers[0].ObjectID.String() {
					http.Error(w, "bad request "+r.URL.String(), http.StatusBadRequest)
					return
				}
				w.Write([]byte(body))
			}))
			defer hs.Close()
			cfg := tn.cfg
			cfg.Servers = append([]seal.KeyServer(nil), tn.cfg.Servers...)
			cfg.Servers[0].URL = hs.URL
			c, err := seal.NewClient(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.CheckServer(t.Context(), cfg.Servers[0].ObjectID); !errors.Is(err, seal.ErrMalformed) {
				t.Errorf("CheckServer = %v, want ErrMalformed", err)
			}
		})
	}

	// A server that is down.
	tn.https[1].Close()
	c, _ = seal.NewClient(tn.cfg, &seal.ClientOptions{})
	if err := c.CheckServer(t.Context(), tn.cfg.Servers[1].ObjectID); err == nil {
		t.Error("a stopped server checks out")
	}
}
