package walrustest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Server is a Walrus service under test: a publisher and an aggregator
// at one base URL, empty when the suite gets it.
type Server struct {
	URL string
	// MaxBlobBody and MaxQuiltBody are the publisher's body limits (of
	// PUT /v1/blobs and PUT /v1/quilts): the suite sends a byte more.
	MaxBlobBody, MaxQuiltBody int64
	// Meet makes the server's next answer on the publisher's routes
	// (publisher) or the aggregator's the one it gives under c.
	Meet func(c Condition, publisher bool)
	// HTTP is the client the suite asks with (nil: a plain one).
	HTTP *http.Client
}

// maxAnswer bounds what the suite reads of one answer.
const maxAnswer = 4 << 20

// RunServer runs every case a server answers (all but the client-only
// ones) against a fresh server from newServer: the server must answer
// each documented request as the real service does.
func RunServer(t *testing.T, newServer func(t *testing.T) Server) {
	for _, c := range Cases() {
		if c.ClientOnly {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			if err := c.CheckServer(t.Context(), newServer(t)); err != nil {
				t.Error(err)
			}
		})
	}
}

// CheckServer sends the case's request to srv (after whatever the
// request needs stored first) and compares the answer with the
// documented one: status, headers, body by shape, and what the request
// implies (sizes, epochs, ids that read back what was stored, the same
// id for the same bytes).
func (c Case) CheckServer(ctx context.Context, srv Server) error {
	if c.ClientOnly {
		return fmt.Errorf("case %q is the client's only", c.Name)
	}
	doc, err := LoadAnswer(c.Fixture)
	if err != nil {
		return err
	}
	x := &exchange{ctx: ctx, srv: srv, c: c, ids: binder{}, hc: srv.HTTP}
	if x.hc == nil {
		x.hc = &http.Client{}
	}
	got, err := x.run()
	if err != nil {
		return err
	}
	x.compare(doc, got)
	if len(x.diffs) > 0 {
		return fmt.Errorf("%s %s (documented in %s):\n\t%s", c.Op, c.Name, c.Fixture, strings.Join(x.diffs, "\n\t"))
	}
	return nil
}

// exchange is one case's run against a server.
type exchange struct {
	ctx   context.Context
	srv   Server
	c     Case
	ids   binder
	hc    *http.Client
	diffs []string

	sent      []byte // a blob store's body
	parts     []Part // a quilt store's patches
	epochs    int64
	lastStore any // the answer to the last store sent, decoded
	first     any // the answer to the first of two stores (Ask.Again)
}

func (x *exchange) fail(format string, args ...any) {
	x.diffs = append(x.diffs, fmt.Sprintf(format, args...))
}

// reply is an answer as received.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (x *exchange) do(method, path string, body io.Reader, header ...string) (reply, error) {
	req, err := http.NewRequestWithContext(x.ctx, method, strings.TrimRight(x.srv.URL, "/")+path, body)
	if err != nil {
		return reply{}, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := x.hc.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if len(b) > maxAnswer {
		return reply{}, fmt.Errorf("%s %s: an answer of more than %d bytes", method, path, maxAnswer)
	}
	return reply{resp.StatusCode, resp.Header, b}, nil
}

// setup stores what a case needs first (what a read reads, the first of
// two stores): the answer must be the documented one, and binds the docs'
// ids to the server's.
func (x *exchange) setup(fixture string, op Op, store func() (reply, error)) error {
	r, err := store()
	if err != nil {
		return err
	}
	if r.status != http.StatusOK {
		return fmt.Errorf("storing what %s needs first: HTTP %d: %.300s", x.c.Name, r.status, r.body)
	}
	if diffs := compareJSON(mustAnswer(fixture).Body, r.body, shape{optional: []string{"sharedBlobObject", "range"}}, x.ids); len(diffs) > 0 {
		return fmt.Errorf("storing what %s needs first: the answer is not the documented one (%s):\n\t%s", x.c.Name, fixture, strings.Join(diffs, "\n\t"))
	}
	x.relate(op, decodeAny(r.body))
	return nil
}

func (x *exchange) meet(publisher bool) {
	if x.c.Meet != "" {
		x.srv.Meet(x.c.Meet, publisher)
	}
}

// run sends the case's request, after what it needs first.
func (x *exchange) run() (reply, error) {
	c := x.c
	switch c.Op {
	case OpStore:
		x.sent = Docs.Content
		if c.Ask.TooLarge {
			x.sent = bytes.Repeat([]byte("w"), int(x.srv.MaxBlobBody)+1)
		}
		if c.Ask.Again {
			if err := x.setup("store-newly-created.http", OpStore, x.putBlob); err != nil {
				return reply{}, err
			}
			x.first = x.lastStore
		}
		x.meet(true)
		return x.putBlob()
	case OpStoreQuilt:
		x.parts = Docs.Parts
		switch {
		case c.Ask.DuplicateParts:
			x.parts = []Part{Docs.Parts[0], Docs.Parts[0]}
		case c.Ask.TooLarge:
			x.parts = []Part{{Identifier: "walrus.jpg", Data: bytes.Repeat([]byte("w"), int(x.srv.MaxQuiltBody)+1)}}
		}
		if c.Ask.Again {
			if err := x.setup("quilt-newly-created.http", OpStoreQuilt, x.putQuilt); err != nil {
				return reply{}, err
			}
			x.first = x.lastStore
		}
		x.meet(true)
		return x.putQuilt()
	case OpRead, OpReadRange:
		x.sent = Docs.Content
		if err := x.setup("store-newly-created.http", OpStore, x.putBlob); err != nil {
			return reply{}, err
		}
		id := x.ids[docsBlobID]
		switch {
		case c.Ask.Unknown:
			id = randomBlobID()
		case c.Ask.Malformed:
			id = "not-a-blob-id"
		}
		x.meet(false)
		h := x.accept()
		if c.Ask.Range != "" {
			h = append(h, "Range", c.Ask.Range)
		}
		return x.do(http.MethodGet, "/v1/blobs/"+url.PathEscape(id), nil, h...)
	case OpReadPatch, OpReadByIdentifier, OpListPatches:
		x.parts = Docs.Parts
		if c.Ask.Tags {
			x.parts = docsTagged
			r, err := x.putQuilt()
			if err != nil {
				return reply{}, err
			}
			live := str(decodeAny(r.body), "blobStoreResult", "newlyCreated", "blobObject", "blobId")
			if r.status != http.StatusOK || !isBlobID(live) {
				return reply{}, fmt.Errorf("storing the tagged quilt: HTTP %d: %.300s", r.status, r.body)
			}
			x.ids[docsQuiltID] = live
		} else if err := x.setup("quilt-newly-created-range.http", OpStoreQuilt, x.putQuilt); err != nil {
			return reply{}, err
		}
		x.meet(false)
		quilt, patch, identifier := x.ids[docsQuiltID], x.ids[docsPatchW], Docs.Identifier
		switch c.Op {
		case OpReadPatch:
			if c.Ask.Unknown {
				patch = otherPatch(patch) // of the quilt, but no patch of it
			}
			return x.do(http.MethodGet, "/v1/blobs/by-quilt-patch-id/"+url.PathEscape(patch), nil, x.accept()...)
		case OpReadByIdentifier:
			if c.Ask.Unknown {
				identifier = "no-such-walrus.jpg"
			}
			return x.do(http.MethodGet, "/v1/blobs/by-quilt-id/"+url.PathEscape(quilt)+"/"+url.PathEscape(identifier), nil, x.accept()...)
		default:
			if c.Ask.Unknown {
				quilt = randomBlobID()
			}
			return x.do(http.MethodGet, "/v1/quilts/"+url.PathEscape(quilt)+"/patches", nil, "Accept", "application/json")
		}
	}
	return reply{}, fmt.Errorf("unknown operation %q", c.Op)
}

// accept is a read's Accept header: the client's unless the case says.
func (x *exchange) accept() []string {
	switch x.c.Ask.Accept {
	case "":
		return []string{"Accept", "application/octet-stream"}
	case "-":
		return nil
	}
	return []string{"Accept", x.c.Ask.Accept}
}

func (x *exchange) query() string {
	q := x.c.Ask.Query
	if q == "" {
		q = "epochs=1"
	}
	x.epochs = 1
	if v, err := url.ParseQuery(q); err == nil && v.Get("epochs") != "" {
		x.epochs, _ = strconv.ParseInt(v.Get("epochs"), 10, 64)
	}
	return q
}

// lastStore holds the decoded answer to the last store sent.
func (x *exchange) putBlob() (reply, error) {
	r, err := x.do(http.MethodPut, "/v1/blobs?"+x.query(), bytes.NewReader(x.sent),
		"Content-Type", "application/octet-stream", "Accept", "application/json")
	x.lastStore = decodeAny(r.body)
	return r, err
}

func (x *exchange) putQuilt() (reply, error) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	var meta []map[string]any
	for _, p := range x.parts {
		w, err := mw.CreateFormFile(p.Identifier, p.Identifier)
		if err != nil {
			return reply{}, err
		}
		w.Write(p.Data)
		if p.Tags != nil {
			meta = append(meta, map[string]any{"identifier": p.Identifier, "tags": p.Tags})
		}
	}
	if meta != nil {
		m, _ := json.Marshal(meta)
		if err := mw.WriteField("_metadata", string(m)); err != nil {
			return reply{}, err
		}
	}
	if err := mw.Close(); err != nil {
		return reply{}, err
	}
	r, err := x.do(http.MethodPut, "/v1/quilts?"+x.query(), &b, "Content-Type", mw.FormDataContentType(), "Accept", "application/json")
	x.lastStore = decodeAny(r.body)
	return r, err
}

func decodeAny(b []byte) any {
	var v any
	if decodeJSON(b, &v) != nil {
		return nil
	}
	return v
}

// randomBlobID is an id of the right shape that names nothing stored.
func randomBlobID() string {
	var b [32]byte
	rand.Read(b[:])
	return idEncoding.EncodeToString(b[:])
}

// otherPatch is a patch id of the same quilt as id that no patch has:
// its internal id's bytes are all 0xff.
func otherPatch(id string) string {
	b, err := idEncoding.DecodeString(id)
	if err != nil || len(b) <= 33 {
		return id
	}
	for i := 33; i < len(b); i++ {
		b[i] = 0xff
	}
	return idEncoding.EncodeToString(b)
}

// compare checks the answer against the documented one, then what the
// request implies of it.
func (x *exchange) compare(doc Answer, got reply) {
	c := x.c
	if got.status != doc.Status {
		x.fail("HTTP %d, want %d: %.300s", got.status, doc.Status, got.body)
		return
	}
	for name, vals := range doc.Header {
		want, have := vals[0], got.header.Get(name)
		switch name {
		case "Etag":
			if err := x.ids.match(strings.Trim(want, `"`), strings.Trim(have, `"`)); err != nil {
				x.fail("ETag: %v", err)
			}
		default:
			if have != want {
				x.fail("%s: %q, want %q", name, have, want)
			}
		}
	}
	for _, name := range c.Absent {
		if v, ok := got.header[http.CanonicalHeaderKey(name)]; ok {
			x.fail("%s: %q, want none", name, v)
		}
	}
	switch {
	case doc.JSON():
		x.diffs = append(x.diffs, compareJSON(doc.Body, got.body, shape{optional: c.Optional, vary: c.Vary}, x.ids)...)
	case strings.HasPrefix(doc.Header.Get("Content-Type"), "text/plain"):
		x.diffs = append(x.diffs, compareText(doc.Body, got.body, c.TextPrefix)...)
	default:
		if !bytes.Equal(got.body, doc.Body) {
			x.fail("body %.100q, want %.100q", got.body, doc.Body)
		}
	}
	if len(x.diffs) == 0 && got.status == http.StatusOK && c.Op.publishes() {
		x.relate(c.Op, decodeAny(got.body))
	}
}

// relate checks what a successful store's answer must say of the request
// (sizes, epochs, persistence), and that what it names reads back.
func (x *exchange) relate(op Op, v any) {
	res := v
	if op == OpStoreQuilt {
		res = lookup(v, "blobStoreResult")
	}
	permanent := strings.Contains(x.c.Ask.Query, "permanent=true")
	if nc := lookup(res, "newlyCreated"); nc != nil {
		bo := lookup(nc, "blobObject")
		size, start, end := number(bo, "size"), number(bo, "storage", "startEpoch"), number(bo, "storage", "endEpoch")
		switch op {
		case OpStore:
			if size != int64(len(x.sent)) {
				x.fail("blobObject.size %d, %d bytes sent", size, len(x.sent))
			}
		case OpStoreQuilt:
			if size < payload(x.parts) {
				x.fail("a quilt of %d bytes for %d bytes of patches", size, payload(x.parts))
			}
		}
		if end-start != x.epochs || number(bo, "registeredEpoch") != start {
			x.fail("storage from epoch %d to %d, registered in %d: not the %d epochs asked for", start, end, number(bo, "registeredEpoch"), x.epochs)
		}
		if ahead := number(nc, "resourceOperation", "registerFromScratch", "epochsAhead"); ahead != x.epochs {
			x.fail("epochsAhead %d, want %d", ahead, x.epochs)
		}
		if enc := number(nc, "resourceOperation", "registerFromScratch", "encodedLength"); enc != number(bo, "storage", "storageSize") || enc <= size {
			x.fail("encodedLength %d and storageSize %d differ or are not above the size", enc, number(bo, "storage", "storageSize"))
		}
		if del, _ := lookup(bo, "deletable").(bool); del == permanent {
			x.fail("deletable %v for a store with permanent=%v", del, permanent)
		}
	}
	if ac := lookup(res, "alreadyCertified"); ac != nil {
		firstRes := x.first
		if op == OpStoreQuilt {
			firstRes = lookup(x.first, "blobStoreResult")
		}
		if want := number(firstRes, "newlyCreated", "blobObject", "storage", "endEpoch"); number(ac, "endEpoch") != want {
			x.fail("endEpoch %d, the store before said %d", number(ac, "endEpoch"), want)
		}
	}
	// What the answer names reads back.
	switch {
	case lookup(res, "newlyCreated") == nil && lookup(res, "alreadyCertified") == nil:
	case op == OpStore:
		id := x.ids[docsBlobID]
		if r, err := x.do(http.MethodGet, "/v1/blobs/"+url.PathEscape(id), nil); err != nil || r.status != http.StatusOK || !bytes.Equal(r.body, x.sent) {
			x.fail("blob %s does not read back what was stored: %v %d %.60q", id, err, r.status, r.body)
		}
	default:
		for i, sp := range asSlice(lookup(v, "storedQuiltBlobs")) {
			id, pid := str(sp, "identifier"), str(sp, "quiltPatchId")
			k := slices.IndexFunc(x.parts, func(p Part) bool { return p.Identifier == id })
			if k < 0 {
				x.fail("storedQuiltBlobs[%d]: identifier %q was not sent", i, id)
				continue
			}
			r, err := x.do(http.MethodGet, "/v1/blobs/by-quilt-patch-id/"+url.PathEscape(pid), nil)
			if err != nil || r.status != http.StatusOK || !bytes.Equal(r.body, x.parts[k].Data) {
				x.fail("patch %s (%s) does not read back what was stored: %v %d %.60q", pid, id, err, r.status, r.body)
			}
			if rng := asSlice(lookup(sp, "range")); rng != nil && (len(rng) != 2 || number(rng, 0) < 0 || number(rng, 1) <= number(rng, 0)) {
				x.fail("storedQuiltBlobs[%d].range %v is not [first, end)", i, rng)
			}
		}
	}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func payload(ps []Part) int64 {
	var n int64
	for _, p := range ps {
		n += int64(len(p.Data))
	}
	return n
}
