package walrustest

import (
	"bytes"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/walrus"
)

// TestFixtures: every fixture parses, every case names one, every one is
// used and has its source in testdata/README.md.
func TestFixtures(t *testing.T) {
	readme, err := os.ReadFile("testdata/README.md")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{"store-newly-created.http": true, "quilt-newly-created.http": true, "quilt-newly-created-range.http": true} // setups
	names := map[string]bool{}
	for _, c := range Cases() {
		if names[c.Name] {
			t.Errorf("two cases named %q", c.Name)
		}
		names[c.Name] = true
		if c.ServerOnly && c.ClientOnly {
			t.Errorf("%s: both server-only and client-only", c.Name)
		}
		if _, err := LoadAnswer(c.Fixture); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		used[c.Fixture] = true
	}
	files, err := fs.Glob(fixtures, "testdata/*.http")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimPrefix(f, "testdata/")
		a, err := LoadAnswer(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if a.JSON() {
			var v any
			if err := decodeJSON(a.Body, &v); err != nil {
				t.Errorf("%s: body: %v", name, err)
			}
		}
		if !used[name] {
			t.Errorf("%s: no case uses it", name)
		}
		if !bytes.Contains(readme, []byte("`"+name+"`")) {
			t.Errorf("%s: testdata/README.md does not name its source", name)
		}
	}
}

// TestAnswerFormat: the fixture format, and what it refuses.
func TestAnswerFormat(t *testing.T) {
	a, err := parseAnswer([]byte("HTTP/1.1 206 Partial Content\nContent-Range: bytes 2-9/17\nETag: \"x\"\n\nme other\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != 206 || a.Header.Get("Content-Range") != "bytes 2-9/17" || a.Header.Get("Etag") != `"x"` || string(a.Body) != "me other" {
		t.Errorf("%+v", a)
	}
	for _, bad := range []string{"", "HTTP/2 200 OK\n\n", "HTTP/1.1 abc\n\n", "HTTP/1.1 200 OK\nX: y\n"} {
		if _, err := parseAnswer([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestBinder: ids of the docs stand for the server's; a patch id must be
// of the quilt its documented one is of.
func TestBinder(t *testing.T) {
	ids := binder{}
	live, other := randomBlobID(), randomBlobID()
	if err := ids.match(docsQuiltID, live); err != nil {
		t.Fatal(err)
	}
	if err := ids.match(docsQuiltID, other); err == nil {
		t.Error("a second id for the same quilt")
	}
	raw, _ := idEncoding.DecodeString(live)
	patch := idEncoding.EncodeToString(append(raw, 1, 1, 0, 2, 0))
	if err := ids.match(docsPatchA, patch); err != nil {
		t.Error(err)
	}
	if err := ids.match(docsPatchW, patch); err == nil {
		t.Error("one patch id for two patches")
	}
	raw2, _ := idEncoding.DecodeString(other)
	if err := ids.match(docsPatchW, idEncoding.EncodeToString(append(raw2, 1, 2, 0, 3, 0))); err == nil {
		t.Error("a patch id of another quilt")
	}
	for _, bad := range []string{"short", strings.Repeat("A", 44), live + "=", "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BU+"} {
		if err := (binder{}).match(docsBlobID, bad); err == nil {
			t.Errorf("%q taken for a blob id", bad)
		}
	}
}

// deviant is a localwalrus whose answers to requests that match get
// edited: a server that deviates from the service in one way.
type deviant struct {
	s     *localwalrus.Server
	match func(r *http.Request) bool
	edit  edit
}

// edit changes an answer to r: its status, headers and body.
type edit func(r *http.Request, status *int, h http.Header, body []byte) []byte

func (d deviant) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !d.match(r) {
		d.s.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	d.s.ServeHTTP(rec, r)
	status, h := rec.Code, rec.Header().Clone()
	body := d.edit(r, &status, h, rec.Body.Bytes())
	h.Set("Content-Length", strconv.Itoa(len(body)))
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	w.Write(body)
}

func route(method, prefix string) func(r *http.Request) bool {
	return func(r *http.Request) bool { return r.Method == method && strings.HasPrefix(r.URL.Path, prefix) }
}

func replace(old, new string) edit {
	return func(_ *http.Request, _ *int, _ http.Header, b []byte) []byte {
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
}

// header edits the answer's headers only.
func header(f func(r *http.Request, h http.Header)) edit {
	return func(r *http.Request, _ *int, h http.Header, b []byte) []byte { f(r, h); return b }
}

// TestServerSuiteCatchesDeviations: the suite fails a server that answers
// other than the service in any one of these ways (several are what
// localwalrus answered before the suite).
func TestServerSuiteCatchesDeviations(t *testing.T) {
	cases := map[string]Case{}
	for _, c := range Cases() {
		cases[c.Name] = c
	}
	for _, tc := range []struct {
		name, kase string
		match      func(r *http.Request) bool
		edit       edit
	}{
		{"OpenAPI spelling", "store/newly created", route("PUT", "/v1/blobs"), replace(`"blobObject"`, `"blob_object"`)},
		{"a field too many", "store/newly created", route("PUT", "/v1/blobs"), replace(`"cost"`, `"fee":1,"cost"`)},
		{"a size other than sent", "store/newly created", route("PUT", "/v1/blobs"), replace(`"size":17`, `"size":18`)},
		{"epochs other than asked", "store/newly created", route("PUT", "/v1/blobs"), replace(`"epochsAhead":1`, `"epochsAhead":2`)},
		{"permanent when deletable", "store/newly created", route("PUT", "/v1/blobs"), replace(`"deletable":true`, `"deletable":false`)},
		{"deletable when permanent", "store/already certified", route("PUT", "/v1/blobs"), replace(`"deletable":false`, `"deletable":true`)},
		{"another id when already certified", "store/already certified", route("PUT", "/v1/blobs"),
			func(_ *http.Request, _ *int, _ http.Header, b []byte) []byte {
				if !bytes.Contains(b, []byte("alreadyCertified")) {
					return b
				}
				var v any
				decodeJSON(b, &v)
				return bytes.Replace(b, []byte(str(v, "alreadyCertified", "blobId")), []byte(randomBlobID()), 1)
			}},
		{"the event where an object is due", "store/already certified, owned object", route("PUT", "/v1/blobs"),
			replace(`"object":"0x`, `"event":{"txDigest":"4XQHFa9S324wTzYHF3vsBSwpUZuLpmwTHYMFv9nsttSs","eventSeq":"0"},"x":"0x`)},
		{"500 without an ErrorInfo", "store/500", route("PUT", "/v1/blobs"), replace(`"reason":"INTERNAL_ERROR"`, `"reason":""`)},
		{"another 504 reason", "store/504", route("PUT", "/v1/blobs"), replace("INSUFFICIENT_CONFIRMATIONS", "TIMEOUT")},
		{"413 as JSON", "store/413", route("PUT", "/v1/blobs"), func(_ *http.Request, _ *int, h http.Header, b []byte) []byte {
			h.Set("Content-Type", "application/json")
			return []byte(`{"error":"too large"}`)
		}},
		{"patches of another quilt", "quilt/newly created", route("PUT", "/v1/quilts"), func(_ *http.Request, _ *int, _ http.Header, b []byte) []byte {
			var v any
			decodeJSON(b, &v)
			q := `"quiltPatchId":"` + str(v, "storedQuiltBlobs", 0, "quiltPatchId")[:40]
			return bytes.ReplaceAll(b, []byte(q), []byte(`"quiltPatchId":"`+randomBlobID()[:40]))
		}},
		{"patches unsorted", "quilt/newly created", route("PUT", "/v1/quilts"), replace(`"another_walrus.jpg"`, `"walrus.jpg"`)},
		{"Content-Type without Accept", "read/blob, no Accept", route("GET", "/v1/blobs/"), header(func(_ *http.Request, h http.Header) { h.Set("Content-Type", "application/octet-stream") })},
		{"a quoted ETag", "read/blob", route("GET", "/v1/blobs/"), header(func(_ *http.Request, h http.Header) { h.Set("ETag", "W/"+h.Get("ETag")) })},
		{"no caching headers", "read/blob", route("GET", "/v1/blobs/"), header(func(_ *http.Request, h http.Header) { h.Del("Cache-Control") })},
		{"another Content-Range", "read/range", route("GET", "/v1/blobs/"), header(func(_ *http.Request, h http.Header) { h.Set("Content-Range", "bytes 2-9/*") })},
		{"400 for a bad range", "read/416 open range", route("GET", "/v1/blobs/"), func(_ *http.Request, s *int, _ http.Header, b []byte) []byte {
			*s = http.StatusBadRequest
			return b
		}},
		{"the patch id as ETag", "patch/by patch id", route("GET", "/v1/blobs/by-quilt-patch-id/"), header(func(r *http.Request, h http.Header) {
			h.Set("ETag", strings.TrimPrefix(r.URL.Path, "/v1/blobs/by-quilt-patch-id/")) // localwalrus's ETag before
		})},
		{"other bytes", "patch/by quilt id and identifier", route("GET", "/v1/blobs/by-quilt-id/"), replace("raw", "RAW")},
		{"no identifier header", "patch/by quilt id and identifier", route("GET", "/v1/blobs/by-quilt-id/"), header(func(_ *http.Request, h http.Header) { h.Del("X-Quilt-Patch-Identifier") })},
		{"a list without tags", "list/patches", route("GET", "/v1/quilts/"), replace(`,"tags":{}`, ``)},
		{"the list's patch ids camelCase", "list/patches", route("GET", "/v1/quilts/"), replace(`"patch_id"`, `"patchId"`)},
		{"tags lost", "list/patches with tags", route("GET", "/v1/quilts/"), replace(`"png"`, `"jpg"`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := cases[tc.kase]
			if !ok {
				t.Fatalf("no case %q", tc.kase)
			}
			s, err := localwalrus.New(localwalrus.Config{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(deviant{s: s, match: tc.match, edit: tc.edit})
			defer hs.Close()
			srv := Server{URL: hs.URL, MaxBlobBody: localwalrus.DefaultMaxBodySize, MaxQuiltBody: localwalrus.DefaultMaxQuiltBodySize,
				Meet: func(cond Condition, publisher bool) {
					r := localwalrus.RouteAggregator
					if publisher {
						r = localwalrus.RoutePublisher
					}
					f := map[Condition]localwalrus.Fault{
						Internal:        {Kind: localwalrus.FaultStatus, Status: 500},
						NoConfirmations: {Kind: localwalrus.FaultStatus, Status: 504},
					}[cond]
					s.InjectNext(r, f)
				}}
			// The honest server passes the case; the deviant fails it.
			if err := c.CheckServer(t.Context(), srv); err == nil {
				t.Errorf("the suite passed a server that deviates: %s", tc.name)
			} else {
				t.Logf("caught: %v", err)
			}
		})
	}
}

// TestClientSuiteFailsWrongExpectations: the client half fails when the
// client's result, its error, its status, or its retries differ from the
// case's.
func TestClientSuiteFailsWrongExpectations(t *testing.T) {
	byName := map[string]Case{}
	for _, c := range Cases() {
		byName[c.Name] = c
	}
	for _, tc := range []struct {
		name, kase string
		edit       func(c *Case)
	}{
		{"another value", "store/newly created", func(c *Case) {
			v := c.Want.Value.(walrus.StoreResult)
			v.EndEpoch++
			c.Want.Value = v
		}},
		{"a value where the client fails", "store/marked invalid, as documented", func(c *Case) { c.Want = Want{Value: docsNewlyCreated} }},
		{"another error", "read/404", func(c *Case) { c.Want.Err = walrus.ErrTooLarge }},
		{"another status", "store/451", func(c *Case) { c.Want.Status = http.StatusForbidden }},
		{"another reason", "store/504", func(c *Case) { c.Want.Reason = "FORBIDDEN_BLOB" }},
		{"retries where the client stops", "read/404", func(c *Case) { c.Want.Retried = true }},
		{"no retries where the client retries", "store/500", func(c *Case) { c.Want.Retried = false }},
		{"another path", "patch/by quilt id and identifier", func(c *Case) {
			w := Docs
			w.Identifier = "another_walrus.jpg"
			c.World = &w
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := byName[tc.kase]
			if err := c.CheckClient(t.Context()); err != nil {
				t.Fatalf("the case itself fails: %v", err)
			}
			tc.edit(&c)
			if err := c.CheckClient(t.Context()); err == nil {
				t.Errorf("passed with a wrong expectation")
			}
		})
	}
}

// TestCasesCoverTheAPI: every operation and every status the brief of the
// suite names has a case on both sides.
func TestCasesCoverTheAPI(t *testing.T) {
	type side struct{ server, client bool }
	ops := map[Op]*side{}
	statuses := map[int]*side{}
	for _, c := range Cases() {
		a := mustAnswer(c.Fixture)
		if ops[c.Op] == nil {
			ops[c.Op] = &side{}
		}
		if statuses[a.Status] == nil {
			statuses[a.Status] = &side{}
		}
		ops[c.Op].server = ops[c.Op].server || !c.ClientOnly
		ops[c.Op].client = ops[c.Op].client || !c.ServerOnly
		statuses[a.Status].server = statuses[a.Status].server || !c.ClientOnly
		statuses[a.Status].client = statuses[a.Status].client || !c.ServerOnly
	}
	for _, op := range []Op{OpStore, OpStoreQuilt, OpRead, OpReadRange, OpReadPatch, OpReadByIdentifier, OpListPatches} {
		if s := ops[op]; s == nil || !s.server || !s.client {
			t.Errorf("%s: cases %+v", op, s)
		}
	}
	for _, code := range []int{200, 206, 400, 404, 413, 416, 429, 451, 500, 503, 504} {
		if s := statuses[code]; s == nil || !s.server || !s.client {
			t.Errorf("HTTP %d: cases %+v", code, s)
		}
	}
	conds := map[Condition]bool{}
	for _, c := range Cases() {
		conds[c.Meet] = true
	}
	for _, want := range []Condition{Blocked, Internal, NoConfirmations, Unavailable, Overloaded, MarkedInvalid, StoreFailed} {
		if !conds[want] {
			t.Errorf("no case meets %s", want)
		}
	}
	if !slices.ContainsFunc(Cases(), func(c Case) bool { return c.Fixture == "store-marked-invalid.http" }) {
		t.Error("no markedInvalid answer")
	}
}
