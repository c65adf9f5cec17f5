package seal

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// CheckServer asks key server id for its proof of possession (GET
// /v1/service) and verifies it against the configured public key: it
// proves the server at the configured URL holds the master key of the
// configured public key, for the configured object ID, before anything is
// sealed to it. Committee aggregators do not answer /v1/service.
func (c *Client) CheckServer(ctx context.Context, id Address) error {
	s, ok := c.servers[id]
	if !ok {
		return fmt.Errorf("%w: key server %s is not configured", ErrInvalidConfig, id)
	}
	body, _, err := c.call(ctx, s, http.MethodGet, "/v1/service", url.Values{"service_id": {id.String()}}, nil)
	if err != nil {
		return err
	}
	var ans struct {
		ServiceID string `json:"service_id"`
		PoP       string `json:"pop"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("key server %s: %w: /v1/service answer: %v", id, ErrMalformed, err)
	}
	got, err := ParseAddress(ans.ServiceID)
	if err != nil || got != id {
		return fmt.Errorf("key server %s: %w: /v1/service answers for service %q", id, ErrMalformed, sanitize(ans.ServiceID, 80))
	}
	pop, err := base64.StdEncoding.DecodeString(ans.PoP)
	if err != nil {
		return fmt.Errorf("key server %s: %w: proof of possession is not base64", id, ErrMalformed)
	}
	if err := s.PublicKey.VerifyProofOfPossession(id, pop); err != nil {
		return fmt.Errorf("key server %s: %w (is seal.key_servers' public_key this server's?)", id, err)
	}
	return nil
}
