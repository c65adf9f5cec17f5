package localwalrus

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/redstuff"
	"github.com/hermesd/hermesd/internal/walruscost"
)

type quiltPart struct {
	name string
	data []byte
}

// quiltBody encodes parts (and, when meta is not empty, a _metadata part)
// as a multipart/form-data body.
func quiltBody(t testing.TB, parts []quiltPart, meta string) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		w, err := mw.CreateFormFile(p.name, p.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(p.data)
	}
	if meta != "" {
		w, err := mw.CreateFormField("_metadata")
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, meta)
	}
	mw.Close()
	return b.Bytes(), mw.FormDataContentType()
}

func putQuiltReq(t *testing.T, s *Server, query string, parts []quiltPart, meta string) response {
	t.Helper()
	body, ct := quiltBody(t, parts, meta)
	return do(t, http.MethodPut, s.URL()+"/v1/quilts?"+query, body, "Content-Type", ct)
}

type quiltAnswer struct {
	BlobStoreResult  json.RawMessage `json:"blobStoreResult"`
	StoredQuiltBlobs []struct {
		Identifier   string `json:"identifier"`
		QuiltPatchID string `json:"quiltPatchId"`
	} `json:"storedQuiltBlobs"`
}

func decodeQuilt(t *testing.T, r response) (storeResult, quiltAnswer) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("quilt store: status %d: %s", r.status, r.body)
	}
	var qa quiltAnswer
	if err := json.Unmarshal(r.body, &qa); err != nil {
		t.Fatalf("quilt answer %s: %v", r.body, err)
	}
	sr := decodeStore(t, response{status: http.StatusOK, body: qa.BlobStoreResult})
	return sr, qa
}

func TestQuiltStoreAndRead(t *testing.T) {
	s := start(t, Config{})
	parts := []quiltPart{
		{"zeta", bytes.Repeat([]byte("z"), 5000)},
		{"alpha", []byte("first patch")},
		{"Émile-2", nil},
	}
	sr, qa := decodeQuilt(t, putQuiltReq(t, s, "epochs=3", parts, `[{"identifier":"alpha","tags":{"x-kind":"memo","content-disposition":"inline","bad header":"v"}}]`))
	nc := sr.NewlyCreated
	if nc == nil {
		t.Fatal("want newlyCreated")
	}
	quiltID := nc.BlobObject.BlobID
	if nc.BlobObject.Size%(quiltRows*quiltColumns*2) != 0 {
		t.Errorf("quilt blob of %d bytes is not a whole matrix", nc.BlobObject.Size)
	}
	if nc.BlobObject.Storage.EndEpoch != s.Epoch()+3 {
		t.Errorf("end epoch %d", nc.BlobObject.Storage.EndEpoch)
	}
	// Sorted by identifier (byte order: "alpha" < "zeta" < "Émile-2").
	var got []string
	for _, p := range qa.StoredQuiltBlobs {
		got = append(got, p.Identifier)
		if len(p.QuiltPatchID) != 50 {
			t.Errorf("patch id %q has %d characters, want 50", p.QuiltPatchID, len(p.QuiltPatchID))
		}
		raw, err := base64.RawURLEncoding.DecodeString(p.QuiltPatchID)
		if err != nil || base64.RawURLEncoding.EncodeToString(raw[:32]) != quiltID || raw[32] != 1 {
			t.Errorf("patch id %q does not start with quilt %s and version 1", p.QuiltPatchID, quiltID)
		}
	}
	if strings.Join(got, ",") != "alpha,zeta,Émile-2" {
		t.Errorf("stored patches %v", got)
	}
	want := map[string][]byte{}
	for _, p := range parts {
		want[p.name] = p.data
	}
	for _, p := range qa.StoredQuiltBlobs {
		for _, u := range []string{
			s.URL() + "/v1/blobs/by-quilt-patch-id/" + p.QuiltPatchID,
			s.URL() + "/v1/blobs/by-quilt-id/" + quiltID + "/" + url.PathEscape(p.Identifier),
		} {
			// A Range is ignored: patches are read whole.
			r := do(t, http.MethodGet, u, nil, "Range", "bytes=0-0")
			if r.status != http.StatusOK || !bytes.Equal(r.body, want[p.Identifier]) {
				t.Errorf("GET %s: status %d, %d bytes, want %d", u, r.status, len(r.body), len(want[p.Identifier]))
			}
			// The ETag is the quilt's id, as the aggregator sends it.
			if r.header.Get("X-Quilt-Patch-Identifier") != p.Identifier || r.header.Get("ETag") != quiltID {
				t.Errorf("GET %s: headers %v", u, r.header)
			}
			// Tags become headers where the aggregator's default allows:
			// content-disposition does, x-kind does not.
			if p.Identifier == "alpha" && (r.header.Get("Content-Disposition") != "inline" || r.header.Get("X-Kind") != "") {
				t.Errorf("tag headers: %v", r.header)
			}
		}
	}
	// The list.
	r := do(t, http.MethodGet, s.URL()+"/v1/quilts/"+quiltID+"/patches", nil)
	var list []quiltPatchJSON
	if err := json.Unmarshal(r.body, &list); err != nil || len(list) != 3 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	for i, p := range list {
		if p.Identifier != qa.StoredQuiltBlobs[i].Identifier || p.PatchID != qa.StoredQuiltBlobs[i].QuiltPatchID {
			t.Errorf("list entry %d: %+v", i, p)
		}
	}
	if list[0].Tags["x-kind"] != "memo" {
		t.Errorf("list tags %v", list[0].Tags)
	}
	// The quilt is a blob like any other, ranges included.
	whole := do(t, http.MethodGet, s.URL()+"/v1/blobs/"+quiltID, nil)
	if int64(len(whole.body)) != nc.BlobObject.Size {
		t.Fatalf("quilt blob: %d bytes, %d stored", len(whole.body), nc.BlobObject.Size)
	}
	q, err := redstuff.ReadQuilt(bytes.NewReader(whole.body), int64(len(whole.body)), walruscost.DefaultShards)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range q.Patches {
		rd, err := q.OpenPatch(bytes.NewReader(whole.body), i)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(rd); !bytes.Equal(b, want[p.Identifier]) {
			t.Errorf("patch %s does not read back from the quilt blob", p.Identifier)
		}
	}
	// The quilt id is Walrus's id of the quilt blob.
	if id, err := redstuff.Sum(whole.body, walruscost.DefaultShards); err != nil || id.String() != quiltID {
		t.Errorf("quilt id %s, its bytes' id %s (%v)", quiltID, id, err)
	}
}

func TestQuiltDedupAndExpiry(t *testing.T) {
	s := start(t, Config{})
	parts := []quiltPart{{"a", []byte("one")}, {"b", []byte("two")}}
	sr1, qa1 := decodeQuilt(t, putQuiltReq(t, s, "epochs=2&permanent=true", parts, ""))
	sr2, qa2 := decodeQuilt(t, putQuiltReq(t, s, "epochs=1&permanent=true", []quiltPart{parts[1], parts[0]}, ""))
	if sr1.NewlyCreated == nil || sr2.AlreadyCertified == nil || sr2.AlreadyCertified.BlobID != sr1.NewlyCreated.BlobObject.BlobID {
		t.Fatalf("the same patches are the same quilt: %+v then %+v", sr1, sr2)
	}
	for i := range qa1.StoredQuiltBlobs {
		if qa1.StoredQuiltBlobs[i] != qa2.StoredQuiltBlobs[i] {
			t.Errorf("patch %d: %+v then %+v", i, qa1.StoredQuiltBlobs[i], qa2.StoredQuiltBlobs[i])
		}
	}
	id := qa1.StoredQuiltBlobs[0].QuiltPatchID
	if r := do(t, http.MethodGet, s.URL()+"/v1/blobs/by-quilt-patch-id/"+id, nil); r.status != http.StatusOK {
		t.Fatalf("read: %d", r.status)
	}
	if err := s.AdvanceEpochs(2); err != nil {
		t.Fatal(err)
	}
	r := do(t, http.MethodGet, s.URL()+"/v1/blobs/by-quilt-patch-id/"+id, nil)
	if _, _, reason := apiErrorReason(t, r.body); r.status != http.StatusNotFound || reason != "BLOB_NOT_FOUND" {
		t.Errorf("expired quilt: %d %s", r.status, r.body)
	}
}

func TestQuiltNotFound(t *testing.T) {
	s := start(t, Config{})
	_, qa := decodeQuilt(t, putQuiltReq(t, s, "", []quiltPart{{"a", []byte("one")}}, ""))
	raw, _ := base64.RawURLEncoding.DecodeString(qa.StoredQuiltBlobs[0].QuiltPatchID)
	var quilt [32]byte
	copy(quilt[:], raw)
	blob := decodeStore(t, put(t, s, "", []byte("a plain blob"))).NewlyCreated.BlobObject.BlobID
	plain, _ := decodeBlobID(blob)
	for _, tc := range []struct {
		name, path    string
		status        int
		reason        string
		identifierHdr string
	}{
		{"other columns", "/v1/blobs/by-quilt-patch-id/" + encodePatchID(quilt, 1, 3), 404, "QUILT_PATCH_NOT_FOUND", ""},
		{"no such quilt", "/v1/blobs/by-quilt-patch-id/" + encodePatchID([32]byte{9}, 1, 2), 404, "BLOB_NOT_FOUND", ""},
		{"a blob that is no quilt", "/v1/blobs/by-quilt-patch-id/" + encodePatchID(plain, 1, 2), 404, "QUILT_PATCH_NOT_FOUND", ""},
		{"no such identifier", "/v1/blobs/by-quilt-id/" + encodeBlobID(quilt) + "/b", 404, "QUILT_PATCH_NOT_FOUND", ""},
		{"malformed patch id", "/v1/blobs/by-quilt-patch-id/" + encodeBlobID(quilt) + "AQEA", 400, "", ""},
		{"a blob id as patch id", "/v1/blobs/by-quilt-patch-id/" + blob, 400, "", ""},
		{"list of a plain blob", "/v1/quilts/" + blob + "/patches", 404, "QUILT_PATCH_NOT_FOUND", ""},
	} {
		r := do(t, http.MethodGet, s.URL()+tc.path, nil)
		if r.status != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.name, r.status, tc.status, r.body)
			continue
		}
		if tc.reason != "" {
			if _, _, reason := apiErrorReason(t, r.body); reason != tc.reason {
				t.Errorf("%s: reason %q, want %q", tc.name, reason, tc.reason)
			}
		}
	}
}

func TestQuiltRefusals(t *testing.T) {
	s := start(t, Config{MaxQuiltBodySize: 256 << 10})
	many := make([]quiltPart, MaxQuiltPatches+1)
	for i := range many {
		many[i] = quiltPart{fmt.Sprintf("p%03d", i), []byte{byte(i)}}
	}
	ok := []quiltPart{{"a", []byte("x")}}
	for _, tc := range []struct {
		name   string
		parts  []quiltPart
		meta   string
		status int
	}{
		{"underscore", []quiltPart{{"_a", nil}}, "", 400},
		{"not alphanumeric", []quiltPart{{"-a", nil}}, "", 400},
		{"not UTF-8", []quiltPart{{"a\xff", nil}}, "", 400},
		{"duplicate", []quiltPart{{"a", nil}, {"a", nil}}, "", 400},
		{"identifier too long", []quiltPart{{"a" + strings.Repeat("b", MaxIdentifierLen), nil}}, "", 400},
		{"no blob", nil, `[]`, 400},
		{"metadata of no part", ok, `[{"identifier":"b","tags":{}}]`, 400},
		{"metadata twice for one part", ok, `[{"identifier":"a","tags":{}},{"identifier":"a","tags":{}}]`, 400},
		{"metadata not JSON", ok, `{`, 400},
		{"tags too large", ok, `[{"identifier":"a","tags":{"k":"` + strings.Repeat("v", MaxQuiltTags) + `"}}]`, 400},
		{"667 blobs", many, "", 400},
		{"body too large", []quiltPart{{"a", make([]byte, 257<<10)}}, "", 413},
		{"ok", ok, `[{"identifier":"a","tags":{"k":"v"}}]`, 200},
	} {
		r := putQuiltReq(t, s, "", tc.parts, tc.meta)
		if r.status != tc.status {
			t.Errorf("%s: status %d, want %d: %.200s", tc.name, r.status, tc.status, r.body)
		}
	}
	// Not multipart at all.
	if r := do(t, http.MethodPut, s.URL()+"/v1/quilts", []byte("x"), "Content-Type", "application/octet-stream"); r.status != 400 {
		t.Errorf("octet-stream body: %d", r.status)
	}
	if r := putQuiltReq(t, s, "epochs=0", ok, ""); r.status != 400 {
		t.Errorf("epochs=0: %d", r.status)
	}
	// A server fault on the publisher route hits quilts too.
	s.InjectNext(RoutePublisher, Fault{Kind: FaultStatus, Status: 503})
	if r := putQuiltReq(t, s, "", ok, ""); r.status != 503 {
		t.Errorf("injected 503: %d", r.status)
	}
}

func TestQuiltLayout(t *testing.T) {
	layout := func(blobs []redstuff.QuiltBlob) *redstuff.Quilt {
		t.Helper()
		q, err := redstuff.LayoutQuilt(walruscost.DefaultShards, blobs)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	// 600 patches of 10 KiB: each needs a column of at least 10,253
	// bytes (a 13-byte header and identifier), so symbols of 32 bytes
	// (even, ≥ 10,253/334); the quilt is 222,778 × 32 bytes, its index
	// (4,807 bytes) one column.
	var blobs []redstuff.QuiltBlob
	for i := range 600 {
		blobs = append(blobs, redstuff.QuiltBlob{Identifier: fmt.Sprintf("p%03d", i), Size: 10 << 10})
	}
	if q := layout(blobs); q.Params.Size != 222_778*32 || q.IndexColumns != 1 || len(q.Index) != 4807 {
		t.Errorf("600 × 10 KiB: %d bytes, %d index bytes in %d columns", q.Params.Size, len(q.Index), q.IndexColumns)
	}
	// One tiny patch: the smallest quilt.
	if q := layout([]redstuff.QuiltBlob{{Identifier: "a", Size: 17}}); q.Params.Size != 222_778*2 {
		t.Errorf("one tiny patch: %d bytes", q.Params.Size)
	}
	// One large patch among 600 tiny ones widens every column.
	for i := range blobs {
		blobs[i].Size = 100
	}
	blobs = append(blobs, redstuff.QuiltBlob{Identifier: "z", Size: 1 << 20})
	q := layout(blobs)
	if q.Params.Size < 8*(600*100+1<<20) {
		t.Errorf("mixed sizes: %d bytes; want the padding to show", q.Params.Size)
	}
	if used := q.Patches[len(q.Patches)-1].End; used > quiltColumns {
		t.Errorf("%d columns used", used)
	}
}

func TestQuiltTooMuchPadding(t *testing.T) {
	s := start(t, Config{MaxQuiltSize: 2 << 20})
	parts := []quiltPart{{"big", make([]byte, 32<<10)}}
	for i := range 660 {
		parts = append(parts, quiltPart{fmt.Sprintf("p%03d", i), []byte{1}})
	}
	if r := putQuiltReq(t, s, "", parts, ""); r.status != 400 || !strings.Contains(string(r.body), "laid out") {
		t.Errorf("a quilt over MaxQuiltSize: %d %s", r.status, r.body)
	}
	// Nothing is left behind.
	ents, _ := os.ReadDir(s.store.tmp)
	if len(ents) != 0 {
		t.Errorf("tmp holds %d files", len(ents))
	}
}

// FuzzQuiltBody stores hostile multipart bodies: whatever is accepted
// lays out into a quilt whose index parses back to the same patches.
func FuzzQuiltBody(f *testing.F) {
	seed := func(parts []quiltPart, meta string) {
		b, ct := quiltBody(f, parts, meta)
		_, params, _ := strings.Cut(ct, "boundary=")
		f.Add(b, params)
	}
	seed([]quiltPart{{"a", []byte("x")}, {"b", nil}}, `[{"identifier":"a","tags":{"k":"v"}}]`)
	seed([]quiltPart{{"_a", []byte("x")}}, "")
	seed([]quiltPart{{"a", []byte("x")}, {"a", []byte("y")}}, `[`)
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nxyz\r\n--b--\r\n"), "b")
	f.Fuzz(func(t *testing.T, body []byte, boundary string) {
		if boundary == "" {
			return
		}
		var sp bytes.Buffer
		ps, meta, _, err := readQuiltParts(multipart.NewReader(bytes.NewReader(body), boundary), &sp)
		if err != nil {
			return
		}
		if err := applyQuiltMetadata(ps, meta); err != nil {
			return
		}
		blobs := make([]redstuff.QuiltBlob, len(ps))
		for i, p := range ps {
			blobs[i] = redstuff.QuiltBlob{Identifier: p.identifier, Tags: p.tags, Size: p.size}
		}
		const shards = 10 // a small matrix: fuzzed bodies are small
		l, err := redstuff.LayoutQuilt(shards, blobs)
		if err != nil {
			return // refused with 400, as the publisher does
		}
		spool := bytes.NewReader(sp.Bytes())
		quilt := make(memFile, l.Params.Size)
		if err := l.Write(quilt, func(i int) (io.Reader, error) { return io.NewSectionReader(spool, ps[i].off, ps[i].size), nil }); err != nil {
			t.Fatal(err)
		}
		back, err := redstuff.ReadQuilt(bytes.NewReader(quilt), int64(len(quilt)), shards)
		if err != nil {
			t.Fatalf("the quilt written does not parse: %v", err)
		}
		if len(back.Patches) != len(ps) {
			t.Fatalf("%d patches back, %d stored", len(back.Patches), len(ps))
		}
		for i, p := range back.Patches {
			in := ps[l.Patches[i].Blob]
			if p.Identifier != in.identifier || p.Start != l.Patches[i].Start || p.End != l.Patches[i].End {
				t.Fatalf("patch %d: %+v back, %+v stored", i, p, l.Patches[i])
			}
			rd, err := back.OpenPatch(bytes.NewReader(quilt), i)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(rd)
			want := make([]byte, in.size)
			spool.ReadAt(want, in.off)
			if !bytes.Equal(got, want) {
				t.Fatalf("patch %d's bytes differ", i)
			}
		}
	})
}

// memFile is a file in memory.
type memFile []byte

func (m memFile) WriteAt(p []byte, off int64) (int, error) { return copy(m[off:], p), nil }

// TestLocate: a blob's and a patch's bytes are where Locate says.
func TestLocate(t *testing.T) {
	s := start(t, Config{})
	_, qa := decodeQuilt(t, putQuiltReq(t, s, "", []quiltPart{{"a", []byte("first")}, {"b", []byte("second patch")}}, ""))
	blob := decodeStore(t, put(t, s, "", []byte("a plain blob"))).NewlyCreated.BlobObject.BlobID
	long := bytes.Repeat([]byte("a patch over many symbols "), 100)
	_, qb := decodeQuilt(t, putQuiltReq(t, s, "", []quiltPart{{"long", long}, {"short", []byte("x")}}, ""))
	for id, want := range map[string]string{qa.StoredQuiltBlobs[1].QuiltPatchID: "second patch", blob: "a plain blob",
		qb.StoredQuiltBlobs[0].QuiltPatchID: string(long)} {
		got, err := s.ReadStored(id)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("ReadStored(%s) = %q", id, got)
		}
		// Damage the middle byte: the patch (or blob) reads back changed
		// there, and only there.
		if err := s.FlipStoredByte(id, 0x01); err != nil {
			t.Fatal(err)
		}
		r := do(t, http.MethodGet, s.URL()+"/v1/blobs/"+map[bool]string{true: "by-quilt-patch-id/", false: ""}[len(id) > 43]+id, nil)
		w := []byte(want)
		w[len(w)/2] ^= 0x01
		if r.status != 200 || !bytes.Equal(r.body, w) {
			t.Errorf("%s after FlipStoredByte: %d %q", id, r.status, r.body)
		}
	}
	if _, _, err := s.Locate("nonsense"); err == nil {
		t.Error("Locate of nonsense")
	}
}

// TestQuiltStoreCost: a quilt is charged as the one blob it is stored as,
// by the same formula and price as a blob: the documented quilt example,
// a quilt blob of 1,782,224 bytes, encodes to 72,040,000 bytes (69 units).
func TestQuiltStoreCost(t *testing.T) {
	s := start(t, Config{})
	// 300 patches of 4,500 bytes take two columns each at symbols of 8
	// bytes (2,672-byte columns) but three at 6: the quilt is 667 × 334 ×
	// 8 bytes.
	var parts []quiltPart
	for i := range 300 {
		parts = append(parts, quiltPart{fmt.Sprintf("p%03d", i), bytes.Repeat([]byte{byte(i)}, 4500)})
	}
	r := putQuiltReq(t, s, "epochs=5", parts, "")
	sr, qa := decodeQuilt(t, r)
	if sr.NewlyCreated == nil || len(qa.StoredQuiltBlobs) != 300 {
		t.Fatalf("quilt store: %s", r.body)
	}
	if size := sr.NewlyCreated.BlobObject.Size; size != 1_782_224 {
		t.Fatalf("the quilt blob is %d bytes, want the documented example's 1,782,224", size)
	}
	var qc struct {
		BlobStoreResult costOf `json:"blobStoreResult"`
	}
	if err := json.Unmarshal(r.body, &qc); err != nil {
		t.Fatal(err)
	}
	nc := qc.BlobStoreResult.NewlyCreated
	if nc == nil || nc.Cost == nil || nc.ResourceOperation.RegisterFromScratch == nil {
		t.Fatalf("blobStoreResult lacks its cost or resource operation: %s", r.body)
	}
	rs := nc.ResourceOperation.RegisterFromScratch
	if nc.BlobObject.Storage.StorageSize != 72_040_000 || rs.EncodedLength != 72_040_000 || rs.EpochsAhead != 5 {
		t.Errorf("storageSize %d, encodedLength %d, epochsAhead %d; want 72,040,000, 72,040,000, 5",
			nc.BlobObject.Storage.StorageSize, rs.EncodedLength, rs.EpochsAhead)
	}
	if want := uint64(69 * (5*100_000 + 20_000)); *nc.Cost != want {
		t.Errorf("cost %d FROST, want %d", *nc.Cost, want)
	}
}

// TestShardsBoundTheQuilt: a quilt is stored as one blob, so the laid-out
// quilt is bounded by the largest blob the shards encode too.
func TestShardsBoundTheQuilt(t *testing.T) {
	s := start(t, Config{Shards: 4, MaxQuiltSize: 1 << 30})
	max, _ := walruscost.MaxBlobSize(4)
	if s.cfg.MaxQuiltSize != int64(max) {
		t.Errorf("MaxQuiltSize %d at 4 shards, want %d", s.cfg.MaxQuiltSize, max)
	}
	// The layout is QuiltV1 over the server's shards: a 2×3 matrix, at
	// most two patches.
	sr, qa := decodeQuilt(t, putQuiltReq(t, s, "epochs=1", []quiltPart{{"a", []byte("x")}, {"b", []byte("yz")}}, ""))
	if sr.NewlyCreated == nil || sr.NewlyCreated.BlobObject.Size%6 != 0 || len(qa.StoredQuiltBlobs) != 2 {
		t.Errorf("a quilt over 4 shards: %+v %+v", sr, qa)
	}
	if r := putQuiltReq(t, s, "epochs=1", []quiltPart{{"a", nil}, {"b", nil}, {"c", nil}}, ""); r.status != http.StatusBadRequest {
		t.Errorf("three patches over 4 shards: %d %s", r.status, r.body)
	}
	// A patch whose column would need symbols over 16 bits.
	if r := putQuiltReq(t, s, "epochs=1", []quiltPart{{"a", make([]byte, 300_000)}}, ""); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "symbols") {
		t.Errorf("a quilt 4 shards cannot encode: %d %s", r.status, r.body)
	}
}
