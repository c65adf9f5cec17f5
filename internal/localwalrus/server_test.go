package localwalrus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/wait"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// start runs a server on a free loopback port for the test's lifetime.
func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, url string, body []byte, header ...string) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func put(t *testing.T, s *Server, query string, body []byte) response {
	t.Helper()
	return do(t, http.MethodPut, s.URL()+"/v1/blobs?"+query, body, "Content-Type", "application/octet-stream")
}

// storeResult decodes the parts of a store answer the tests look at.
type storeResult struct {
	NewlyCreated *struct {
		BlobObject struct {
			ID              string `json:"id"`
			RegisteredEpoch uint32 `json:"registeredEpoch"`
			BlobID          string `json:"blobId"`
			Size            int64  `json:"size"`
			EncodingType    string `json:"encodingType"`
			CertifiedEpoch  uint32 `json:"certifiedEpoch"`
			Storage         struct {
				StartEpoch uint32 `json:"startEpoch"`
				EndEpoch   uint32 `json:"endEpoch"`
			} `json:"storage"`
			Deletable bool `json:"deletable"`
		} `json:"blobObject"`
		SharedBlobObject string `json:"sharedBlobObject"`
	} `json:"newlyCreated"`
	AlreadyCertified *struct {
		BlobID string `json:"blobId"`
		Event  *struct {
			TxDigest string `json:"txDigest"`
			EventSeq string `json:"eventSeq"`
		} `json:"event"`
		Object   string `json:"object"`
		EndEpoch uint32 `json:"endEpoch"`
	} `json:"alreadyCertified"`
}

func decodeStore(t *testing.T, r response) storeResult {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("store: status %d: %s", r.status, r.body)
	}
	var sr storeResult
	if err := json.Unmarshal(r.body, &sr); err != nil {
		t.Fatalf("store answer %s: %v", r.body, err)
	}
	return sr
}

func apiErrorReason(t *testing.T, body []byte) (status string, code int, reason string) {
	t.Helper()
	var b statusBody
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	if len(b.Error.Details) > 0 {
		reason = b.Error.Details[0].Reason
	}
	return b.Error.Status, b.Error.Code, reason
}

func TestStoreAndReadShapes(t *testing.T) {
	// The testnet price of the docs' example: 63 units at 2,100 FROST.
	s := start(t, Config{StartEpoch: 34, Price: walruscost.Price{Storage: 1_000, Write: 1_100}})
	content := []byte("hello, walrus! 17")
	r := put(t, s, "epochs=1", content)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	// Field order matches the daemon's serde output.
	if !bytes.HasPrefix(r.body, []byte(`{"newlyCreated":{"blobObject":{"id":"0x`)) {
		t.Fatalf("answer starts %q", r.body[:min(60, len(r.body))])
	}
	for _, frag := range []string{`"registeredEpoch":34,"blobId":"`, `"size":17,"encodingType":"RS2","certifiedEpoch":34,"storage":{"id":"0x`,
		`"startEpoch":34,"endEpoch":35,"storageSize":66034000},"deletable":true},"resourceOperation":{"registerFromScratch":{"encodedLength":66034000,`,
		`"epochsAhead":1}},"cost":132300}}`} {
		if !bytes.Contains(r.body, []byte(frag)) {
			t.Errorf("answer %s lacks %s", r.body, frag)
		}
	}
	sr := decodeStore(t, r)
	id := sr.NewlyCreated.BlobObject.BlobID
	if id != BlobID(content) {
		t.Fatalf("blob id %s, want %s", id, BlobID(content))
	}
	if len(sr.NewlyCreated.BlobObject.ID) != 66 {
		t.Errorf("object id %q", sr.NewlyCreated.BlobObject.ID)
	}

	g := do(t, http.MethodGet, s.URL()+"/v1/blobs/"+id, nil)
	if g.status != http.StatusOK || !bytes.Equal(g.body, content) {
		t.Fatalf("read: %d %q", g.status, g.body)
	}
	want := map[string]string{
		"ETag":                   id,
		"Cache-Control":          "public, max-age=86400, stale-while-revalidate=3600",
		"X-Content-Type-Options": "nosniff",
		"Content-Length":         "17",
	}
	for k, v := range want {
		if got := g.header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	// No Content-Type unless the request asks for one (none sniffed).
	if ct, ok := g.header["Content-Type"]; ok {
		t.Errorf("Content-Type %q without Accept", ct)
	}
	if got := do(t, http.MethodGet, s.URL()+"/v1/blobs/"+id, nil, "Accept", "text/plain").header.Get("Content-Type"); got != "text/plain" {
		t.Errorf("Accept not mirrored: %q", got)
	}
	if st := do(t, http.MethodGet, s.URL()+"/status", nil); st.status != 200 || string(st.body) != "OK" {
		t.Errorf("status: %d %q", st.status, st.body)
	}
	if api := do(t, http.MethodGet, s.URL()+"/v1/api", nil); api.status != 200 || !bytes.Contains(api.body, []byte("/v1/blobs")) {
		t.Errorf("api page: %d", api.status)
	}
}

func TestEmptyBlob(t *testing.T) {
	s := start(t, Config{})
	sr := decodeStore(t, put(t, s, "epochs=2", []byte{}))
	id := sr.NewlyCreated.BlobObject.BlobID
	g := do(t, http.MethodGet, s.URL()+"/v1/blobs/"+id, nil)
	if g.status != 200 || len(g.body) != 0 || g.header.Get("Content-Length") != "0" {
		t.Fatalf("empty read: %d %q %q", g.status, g.body, g.header.Get("Content-Length"))
	}
	// No range is satisfiable in an empty blob.
	if r := do(t, http.MethodGet, s.URL()+"/v1/blobs/"+id, nil, "Range", "bytes=0-0"); r.status != 416 {
		t.Errorf("range on empty blob: %d", r.status)
	}
}

func TestQueryValidation(t *testing.T) {
	s := start(t, Config{})
	addr := "0x" + strings.Repeat("ab", 32)
	id := decodeStore(t, put(t, s, "epochs=3", []byte("x"))).NewlyCreated.BlobObject.BlobID
	tests := []struct {
		name, method, target string
		status               int
		reason               string // JSON error reason; "" means a plain-text body
	}{
		{"unknown publisher param", "PUT", "/v1/blobs?epochs=1&bogus=1", 400, ""},
		{"duplicate param", "PUT", "/v1/blobs?epochs=1&epochs=2", 400, ""},
		{"epochs not a number", "PUT", "/v1/blobs?epochs=many", 400, ""},
		{"bad bool", "PUT", "/v1/blobs?permanent=yes", 400, ""},
		{"share with send_object_to", "PUT", "/v1/blobs?share=true&send_object_to=" + addr, 400, ""},
		{"bad address", "PUT", "/v1/blobs?send_object_to=0xzz", 400, ""},
		{"bad encoding", "PUT", "/v1/blobs?encoding_type=RedStuff", 400, ""},
		{"deletable and permanent", "PUT", "/v1/blobs?deletable=true&permanent=true", 400, "INVALID_BLOB_PERSISTENCE"},
		{"zero epochs", "PUT", "/v1/blobs?epochs=0", 400, "MALFORMED_REQUEST"},
		{"too many epochs", "PUT", "/v1/blobs?epochs=54", 400, "MALFORMED_REQUEST"},
		{"all valid params", "PUT", "/v1/blobs?epochs=53&permanent=true&force=true&encoding_type=RS2&send_object_to=" + addr + "&quilt_version=V1&reuse_resources=false", 200, ""},
		{"share", "PUT", "/v1/blobs?share=true", 200, ""},
		{"default epochs", "PUT", "/v1/blobs", 200, ""},
		{"unknown read param", "GET", "/v1/blobs/" + id + "?consistency=strict", 400, ""},
		{"strict and skip", "GET", "/v1/blobs/" + id + "?strict_consistency_check=true&skip_consistency_check=true", 400, "INVALID_CONSISTENCY_CHECK"},
		{"strict", "GET", "/v1/blobs/" + id + "?strict_consistency_check=true", 200, ""},
		{"skip", "GET", "/v1/blobs/" + id + "?skip_consistency_check=true", 200, ""},
		{"malformed id", "GET", "/v1/blobs/not-a-blob-id", 400, ""},
		{"id with padding", "GET", "/v1/blobs/" + id[:42] + "=", 400, ""},
		{"case-changed id is another blob", "GET", "/v1/blobs/" + flipCase(id), 404, "BLOB_NOT_FOUND"},
		{"unknown blob", "GET", "/v1/blobs/" + BlobID([]byte("never stored")), 404, "BLOB_NOT_FOUND"},
		{"wrong method", "POST", "/v1/blobs", 405, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body []byte
			if tt.method == "PUT" {
				body = []byte("payload " + tt.name)
			}
			r := do(t, tt.method, s.URL()+tt.target, body)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d (%s)", r.status, tt.status, r.body)
			}
			if tt.status == 200 || tt.status == 405 {
				return
			}
			ct := r.header.Get("Content-Type")
			if tt.reason == "" {
				if !strings.HasPrefix(ct, "text/plain") {
					t.Errorf("Content-Type %q, want plain text", ct)
				}
				return
			}
			if ct != "application/json" {
				t.Errorf("Content-Type %q, want JSON", ct)
			}
			if _, code, reason := apiErrorReason(t, r.body); reason != tt.reason || code != tt.status {
				t.Errorf("reason %q code %d, want %q %d", reason, code, tt.reason, tt.status)
			}
		})
	}
}

func TestRange(t *testing.T) {
	s := start(t, Config{})
	content := []byte("0123456789abcdefghij")
	id := decodeStore(t, put(t, s, "", content)).NewlyCreated.BlobObject.BlobID
	tests := []struct {
		rng       string
		status    int
		body      string
		contRange string
	}{
		{"bytes=0-0", 206, "0", "bytes 0-0/20"},
		{"bytes=2-5", 206, "2345", "bytes 2-5/20"},
		{"bytes=0-19", 206, string(content), "bytes 0-19/20"},
		{" bytes=10-19 ", 206, "abcdefghij", "bytes 10-19/20"},
		{"bytes=19-19", 206, "j", "bytes 19-19/20"},
		{"bytes=15-19", 206, "fghij", "bytes 15-19/20"},
		{"bytes=19-20", 416, "", ""},
		{"bytes=20-20", 416, "", ""},
		{"bytes=0-999999999999999999", 416, "", ""},
		{"bytes=0-9999999999999999999", 416, "", ""},
		{"bytes=5-", 416, "", ""},
		{"bytes=-5", 416, "", ""},
		{"bytes=0-1,4-5", 416, "", ""},
		{"bytes=5-2", 416, "", ""},
		{"bytes=0-20", 416, "", ""},
		{"bytes=20-25", 416, "", ""},
		{"items=0-1", 416, "", ""},
		{"bytes=a-b", 416, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.rng, func(t *testing.T) {
			r := do(t, http.MethodGet, s.URL()+"/v1/blobs/"+id, nil, "Range", tt.rng)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.status == 416 {
				if _, _, reason := apiErrorReason(t, r.body); reason != "INVALID_BYTE_RANGE" {
					t.Errorf("reason %q", reason)
				}
				return
			}
			if string(r.body) != tt.body || r.header.Get("Content-Range") != tt.contRange ||
				r.header.Get("Content-Length") != strconv.Itoa(len(tt.body)) {
				t.Errorf("got %q %q %q, want %q %q", r.body, r.header.Get("Content-Range"), r.header.Get("Content-Length"), tt.body, tt.contRange)
			}
		})
	}
}

func TestDedupAndPersistence(t *testing.T) {
	s := start(t, Config{StartEpoch: 10})
	perm := []byte("permanent content")
	first := decodeStore(t, put(t, s, "epochs=5&permanent=true", perm)).NewlyCreated
	if first == nil || first.BlobObject.Deletable || first.BlobObject.Storage.EndEpoch != 15 {
		t.Fatalf("first store: %+v", first)
	}
	id := first.BlobObject.BlobID

	// Same bytes, a lifetime the stored blob covers: alreadyCertified.
	again := decodeStore(t, put(t, s, "epochs=3&permanent=true", perm))
	if again.AlreadyCertified == nil || again.AlreadyCertified.BlobID != id || again.AlreadyCertified.EndEpoch != 15 ||
		again.AlreadyCertified.Event == nil || again.AlreadyCertified.Event.EventSeq != "0" || again.AlreadyCertified.Event.TxDigest == "" {
		t.Fatalf("re-store: %+v", again)
	}
	// A deletable request is satisfied by a permanent blob too.
	if r := decodeStore(t, put(t, s, "epochs=5", perm)); r.AlreadyCertified == nil {
		t.Errorf("deletable re-store of a permanent blob: %+v", r)
	}
	// Longer than stored, or forced: a new registration.
	if r := decodeStore(t, put(t, s, "epochs=6&permanent=true", perm)); r.NewlyCreated == nil || r.NewlyCreated.BlobObject.BlobID != id {
		t.Errorf("longer re-store: %+v", r)
	}
	if r := decodeStore(t, put(t, s, "epochs=1&permanent=true&force=true", perm)); r.NewlyCreated == nil {
		t.Errorf("forced re-store: %+v", r)
	}

	// Deletable blobs owned by the publisher dedup with "object"...
	del := []byte("deletable content")
	d1 := decodeStore(t, put(t, s, "epochs=2", del)).NewlyCreated
	d2 := decodeStore(t, put(t, s, "epochs=2", del)).AlreadyCertified
	if d2 == nil || d2.Object != d1.BlobObject.ID || d2.Event != nil {
		t.Fatalf("deletable re-store: %+v", d2)
	}
	// ...but not for a permanent request, nor once sent away.
	if r := decodeStore(t, put(t, s, "epochs=2&permanent=true", del)); r.NewlyCreated == nil {
		t.Errorf("permanent request over a deletable blob: %+v", r)
	}
	sent := []byte("sent content")
	addr := "0x" + strings.Repeat("0", 63) + "1"
	decodeStore(t, put(t, s, "epochs=2&send_object_to="+addr, sent))
	if r := decodeStore(t, put(t, s, "epochs=2", sent)); r.NewlyCreated == nil {
		t.Errorf("re-store of a blob sent away: %+v", r)
	}
	if r := decodeStore(t, put(t, s, "share=true", []byte("shared"))); r.NewlyCreated == nil || len(r.NewlyCreated.SharedBlobObject) != 66 {
		t.Errorf("share: %+v", r)
	}

	// A restarted server on the same directory keeps blobs and the clock.
	s.AdvanceEpochs(2)
	s.Close()
	s2 := start(t, Config{Dir: s.cfg.Dir, StartEpoch: 99})
	if e := s2.Epoch(); e != 12 {
		t.Fatalf("epoch after restart %d, want 12", e)
	}
	if g := do(t, http.MethodGet, s2.URL()+"/v1/blobs/"+id, nil); g.status != 200 || !bytes.Equal(g.body, perm) {
		t.Fatalf("read after restart: %d", g.status)
	}
	// Expiry is exclusive: the longest registration ends at 16.
	s2.AdvanceEpochs(3) // epoch 15
	if g := do(t, http.MethodGet, s2.URL()+"/v1/blobs/"+id, nil); g.status != 200 {
		t.Fatalf("read at epoch 15: %d", g.status)
	}
	s2.AdvanceEpochs(1) // epoch 16
	g := do(t, http.MethodGet, s2.URL()+"/v1/blobs/"+id, nil)
	if g.status != 404 {
		t.Fatalf("read at end epoch: %d", g.status)
	}
	if _, _, reason := apiErrorReason(t, g.body); reason != "BLOB_NOT_FOUND" {
		t.Errorf("reason %q", reason)
	}
	// Storing again after expiry works and reads back.
	r := decodeStore(t, put(t, s2, "epochs=1&permanent=true", perm))
	if r.NewlyCreated == nil || r.NewlyCreated.BlobObject.Storage.EndEpoch != 17 {
		t.Fatalf("store after expiry: %+v", r)
	}
	if g := do(t, http.MethodGet, s2.URL()+"/v1/blobs/"+id, nil); g.status != 200 || !bytes.Equal(g.body, perm) {
		t.Fatalf("read after re-store: %d", g.status)
	}
}

func TestEpochClock(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	dir := t.TempDir()
	s, err := New(Config{Dir: dir, Now: clock, EpochDuration: time.Hour, StartEpoch: 7})
	if err != nil {
		t.Fatal(err)
	}
	if e := s.Epoch(); e != 7 {
		t.Fatalf("start epoch %d", e)
	}
	mu.Lock()
	now = now.Add(150 * time.Minute)
	mu.Unlock()
	if e := s.Epoch(); e != 9 {
		t.Fatalf("after 2.5 epochs: %d", e)
	}
	// The start time is persisted: a new server sees the same epoch.
	s2, err := New(Config{Dir: dir, Now: clock, EpochDuration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if e := s2.Epoch(); e != 9 {
		t.Fatalf("reopened: %d", e)
	}
}

func TestBodyLimit(t *testing.T) {
	s := start(t, Config{MaxBodySize: 1024})
	check := func(t *testing.T, r response) {
		t.Helper()
		if r.status != http.StatusRequestEntityTooLarge || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
			t.Fatalf("status %d %q: %s", r.status, r.header.Get("Content-Type"), r.body)
		}
	}
	t.Run("content-length", func(t *testing.T) { check(t, put(t, s, "", make([]byte, 1025))) })
	t.Run("chunked", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, s.URL()+"/v1/blobs", io.MultiReader(bytes.NewReader(make([]byte, 4096))))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		check(t, response{resp.StatusCode, resp.Header, b})
	})
	t.Run("at the limit", func(t *testing.T) {
		if r := put(t, s, "", make([]byte, 1024)); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	})
}

func TestFaults(t *testing.T) {
	var mu sync.Mutex
	var infos []RequestInfo
	s := start(t, Config{OnRequest: func(ri RequestInfo) { mu.Lock(); infos = append(infos, ri); mu.Unlock() }})
	content := bytes.Repeat([]byte("0123456789"), 1000)
	id := decodeStore(t, put(t, s, "epochs=1", content)).NewlyCreated.BlobObject.BlobID
	blobURL := s.URL() + "/v1/blobs/" + id

	s.InjectNext(RouteAggregator,
		Fault{Kind: FaultStatus, Status: 503, RetryAfter: "7"},
		Fault{Kind: FaultStatus, Status: 429},
		Fault{Kind: FaultTruncate, CutAt: 1234},
		Fault{Kind: FaultReset, CutAt: 10},
	)
	r := do(t, http.MethodGet, blobURL, nil)
	if r.status != 503 || r.header.Get("Retry-After") != "7" {
		t.Fatalf("503 fault: %d %q", r.status, r.header.Get("Retry-After"))
	}
	if _, _, reason := apiErrorReason(t, r.body); reason != "BLOB_UNAVAILABLE" {
		t.Errorf("503 reason %q", reason)
	}
	if r := do(t, http.MethodGet, blobURL, nil); r.status != 429 || !strings.Contains(string(r.body), "too many requests") {
		t.Fatalf("429 fault: %d %q", r.status, r.body)
	}
	for _, kind := range []string{"truncate", "reset"} {
		resp, err := http.Get(blobURL)
		if err != nil {
			if kind == "reset" {
				continue // the reset may beat the headers
			}
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatalf("%s: body read without error (%d bytes)", kind, len(b))
		}
		if kind == "truncate" && (len(b) != 1234 || !errors.Is(err, io.ErrUnexpectedEOF)) {
			t.Fatalf("truncate: %d bytes, %v", len(b), err)
		}
	}
	if r := do(t, http.MethodGet, blobURL, nil); r.status != 200 || !bytes.Equal(r.body, content) {
		t.Fatalf("after faults: %d", r.status)
	}

	// A store reset after its body arrived stores nothing.
	s.InjectNext(RoutePublisher, Fault{Kind: FaultReset})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, s.URL()+"/v1/blobs", bytes.NewReader([]byte("lost")))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("reset store answered %d", resp.StatusCode)
	}
	if r := do(t, http.MethodGet, s.URL()+"/v1/blobs/"+BlobID([]byte("lost")), nil); r.status != 404 {
		t.Errorf("reset store left a blob: %d", r.status)
	}
	// A truncated store answer still stored the blob.
	s.InjectNext(RoutePublisher, Fault{Kind: FaultTruncate})
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodPut, s.URL()+"/v1/blobs", bytes.NewReader([]byte("kept")))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatal("truncated store answer read without error")
		}
	}
	if r := do(t, http.MethodGet, s.URL()+"/v1/blobs/"+BlobID([]byte("kept")), nil); r.status != 200 {
		t.Errorf("truncated store lost the blob: %d", r.status)
	}

	// Random faults are reproducible from the seed.
	seq := func() []FaultKind {
		s.SetFaults(Faults{Rate: 0.5, Seed: 42, Target: RouteOther,
			Kinds: []Fault{{Kind: FaultStatus, Status: 500}, {Kind: FaultStatus, Status: 504}}})
		var out []FaultKind
		for range 20 {
			if r := do(t, http.MethodGet, s.URL()+"/status", nil); r.status != 200 {
				out = append(out, FaultKind(r.status/100))
			} else {
				out = append(out, FaultNone)
			}
		}
		return out
	}
	a, b := seq(), seq()
	if !equalKinds(a, b) {
		t.Errorf("fault sequences differ for one seed: %v vs %v", a, b)
	}
	if countNone(a) == 0 || countNone(a) == len(a) {
		t.Errorf("rate 0.5 gave %v", a)
	}
	s.SetFaults(Faults{})

	// The client saw each cut answer before the server finished its
	// request; wait for the server's own record of every one.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := s.Quiesce(ctx); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.ByRoute[RouteAggregator][503] != 1 || st.ByRoute[RouteAggregator][429] != 1 || st.Faults[FaultTruncate] != 2 || st.Faults[FaultReset] != 2 {
		t.Errorf("stats %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	var sawTrunc bool
	for _, ri := range infos {
		if ri.Fault == FaultTruncate && ri.Route == RouteAggregator {
			sawTrunc = ri.BytesOut == 1234 && ri.Status == 200 && ri.BlobID == id
		}
	}
	if !sawTrunc {
		t.Error("OnRequest did not report the truncated read")
	}
}

// flipCase changes the case of the first letter of id (not the last
// character, whose low bits must stay zero).
func flipCase(id string) string {
	b := []byte(id)
	for i := range len(b) - 1 {
		switch c := b[i]; {
		case c >= 'a' && c <= 'z':
			b[i] = c - 32
			return string(b)
		case c >= 'A' && c <= 'Z':
			b[i] = c + 32
			return string(b)
		}
	}
	panic("no letter in " + id)
}

func equalKinds(a, b []FaultKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func countNone(a []FaultKind) int {
	n := 0
	for _, k := range a {
		if k == FaultNone {
			n++
		}
	}
	return n
}

func TestStartRefusesRemote(t *testing.T) {
	s, err := New(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:80"} {
		if err := s.Start(addr); err == nil {
			s.Close()
			t.Fatalf("Start(%q) succeeded", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		if err := CheckLoopback(addr, false); err != nil {
			t.Errorf("CheckLoopback(%q): %v", addr, err)
		}
	}
	if err := CheckLoopback("0.0.0.0:1", true); err != nil {
		t.Errorf("allowRemote: %v", err)
	}
}

func TestBlobIDShape(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range []string{"", "a", "b", strings.Repeat("x", 1000)} {
		id := BlobID([]byte(c))
		if _, ok := decodeBlobID(id); !ok || len(id) != 43 {
			t.Fatalf("id %q of %q is malformed", id, c)
		}
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
	if base58([]byte{0, 0, 1}) != "112" {
		t.Errorf("base58 leading zeros: %s", base58([]byte{0, 0, 1}))
	}
}

// TestHostileFaults covers the faults of a hostile server: endless bodies,
// lying lengths and redirects to another origin.
func TestHostileFaults(t *testing.T) {
	var mu sync.Mutex
	var infos []RequestInfo
	s := start(t, Config{OnRequest: func(ri RequestInfo) { mu.Lock(); infos = append(infos, ri); mu.Unlock() }})
	content := bytes.Repeat([]byte("0123456789"), 1000)
	id := decodeStore(t, put(t, s, "epochs=1", content)).NewlyCreated.BlobObject.BlobID
	blobURL := s.URL() + "/v1/blobs/" + id
	last := func() RequestInfo {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		if err := s.Quiesce(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return infos[len(infos)-1]
	}
	// get sends a GET without following redirects and returns the answer
	// with up to limit body bytes and the error that ended them.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(method, url string, body []byte, limit int64, header ...string) (*http.Response, []byte, error) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, url, rd)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
		return resp, b, err
	}

	t.Run("endless chunked", func(t *testing.T) {
		s.InjectNext(RouteAggregator, Fault{Kind: FaultEndless})
		resp, b, err := get("GET", blobURL, nil, 5<<20)
		if err != nil || resp.StatusCode != 200 || resp.ContentLength != -1 || len(b) != 5<<20 {
			t.Fatalf("%d, Content-Length %d, %d bytes, %v", resp.StatusCode, resp.ContentLength, len(b), err)
		}
		if ri := last(); ri.Fault != FaultEndless || ri.BytesOut < 5<<20 || ri.Route != RouteAggregator {
			t.Fatalf("recorded %+v", ri)
		}
	})
	t.Run("endless with 1 TiB Content-Length", func(t *testing.T) {
		s.InjectNext(RouteAggregator, Fault{Kind: FaultEndless, Length: 1 << 40})
		resp, b, err := get("GET", blobURL, nil, 1<<20)
		if err != nil || resp.StatusCode != 200 || resp.ContentLength != 1<<40 || len(b) != 1<<20 {
			t.Fatalf("%d, Content-Length %d, %d bytes, %v", resp.StatusCode, resp.ContentLength, len(b), err)
		}
		last()
	})
	t.Run("endless with a small Content-Length", func(t *testing.T) {
		s.InjectNext(RouteAggregator, Fault{Kind: FaultEndless, Length: 100_000})
		resp, b, err := get("GET", blobURL, nil, 1<<20)
		if err != nil || resp.ContentLength != 100_000 || len(b) != 100_000 {
			t.Fatalf("Content-Length %d, %d bytes, %v", resp.ContentLength, len(b), err)
		}
		if ri := last(); ri.BytesOut != 100_000 {
			t.Fatalf("recorded %+v", ri)
		}
	})
	t.Run("endless store answer", func(t *testing.T) {
		s.InjectNext(RoutePublisher, Fault{Kind: FaultEndless})
		body := []byte("never stored")
		resp, b, err := get("PUT", s.URL()+"/v1/blobs?epochs=1", body, 2<<20)
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || len(b) != 2<<20 ||
			!bytes.HasPrefix(b, []byte(`{"newlyCreated":{"blobObject":{"id":"0x0000`)) {
			t.Fatalf("%d %q, %d bytes %.50q, %v", resp.StatusCode, resp.Header.Get("Content-Type"), len(b), b, err)
		}
		if ri := last(); ri.Fault != FaultEndless || ri.BytesIn != int64(len(body)) {
			t.Fatalf("recorded %+v", ri)
		}
		if r := do(t, "GET", s.URL()+"/v1/blobs/"+BlobID(body), nil); r.status != 404 {
			t.Fatalf("the endless store stored: %d", r.status)
		}
	})
	t.Run("lying length, short", func(t *testing.T) {
		s.InjectNext(RouteAggregator, Fault{Kind: FaultLyingLength})
		resp, b, err := get("GET", blobURL, nil, 1<<20)
		if err != nil || resp.StatusCode != 200 || resp.ContentLength != 5000 || !bytes.Equal(b, content[:5000]) {
			t.Fatalf("Content-Length %d, %d bytes, %v", resp.ContentLength, len(b), err)
		}
		if ri := last(); ri.Fault != FaultLyingLength || ri.BytesOut != 5000 {
			t.Fatalf("recorded %+v", ri)
		}
	})
	t.Run("lying length, long", func(t *testing.T) {
		s.InjectNext(RouteAggregator, Fault{Kind: FaultLyingLength, Length: 20_000})
		resp, b, err := get("GET", blobURL, nil, 1<<20)
		if !errors.Is(err, io.ErrUnexpectedEOF) || resp.ContentLength != 20_000 || !bytes.Equal(b, content) {
			t.Fatalf("Content-Length %d, %d bytes, %v", resp.ContentLength, len(b), err)
		}
	})
	t.Run("lying length, range", func(t *testing.T) {
		s.InjectNext(RouteAggregator, Fault{Kind: FaultLyingLength})
		resp, b, err := get("GET", blobURL, nil, 1<<20, "Range", "bytes=100-199")
		if err != nil || resp.StatusCode != 206 || resp.Header.Get("Content-Range") != "bytes 100-199/10000" ||
			resp.ContentLength != 50 || !bytes.Equal(b, content[100:150]) {
			t.Fatalf("%d %q, Content-Length %d, %d bytes, %v", resp.StatusCode, resp.Header.Get("Content-Range"), resp.ContentLength, len(b), err)
		}
	})
	t.Run("lying length, store answer", func(t *testing.T) {
		s.InjectNext(RoutePublisher, Fault{Kind: FaultLyingLength})
		body := []byte("stored under a lie")
		resp, b, err := get("PUT", s.URL()+"/v1/blobs?epochs=1", body, 1<<20)
		if err != nil || resp.StatusCode != 200 || json.Valid(b) || int64(len(b)) != resp.ContentLength {
			t.Fatalf("%d, Content-Length %d, %q, %v", resp.StatusCode, resp.ContentLength, b, err)
		}
		if r := do(t, "GET", s.URL()+"/v1/blobs/"+BlobID(body), nil); r.status != 200 {
			t.Fatalf("not stored: %d", r.status)
		}
	})
	t.Run("redirect", func(t *testing.T) {
		tests := []struct {
			method, target string
			fault          Fault
			status         int
			location       string
		}{
			{"GET", "/v1/blobs/" + id + "?strict_consistency_check=true", Fault{Kind: FaultRedirect}, 307,
				"http://localhost:" + s.URL()[len("http://127.0.0.1:"):] + "/v1/blobs/" + id + "?strict_consistency_check=true"},
			{"PUT", "/v1/blobs?epochs=2", Fault{Kind: FaultRedirect, Status: 302, Location: "http://127.0.0.1:9/"}, 302,
				"http://127.0.0.1:9/v1/blobs?epochs=2"},
			{"GET", "/v1/blobs/" + id, Fault{Kind: FaultRedirect, Status: 200, Location: "https://other.example"}, 307,
				"https://other.example/v1/blobs/" + id},
		}
		for _, tt := range tests {
			route := RouteAggregator
			if tt.method == "PUT" {
				route = RoutePublisher
			}
			s.InjectNext(route, tt.fault)
			resp, _, err := get(tt.method, s.URL()+tt.target, []byte("redirected"), 1<<20)
			if err != nil || resp.StatusCode != tt.status || resp.Header.Get("Location") != tt.location {
				t.Fatalf("%s %s: %d %q %v", tt.method, tt.target, resp.StatusCode, resp.Header.Get("Location"), err)
			}
			if ri := last(); ri.Fault != FaultRedirect || ri.Status != tt.status {
				t.Fatalf("recorded %+v", ri)
			}
		}
		if r := do(t, "GET", s.URL()+"/v1/blobs/"+BlobID([]byte("redirected")), nil); r.status != 404 {
			t.Fatalf("a redirected store stored: %d", r.status)
		}
		if got := otherLoopback("localhost:80"); got != "http://127.0.0.1:80" {
			t.Errorf("otherLoopback: %s", got)
		}
	})
	// The real API stays exact around the faults.
	if r := do(t, "GET", blobURL, nil); r.status != 200 || !bytes.Equal(r.body, content) {
		t.Fatalf("after faults: %d", r.status)
	}
	if r := do(t, "GET", blobURL+"?unknown=1", nil); r.status != 400 {
		t.Fatalf("unknown parameter: %d", r.status)
	}
	if got := FaultKind(200).String(); got != "FaultKind(200)" {
		t.Errorf("String of an unknown kind: %s", got)
	}
	for k, want := range map[FaultKind]string{FaultEndless: "endless", FaultLyingLength: "lying-length", FaultRedirect: "redirect"} {
		if k.String() != want {
			t.Errorf("%d.String() = %q", k, k.String())
		}
	}
}

// costOf decodes what a store answer says it cost.
type costOf struct {
	NewlyCreated *struct {
		BlobObject struct {
			Storage struct {
				StorageSize uint64 `json:"storageSize"`
			} `json:"storage"`
		} `json:"blobObject"`
		ResourceOperation struct {
			RegisterFromScratch *struct {
				EncodedLength uint64 `json:"encodedLength"`
				EpochsAhead   uint32 `json:"epochsAhead"`
			} `json:"registerFromScratch"`
		} `json:"resourceOperation"`
		Cost *uint64 `json:"cost"`
	} `json:"newlyCreated"`
	AlreadyCertified map[string]json.RawMessage `json:"alreadyCertified"`
}

// TestStoreCost checks the encoded length and cost of store answers
// against Walrus's formula: the documented examples exactly, the default
// price, other shard counts, and no cost for alreadyCertified.
func TestStoreCost(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		size   int
		epochs uint32
		enc    uint64
		cost   uint64
	}{
		{"docs example, default price", Config{}, 17, 1, 66_034_000, 63 * (100_000 + 20_000)},
		{"docs quilt size, 5 epochs", Config{}, 1_782_224, 5, 72_040_000, 69 * (5*100_000 + 20_000)},
		{"empty", Config{}, 0, 2, 66_034_000, 63 * (2*100_000 + 20_000)},
		{"10 shards", Config{Shards: 10}, 29, 3, 10 * (2*(4+7) + 10*64 + 32), 1 * (3*100_000 + 20_000)},
		{"4 shards, set price", Config{Shards: 4, MaxBodySize: 1 << 10, Price: walruscost.Price{Storage: 7, Write: 3}}, 13, 4,
			4 * (4*(2+3) + 4*64 + 32), 1 * (4*7 + 3)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.cfg)
			content := bytes.Repeat([]byte{'x'}, tc.size)
			r := put(t, s, "epochs="+strconv.Itoa(int(tc.epochs))+"&permanent=true", content)
			if r.status != http.StatusOK {
				t.Fatalf("store: %d %s", r.status, r.body)
			}
			var c costOf
			if err := json.Unmarshal(r.body, &c); err != nil {
				t.Fatal(err)
			}
			nc := c.NewlyCreated
			if nc == nil || nc.Cost == nil || nc.ResourceOperation.RegisterFromScratch == nil {
				t.Fatalf("answer %s lacks newlyCreated, its cost or its resource operation", r.body)
			}
			rs := nc.ResourceOperation.RegisterFromScratch
			if nc.BlobObject.Storage.StorageSize != tc.enc || rs.EncodedLength != tc.enc || rs.EpochsAhead != tc.epochs {
				t.Errorf("storageSize %d, encodedLength %d, epochsAhead %d; want %d, %d, %d",
					nc.BlobObject.Storage.StorageSize, rs.EncodedLength, rs.EpochsAhead, tc.enc, tc.enc, tc.epochs)
			}
			if *nc.Cost != tc.cost {
				t.Errorf("cost %d, want %d", *nc.Cost, tc.cost)
			}
			// The same permanent blob again: alreadyCertified, no cost.
			again := put(t, s, "epochs=1&permanent=true", content)
			c = costOf{}
			if err := json.Unmarshal(again.body, &c); err != nil {
				t.Fatal(err)
			}
			if c.AlreadyCertified == nil || c.NewlyCreated != nil {
				t.Fatalf("second store: %s, want alreadyCertified", again.body)
			}
			if _, ok := c.AlreadyCertified["cost"]; ok {
				t.Errorf("alreadyCertified carries a cost: %s", again.body)
			}
		})
	}
}

// TestShardsBoundTheBody: a body limit above what the shards encode is
// lowered to it; a shard count the encoding has no place for is refused.
func TestShardsBoundTheBody(t *testing.T) {
	s := start(t, Config{Shards: 4, MaxBodySize: 1 << 30})
	max, _ := walruscost.MaxBlobSize(4) // 2·3·65,534 bytes
	if r := put(t, s, "epochs=1", make([]byte, max+1)); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a blob 4 shards cannot encode: %d %s", r.status, r.body)
	}
	if r := put(t, s, "epochs=1", make([]byte, max)); r.status != http.StatusOK {
		t.Errorf("the largest blob 4 shards encode: %d %s", r.status, r.body)
	}
	if _, err := New(Config{Dir: t.TempDir(), Shards: -1}); err == nil {
		t.Error("-1 shards accepted")
	}
}

// Replacing the faults lets the requests their latency holds go on: a
// network that recovers does not keep what it held.
func TestSetFaultsReleasesHeld(t *testing.T) {
	s := start(t, Config{Shards: 10})
	s.SetFaults(Faults{Rate: 1, Target: RoutePublisher, Latency: time.Hour, Kinds: []Fault{{Kind: FaultNone}}})
	done := make(chan error, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPut, s.URL()+"/v1/blobs?epochs=1", strings.NewReader("held"))
		if err != nil {
			done <- err
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		done <- err
	}()
	wait.For(t, "the store to be held", func() bool { return s.held.Load() == 1 })
	s.SetFaults(Faults{})
	var err error
	wait.For(t, "the held store to be released", func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	})
	if err != nil {
		t.Fatalf("the released store: %v", err)
	}
}
