package walrus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hermesd/hermesd/internal/redact"
)

// pingTimeout bounds one probe request.
const pingTimeout = 5 * time.Second

// Ping asks every publisher and aggregator for GET /status (which a
// Walrus daemon always answers with 200) once, without retries, and
// succeeds when at least one of each answers. The daemon probes with it
// during an outage, so that snapshots waiting for their backoff are
// retried as soon as Walrus is back.
func (c *Client) Ping(ctx context.Context) error {
	ok := func(bases []string) error {
		var errs []error
		for _, b := range bases {
			err := c.probe(ctx, b)
			if err == nil {
				return nil
			}
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	if len(c.publishers) > 0 {
		if err := ok(c.publishers); err != nil {
			return fmt.Errorf("walrus: no publisher answers: %w", err)
		}
	}
	if err := ok(c.aggregators); err != nil {
		return fmt.Errorf("walrus: no aggregator answers: %w", err)
	}
	return nil
}

func (c *Client) probe(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status", nil)
	if err != nil {
		return c.scrub.Error(err)
	}
	resp, err := c.readHTTP.Do(req)
	if err != nil {
		return c.scrub.Error(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s/status: HTTP %d", redact.URL(base), resp.StatusCode)
	}
	return nil
}
