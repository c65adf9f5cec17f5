package walrus_test

import (
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/walrus"
)

var errNoWrite = errors.New("may not write now")

// A closed write gate stores nothing: a store refused before its first
// attempt sends no request, and one closed mid-body is aborted and not
// retried, so the publisher never stores the blob.
func TestWriteGate(t *testing.T) {
	s := startServer(t, localwalrus.Config{MaxBodySize: 64 << 20})
	var open atomic.Bool
	var reads atomic.Int64
	closeAfter := int64(-1) // reads of the body before the gate closes
	c := newClient(t, s, walrus.Config{MaxBlobSize: 64 << 20, WriteGate: func() error {
		if !open.Load() {
			return errNoWrite
		}
		if closeAfter >= 0 && reads.Add(1) > closeAfter {
			open.Store(false)
			return errNoWrite
		}
		return nil
	}})
	body := genBody{seed: 7, size: 8 << 20}

	if _, err := c.Store(t.Context(), body); !errors.Is(err, errNoWrite) {
		t.Fatalf("store with the gate closed: %v, want the gate's error", err)
	}
	settle(t, s)
	if n := s.Stats().Requests; n != 0 {
		t.Fatalf("%d requests sent with the gate closed", n)
	}

	// Open, then closed after a few chunks of the body: aborted.
	open.Store(true)
	closeAfter = 4
	if _, err := c.Store(t.Context(), body); err == nil {
		t.Fatal("a store whose gate closed mid-body succeeded")
	}
	settle(t, s)
	st := s.Stats()
	if ok := st.ByRoute[localwalrus.RoutePublisher][200]; ok != 0 {
		t.Fatalf("the publisher answered %d stores with 200 after the gate closed: %+v", ok, st)
	}
	// The gate closed mid-body: the body was being read for the request
	// when it closed. (Whether the server saw that request at all is the
	// scheduler's: a loaded machine may close the connection before the
	// server read its headers, and then the server counts nothing.)
	if n := reads.Load(); n <= closeAfter {
		t.Fatalf("the gate closed after %d reads of the body, want more than %d", n, closeAfter)
	}

	// Open again: the same body stores.
	open.Store(true)
	closeAfter = -1
	res, err := c.Store(t.Context(), body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(t.Context(), res.BlobID, io.Discard); err != nil {
		t.Fatal(err)
	}
}
