package seal_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/seal"
)

// Requests the client cancels itself, once the threshold is out of reach,
// are not failures of their servers: the error carries the refusals only,
// never context.Canceled (which callers read as "interrupted").
func TestClientOwnCancellationIsNotAnError(t *testing.T) {
	tn := newTestNet(t, []int{1, 1, 1}, 2, nil)
	refuse := answer(http.StatusForbidden, "NoAccess")
	for i := range 2 {
		tn.swap(i, func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { refuse(w) })
		})
	}
	tn.swap(2, func(http.Handler) http.Handler {
		// Answers nothing until the client gives up on it (the body is
		// read so that the server notices the connection closing).
		return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-t.Context().Done():
			}
		})
	})
	obj := encryptFor(t, tn, "a", "msg")
	_, err := newClient(t, tn.cfg, nil).Decrypt(t.Context(), obj, tn.session(t), approve, nil)
	if !errors.Is(err, seal.ErrNoAccess) || !errors.Is(err, seal.ErrNotEnoughKeys) {
		t.Fatalf("%v, want NoAccess and not enough keys", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Fatalf("the error matches context.Canceled: %v", err)
	}
	// The server given up on is named as such, not as failed.
	if want := "key server " + tn.cfg.Servers[2].ObjectID.String(); !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "not awaited, the threshold was out of reach") {
		t.Fatalf("%v, want %s named as not awaited", err, want)
	}
	// A caller's own cancellation still is one.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = newClient(t, tn.cfg, nil).Decrypt(ctx, obj, tn.session(t), approve, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
}
