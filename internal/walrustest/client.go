package walrustest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/walrus"
)

// clientRetries is the retries the client under test is given: an
// answer it retries is asked 1+clientRetries times, one it takes as final
// once.
const clientRetries = 2

// RunClient serves each documented answer (all but the server-only
// cases) to the walrus client, in answer to the request the client makes
// for the case's operation, and checks what the client makes of it.
func RunClient(t *testing.T) {
	for _, c := range Cases() {
		if c.ServerOnly {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			if err := c.CheckClient(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
}

// CheckClient serves the case's documented answer from a loopback server
// to a walrus client doing the case's operation, and checks the request
// it sent (method and path, every attempt) and its result: the value the
// docs' answer stands for, or the error, retried or not.
func (c Case) CheckClient(ctx context.Context) error {
	if c.ServerOnly {
		return fmt.Errorf("case %q is the server's only", c.Name)
	}
	doc, err := LoadAnswer(c.Fixture)
	if err != nil {
		return err
	}
	w := Docs
	if c.World != nil {
		w = *c.World
	}
	var (
		mu   sync.Mutex
		asks []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
		ask := r.Method + " " + r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			ask += "?" + r.URL.RawQuery
		}
		if rg := r.Header.Get("Range"); rg != "" {
			ask += " Range: " + rg
		}
		mu.Lock()
		asks = append(asks, ask)
		mu.Unlock()
		for k, v := range doc.Header {
			rw.Header()[k] = v
		}
		rw.WriteHeader(doc.Status)
		rw.Write(doc.Body)
	}))
	defer srv.Close()
	cl, err := walrus.New(walrus.Config{
		Publishers: []string{srv.URL}, Aggregators: []string{srv.URL}, Epochs: 1,
		RetryMax: clientRetries, RetryWaitMin: time.Millisecond, RetryWaitMax: time.Millisecond,
	})
	if err != nil {
		return err
	}
	got, want, callErr := call(ctx, cl, c, w)

	var diffs []string
	fail := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	attempts := 1
	if c.Want.Retried {
		attempts += clientRetries
	}
	mu.Lock()
	if len(asks) != attempts {
		fail("%d requests, want %d (%s)", len(asks), attempts, map[bool]string{true: "retried", false: "final"}[c.Want.Retried])
	}
	for _, a := range asks {
		if a != want {
			fail("request %q, want %q", a, want)
		}
	}
	mu.Unlock()
	switch {
	case c.Want.Value != nil:
		if callErr != nil {
			fail("error %v, want %#v", callErr, c.Want.Value)
		} else if !reflect.DeepEqual(got, c.Want.Value) {
			fail("result\n\t\t%#v\n\twant\n\t\t%#v", got, c.Want.Value)
		}
	case callErr == nil:
		fail("no error, result %#v", got)
	default:
		if c.Want.Err != nil && !errors.Is(callErr, c.Want.Err) {
			fail("error %v, want %v", callErr, c.Want.Err)
		}
		var se *walrus.StatusError
		switch {
		case c.Want.Status == 0 && errors.As(callErr, &se):
			fail("error %v is an HTTP status error, want the answer's own", callErr)
		case c.Want.Status != 0 && !errors.As(callErr, &se):
			fail("error %v, want HTTP %d", callErr, c.Want.Status)
		case c.Want.Status != 0 && (se.StatusCode != c.Want.Status || se.Reason != c.Want.Reason):
			fail("HTTP %d (%q), want %d (%q)", se.StatusCode, se.Reason, c.Want.Status, c.Want.Reason)
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s %s (answered with %s):\n\t%s", c.Op, c.Name, c.Fixture, strings.Join(diffs, "\n\t"))
	}
	return nil
}

// call does the case's operation with the client: its result, the
// request it must have sent (method, path, query, Range), and its error.
func call(ctx context.Context, cl *walrus.Client, c Case, w World) (got any, want string, err error) {
	var buf bytes.Buffer
	esc := url.PathEscape
	switch c.Op {
	case OpStore:
		r, err := cl.Store(ctx, walrus.BytesBody(w.Content))
		r.Publisher, r.Attempts, r.Duration = "", 0, 0
		return r, "PUT /v1/blobs?epochs=1", err
	case OpStoreQuilt:
		parts := make([]walrus.QuiltPart, len(w.Parts))
		for i, p := range w.Parts {
			parts[i] = walrus.QuiltPart{Identifier: p.Identifier, Body: walrus.BytesBody(p.Data)}
		}
		r, err := cl.StoreQuilt(ctx, parts)
		r.Publisher, r.Attempts, r.Duration = "", 0, 0
		return r, "PUT /v1/quilts?epochs=1", err
	case OpRead:
		_, err = cl.Read(ctx, w.BlobID, &buf)
		return buf.Bytes(), "GET /v1/blobs/" + esc(w.BlobID), err
	case OpReadRange:
		first, last, ok := closedRange(c.Ask.Range)
		if !ok {
			return nil, "", fmt.Errorf("case range %q is not closed", c.Ask.Range)
		}
		_, err = cl.ReadRange(ctx, w.BlobID, first, last-first+1, &buf)
		return buf.Bytes(), "GET /v1/blobs/" + esc(w.BlobID) + " Range: " + c.Ask.Range, err
	case OpReadPatch:
		_, err = cl.ReadPatch(ctx, w.PatchID, &buf, walrus.WithIdentifier(w.Identifier))
		return buf.Bytes(), "GET /v1/blobs/by-quilt-patch-id/" + esc(w.PatchID), err
	case OpReadByIdentifier:
		_, err = cl.ReadPatchByIdentifier(ctx, w.QuiltID, w.Identifier, &buf)
		return buf.Bytes(), "GET /v1/blobs/by-quilt-id/" + esc(w.QuiltID) + "/" + esc(w.Identifier), err
	case OpListPatches:
		list, err := cl.ListPatches(ctx, w.QuiltID)
		return list, "GET /v1/quilts/" + esc(w.QuiltID) + "/patches", err
	}
	return nil, "", fmt.Errorf("unknown operation %q", c.Op)
}

// closedRange parses "bytes=first-last".
func closedRange(h string) (first, last int64, ok bool) {
	a, b, ok := strings.Cut(strings.TrimPrefix(h, "bytes="), "-")
	f, err1 := strconv.ParseInt(a, 10, 64)
	l, err2 := strconv.ParseInt(b, 10, 64)
	return f, l, ok && err1 == nil && err2 == nil && f <= l
}
