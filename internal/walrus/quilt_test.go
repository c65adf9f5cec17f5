package walrus_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/walrus"
	"github.com/hermesd/hermesd/internal/walruscost"
)

func quiltParts(sizes ...int64) []walrus.QuiltPart {
	var ps []walrus.QuiltPart
	for i, n := range sizes {
		ps = append(ps, walrus.QuiltPart{Identifier: fmt.Sprintf("p%03d", i), Body: genBody{seed: uint64(i) + 7, size: n}})
	}
	return ps
}

func partBytes(t *testing.T, p walrus.QuiltPart) []byte {
	t.Helper()
	rc, err := p.Body.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestQuiltRoundTrip(t *testing.T) {
	var rec recorded
	// At 1000 shards, mainnet's: the quilt's layout and charge are theirs.
	s := startServer(t, localwalrus.Config{OnRequest: rec.add, Shards: walruscost.DefaultShards})
	c := newClient(t, s, walrus.Config{Shards: walruscost.DefaultShards})
	parts := quiltParts(3000, 0, 70_000)
	parts = append(parts, walrus.QuiltPart{Identifier: "Zed", Body: walrus.BytesBody([]byte("tiny"))},
		walrus.QuiltPart{Identifier: "Zünï/code ?#%", Body: walrus.BytesBody([]byte("escaped"))})
	res, err := c.StoreQuilt(t.Context(), parts, walrus.WithEpochs(2))
	if err != nil {
		t.Fatal(err)
	}
	if res.AlreadyCertified || res.EndEpoch != s.Epoch()+2 || res.Bytes != 73_011 || res.Size < res.Bytes {
		t.Errorf("result %+v", res.StoreResult)
	}
	// The quilt blob's store answer is parsed like a blob's: what the
	// cost ledger records of it (its share per patch) is the quilt's
	// charge by Walrus's formula, 445,556 bytes laid out here.
	enc, _ := walruscost.EncodedLength(uint64(res.Size), walruscost.DefaultShards)
	if want := walruscost.NewBlob(enc, 2, walruscost.DefaultPrice.Cost(enc, 2)); res.Size != 445_556 || res.Charge() != want ||
		res.EpochsPaid != 2 || res.ResourceOperation != "registerFromScratch" || res.StartEpoch != s.Epoch() {
		t.Errorf("quilt of %d bytes charged %+v (paid %d epochs from %d by %q), want %+v",
			res.Size, res.Charge(), res.EpochsPaid, res.StartEpoch, res.ResourceOperation, want)
	}
	settle(t, s)
	puts := rec.of(localwalrus.RoutePublisher)
	if len(puts) != 1 || puts[0].Path != "/v1/quilts" || !strings.HasPrefix(puts[0].Header.Get("Content-Type"), "multipart/form-data; boundary=") {
		t.Fatalf("requests %+v", puts)
	}
	if cl := puts[0].Header.Get("Content-Length"); cl == "" {
		t.Errorf("the quilt went out without Content-Length (chunked)")
	}
	for i, p := range res.Patches {
		if p.Identifier != parts[i].Identifier {
			t.Errorf("patch %d is %q, want %q: patches come back in the order of the parts", i, p.Identifier, parts[i].Identifier)
		}
		if !walrus.IsPatchID(p.PatchID) || walrus.ValidatePatchID(p.PatchID) != nil {
			t.Errorf("patch id %q", p.PatchID)
		}
		if q, err := walrus.PatchQuilt(p.PatchID); err != nil || q != res.BlobID {
			t.Errorf("patch %s belongs to %s (%v), want %s", p.PatchID, q, err, res.BlobID)
		}
		want := partBytes(t, parts[i])
		var got bytes.Buffer
		r, err := c.ReadPatch(t.Context(), p.PatchID, &got, walrus.WithIdentifier(p.Identifier), walrus.WithExpectedSize(int64(len(want))))
		if err != nil || !bytes.Equal(got.Bytes(), want) || r.Total != int64(len(want)) {
			t.Errorf("patch %s: %d bytes back (%v), want %d", p.Identifier, got.Len(), err, len(want))
		}
		// Read takes a patch id too; ReadToFile and Verify go through it.
		path := filepath.Join(t.TempDir(), "patch")
		if _, err := c.ReadToFile(t.Context(), p.PatchID, path); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, want) {
			t.Errorf("ReadToFile of patch %s differs", p.Identifier)
		}
		// By quilt id and identifier, escaped into the path.
		got.Reset()
		r, err = c.ReadPatchByIdentifier(t.Context(), res.BlobID, p.Identifier, &got)
		if err != nil || !bytes.Equal(got.Bytes(), want) || r.BlobID != res.BlobID {
			t.Errorf("patch %q by identifier: %d bytes back (%v), want %d", p.Identifier, got.Len(), err, len(want))
		}
	}
	if _, err := c.ReadPatchByIdentifier(t.Context(), res.BlobID, "p999", io.Discard); !errors.Is(err, walrus.ErrNotFound) || walrus.Attempts(err) != 1 {
		t.Errorf("an identifier the quilt lacks: %v", err)
	}
	for _, bad := range []struct{ quilt, identifier string }{{res.Patches[0].PatchID, "p000"}, {res.BlobID, ""}, {res.BlobID, "_metadata"}, {res.BlobID, "-dash"}} {
		if _, err := c.ReadPatchByIdentifier(t.Context(), bad.quilt, bad.identifier, io.Discard); err == nil {
			t.Errorf("ReadPatchByIdentifier(%q, %q) asked", bad.quilt, bad.identifier)
		}
	}
	// Patches are served whole: a range of one is refused here, not asked.
	if _, err := c.ReadRange(t.Context(), res.Patches[0].PatchID, 0, 10, io.Discard); !errors.Is(err, walrus.ErrInvalidRange) {
		t.Errorf("ReadRange of a patch: %v", err)
	}
	for _, ri := range rec.of(localwalrus.RouteAggregator) {
		if ri.Range != "" {
			t.Errorf("a patch read sent Range %q", ri.Range)
		}
	}
	list, err := c.ListPatches(t.Context(), res.BlobID)
	if err != nil || len(list) != len(parts) {
		t.Fatalf("list: %v %+v", err, list)
	}
	byID := map[string]string{}
	for _, p := range res.Patches {
		byID[p.Identifier] = p.PatchID
	}
	for _, p := range list {
		if byID[p.Identifier] != p.PatchID {
			t.Errorf("listed %+v", p)
		}
	}
	// A wrong identifier is refused.
	if _, err := c.ReadPatch(t.Context(), res.Patches[0].PatchID, io.Discard, walrus.WithIdentifier("p001")); !errors.Is(err, walrus.ErrProtocol) {
		t.Errorf("patch read as another identifier: %v", err)
	}
	// The same quilt again is deduplicated, with the same patch ids.
	again, err := c.StoreQuilt(t.Context(), parts, walrus.WithEpochs(1))
	if err != nil || !again.AlreadyCertified || again.BlobID != res.BlobID || again.Patches[2] != res.Patches[2] {
		t.Errorf("again: %+v %v", again, err)
	}
}

func TestQuiltRetries(t *testing.T) {
	var rec recorded
	s := startServer(t, localwalrus.Config{OnRequest: rec.add})
	c := newClient(t, s, walrus.Config{})
	parts := quiltParts(5000, 6000)
	// Refused, then stored with its answer lost, then deduplicated.
	s.InjectNext(localwalrus.RoutePublisher,
		localwalrus.Fault{Kind: localwalrus.FaultStatus, Status: 503, RetryAfter: "0"},
		localwalrus.Fault{Kind: localwalrus.FaultTruncate, CutAt: -1})
	res, err := c.StoreQuilt(t.Context(), parts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 3 || !res.AlreadyCertified {
		t.Errorf("attempts %d, alreadyCertified %v", res.Attempts, res.AlreadyCertified)
	}
	// A patch read cut off starts again (no Range) and delivers each byte once.
	s.InjectNext(localwalrus.RouteAggregator, localwalrus.Fault{Kind: localwalrus.FaultReset, CutAt: 1000})
	var got bytes.Buffer
	r, err := c.ReadPatch(t.Context(), res.Patches[1].PatchID, &got)
	if err != nil || !bytes.Equal(got.Bytes(), partBytes(t, parts[1])) || r.Attempts != 2 {
		t.Fatalf("cut patch read: %v, %d bytes, %d attempts", err, got.Len(), r.Attempts)
	}
	// Failover: the first publisher is dead.
	c2 := newClient(t, s, walrus.Config{Publishers: []string{deadURL(t), s.URL()}, Aggregators: []string{s.URL()}})
	if _, err := c2.StoreQuilt(t.Context(), quiltParts(10)); err != nil {
		t.Fatalf("failover: %v", err)
	}
}

func TestQuiltLimits(t *testing.T) {
	s := startServer(t, localwalrus.Config{})
	c := newClient(t, s, walrus.Config{MaxBlobSize: 64 << 10})
	too := make([]walrus.QuiltPart, walrus.MaxQuiltPatches+1)
	for i := range too {
		too[i] = walrus.QuiltPart{Identifier: fmt.Sprintf("p%d", i), Body: walrus.BytesBody(nil)}
	}
	for _, tc := range []struct {
		name  string
		parts []walrus.QuiltPart
		want  error
	}{
		{"none", nil, nil},
		{"667 parts", too, walrus.ErrTooLarge},
		{"body over max_blob_size", quiltParts(65 << 10), walrus.ErrTooLarge},
		{"underscore", []walrus.QuiltPart{{Identifier: "_x", Body: walrus.BytesBody(nil)}}, nil},
		{"duplicate", []walrus.QuiltPart{{Identifier: "x", Body: walrus.BytesBody(nil)}, {Identifier: "x", Body: walrus.BytesBody(nil)}}, nil},
	} {
		_, err := c.StoreQuilt(t.Context(), tc.parts)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	for _, tc := range []struct {
		id          string
		patch, okID bool
	}{
		{strings.Repeat("A", 43), false, false}, // a blob id
		{strings.Repeat("A", 50), true, true},
		{strings.Repeat("A", 44), true, true},  // 33 bytes: the quilt's id and a version
		{strings.Repeat("A", 45), true, false}, // no whole number of bytes
		{strings.Repeat("A", 87), true, false},
		{strings.Repeat("A", 49) + "=", true, false},
		{strings.Repeat("A", 49) + "+", true, false},
	} {
		if walrus.IsPatchID(tc.id) != tc.patch || (walrus.ValidatePatchID(tc.id) == nil) != tc.okID {
			t.Errorf("%q: IsPatchID %v, ValidatePatchID %v", tc.id, walrus.IsPatchID(tc.id), walrus.ValidatePatchID(tc.id))
		}
	}
}

// hostilePublisher proxies to s, rewriting every quilt store's answer with
// edit, and every patch read's headers with editRead.
func hostilePublisher(t *testing.T, s *localwalrus.Server, edit func(map[string]any) any, editRead func(http.Header)) (string, *atomic.Int32) {
	t.Helper()
	u, _ := url.Parse(s.URL())
	rp := httputil.NewSingleHostReverseProxy(u)
	var stores atomic.Int32
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == http.MethodPut && resp.StatusCode == 200 && edit != nil {
			stores.Add(1)
			var m map[string]any
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err := json.Unmarshal(b, &m); err != nil {
				return err
			}
			out, _ := json.Marshal(edit(m))
			resp.Body = io.NopCloser(bytes.NewReader(out))
			resp.ContentLength = int64(len(out))
			resp.Header.Set("Content-Length", fmt.Sprint(len(out)))
		}
		if resp.Request.Method == http.MethodGet && editRead != nil {
			editRead(resp.Header)
		}
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL, &stores
}

func patches(m map[string]any) []any { return m["storedQuiltBlobs"].([]any) }
func patch(m map[string]any, i int) map[string]any {
	return patches(m)[i].(map[string]any)
}

// TestQuiltHostileAnswers: answers that would point a snapshot at bytes
// that are not its own are refused, once (not retried), with ErrProtocol.
func TestQuiltHostileAnswers(t *testing.T) {
	s := startServer(t, localwalrus.Config{})
	honest := newClient(t, s, walrus.Config{})
	other, err := honest.StoreQuilt(t.Context(), []walrus.QuiltPart{{Identifier: "other", Body: walrus.BytesBody([]byte("someone else"))}})
	if err != nil {
		t.Fatal(err)
	}
	foreign := other.Patches[0].PatchID
	for i, tc := range []struct {
		name string
		edit func(m map[string]any) any
	}{
		{"a patch id of another quilt", func(m map[string]any) any { patch(m, 0)["quiltPatchId"] = foreign; return m }},
		{"a patch id not of the quilt's prefix", func(m map[string]any) any {
			raw, _ := base64.RawURLEncoding.DecodeString(patch(m, 0)["quiltPatchId"].(string))
			raw[0] ^= 1
			patch(m, 0)["quiltPatchId"] = base64.RawURLEncoding.EncodeToString(raw)
			return m
		}},
		{"an identifier not sent", func(m map[string]any) any { patch(m, 0)["identifier"] = "p999"; return m }},
		{"a patch missing", func(m map[string]any) any { m["storedQuiltBlobs"] = patches(m)[:1]; return m }},
		{"an extra patch", func(m map[string]any) any {
			m["storedQuiltBlobs"] = append(patches(m), map[string]any{"identifier": "p002", "quiltPatchId": patch(m, 0)["quiltPatchId"]})
			return m
		}},
		{"one identifier twice", func(m map[string]any) any { patch(m, 1)["identifier"] = patch(m, 0)["identifier"]; return m }},
		{"one patch id twice", func(m map[string]any) any { patch(m, 1)["quiltPatchId"] = patch(m, 0)["quiltPatchId"]; return m }},
		{"a blob id for a patch id", func(m map[string]any) any { patch(m, 0)["quiltPatchId"] = other.BlobID; return m }},
		{"no storedQuiltBlobs", func(m map[string]any) any { delete(m, "storedQuiltBlobs"); return m }},
		{"a quilt smaller than its patches", func(m map[string]any) any {
			m["blobStoreResult"].(map[string]any)["newlyCreated"].(map[string]any)["blobObject"].(map[string]any)["size"] = 10
			return m
		}},
		{"an oversized answer", func(m map[string]any) any { m["padding"] = strings.Repeat("x", 1<<20); return m }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, stores := hostilePublisher(t, s, tc.edit, nil)
			c := newClient(t, s, walrus.Config{Publishers: []string{u}, Aggregators: []string{s.URL()}})
			// Other bytes each time: a new quilt, never one already certified.
			_, err := c.StoreQuilt(t.Context(), quiltParts(100+int64(i), 200))
			if !errors.Is(err, walrus.ErrProtocol) {
				t.Fatalf("err = %v, want ErrProtocol", err)
			}
			if n := stores.Load(); n != 1 || walrus.Attempts(err) != 1 {
				t.Errorf("%d stores, %d attempts: a hostile answer is not retried", n, walrus.Attempts(err))
			}
		})
	}
	// Patch reads: a wrong ETag, a wrong identifier, a body of another size.
	res, err := honest.StoreQuilt(t.Context(), quiltParts(300, 400))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(http.Header)
		opts []walrus.ReadOption
		want error
	}{
		{"ETag of another quilt's patch", func(h http.Header) { h.Set("ETag", foreign) }, nil, walrus.ErrProtocol},
		{"ETag of another quilt", func(h http.Header) { h.Set("ETag", other.BlobID) }, nil, walrus.ErrProtocol},
		{"ETag of another patch of the quilt", func(h http.Header) { h.Set("ETag", res.Patches[1].PatchID) }, nil, walrus.ErrProtocol},
		{"ETag the patch id, quoted", func(h http.Header) { h.Set("ETag", `"`+res.Patches[0].PatchID+`"`) }, nil, nil},
		{"ETag the quilt id, quoted", func(h http.Header) { h.Set("ETag", `"`+res.BlobID+`"`) }, nil, nil},
		{"another identifier", func(h http.Header) { h.Set("X-Quilt-Patch-Identifier", "p001") },
			[]walrus.ReadOption{walrus.WithIdentifier("p000")}, walrus.ErrProtocol},
		{"more than expected", nil, []walrus.ReadOption{walrus.WithExpectedSize(299)}, walrus.ErrBodyTooLarge},
	} {
		u, _ := hostilePublisher(t, s, nil, tc.edit)
		c := newClient(t, s, walrus.Config{Aggregators: []string{u}})
		if _, err := c.ReadPatch(t.Context(), res.Patches[0].PatchID, io.Discard, tc.opts...); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// By identifier: the answer must name it, and be of the quilt asked.
	for _, tc := range []struct {
		name string
		edit func(http.Header)
		want error
	}{
		{"as named", nil, nil},
		{"ETag a patch of the quilt", func(h http.Header) { h.Set("ETag", res.Patches[1].PatchID) }, nil},
		{"ETag a patch of another quilt", func(h http.Header) { h.Set("ETag", foreign) }, walrus.ErrProtocol},
		{"another identifier", func(h http.Header) { h.Set("X-Quilt-Patch-Identifier", "p001") }, walrus.ErrProtocol},
		{"no identifier", func(h http.Header) { h.Del("X-Quilt-Patch-Identifier") }, walrus.ErrProtocol},
	} {
		u, _ := hostilePublisher(t, s, nil, tc.edit)
		c := newClient(t, s, walrus.Config{Aggregators: []string{u}})
		if _, err := c.ReadPatchByIdentifier(t.Context(), res.BlobID, "p000", io.Discard); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("by identifier, %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	u, _ := hostilePublisher(t, s, nil, nil)
	c := newClient(t, s, walrus.Config{Aggregators: []string{u}})
	if _, err := c.ListPatches(t.Context(), other.BlobID); err != nil {
		t.Errorf("an honest list: %v", err)
	}
}

// TestQuiltPartLengths: a part that yields other than its size fails the
// attempt instead of sending a body that lies about its parts.
func TestQuiltPartLengths(t *testing.T) {
	s := startServer(t, localwalrus.Config{})
	c := newClient(t, s, walrus.Config{RetryMax: -1})
	short := walrus.QuiltPart{Identifier: "short", Body: lyingBody{data: []byte("abc"), size: 5}}
	if _, err := c.StoreQuilt(t.Context(), []walrus.QuiltPart{short}); err == nil || !strings.Contains(err.Error(), "short") {
		t.Errorf("a short part: %v", err)
	}
	long := walrus.QuiltPart{Identifier: "long", Body: lyingBody{data: []byte("abcdefg"), size: 5}}
	if _, err := c.StoreQuilt(t.Context(), []walrus.QuiltPart{long}); err == nil || !strings.Contains(err.Error(), "longer") {
		t.Errorf("a long part: %v", err)
	}
}

type lyingBody struct {
	data []byte
	size int64
}

func (b lyingBody) Size() int64                  { return b.size }
func (b lyingBody) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.data)), nil }
