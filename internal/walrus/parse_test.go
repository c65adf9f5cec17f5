package walrus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hermesd/hermesd/internal/walruscost"
)

// Real answer shapes from the Walrus docs and source.
const (
	newlyCreatedDocs = `{"newlyCreated":{"blobObject":{"id":"0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50","registeredEpoch":34,"blobId":"M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk","size":17,"encodingType":"RS2","certifiedEpoch":34,"storage":{"id":"0x4748cd83217b5ce7aa77e7f1ad6fc5f7f694e26a157381b9391ac65c47815faf","startEpoch":34,"endEpoch":35,"storageSize":66034000},"deletable":false},"resourceOperation":{"registerFromScratch":{"encodedLength":66034000,"epochsAhead":1}},"cost":132300}}`
	newlyCreatedNull = `{"newlyCreated":{"blobObject":{"id":"0x1","registeredEpoch":34,"blobId":"M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk","size":17,"encodingType":"RS2","certifiedEpoch":null,"storage":{"id":"0x2","startEpoch":34,"endEpoch":40,"storageSize":66034000},"deletable":true},"resourceOperation":{"reuseAndExtend":{"encodedLength":66034000,"epochsExtended":3}},"cost":0,"sharedBlobObject":"0xabc"}}`
	alreadyEvent     = `{"alreadyCertified":{"blobId":"M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk","event":{"txDigest":"4XQHFa9S324wTzYHF3vsBSwpUZuLpmwTHYMFv9nsttSs","eventSeq":"0"},"endEpoch":35}}`
	alreadyObject    = `{"alreadyCertified":{"blobId":"M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk","object":"0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50","endEpoch":35}}`
	markedInvalid    = `{"markedInvalid":{"blobId":"M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk","event":{"txDigest":"4XQHFa9S324wTzYHF3vsBSwpUZuLpmwTHYMFv9nsttSs","eventSeq":"1"}}}`
	resultError      = `{"error":{"blobId":null,"failurePhase":"register","errorMsg":"insufficient WAL balance"}}`
	apiErrorBody     = `{"error":{"code":504,"status":"DEADLINE_EXCEEDED","message":"the service timed-out while waiting for confirmations, please try again","details":[{"@type":"ErrorInfo","reason":"INSUFFICIENT_CONFIRMATIONS","domain":"daemon.walrus.space","metadata":{}}]}}`
	// The same in the OpenAPI description's spelling, which the service
	// does not send but which a client takes.
	newlyCreatedOpenAPI  = `{"newlyCreated":{"blob_object":{"id":"0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50","registeredEpoch":34,"blobId":"M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk","size":17,"encodingType":"RS2","certifiedEpoch":34,"storage":{"id":"0x4748cd83217b5ce7aa77e7f1ad6fc5f7f694e26a157381b9391ac65c47815faf","startEpoch":34,"endEpoch":35,"storageSize":66034000},"deletable":false},"resource_operation":{"registerFromScratch":{"encoded_length":66034000,"epochs_ahead":1}},"cost":132300,"shared_blob_object":null}}`
	alreadyEventOpenAPI  = `{"alreadyCertified":{"blob_id":"M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk","event":{"txDigest":[1,2,3],"eventSeq":0},"end_epoch":35}}`
	markedInvalidOpenAPI = `{"markedInvalid":{"blob_id":"M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk","event":{"txDigest":"4XQHFa9S324wTzYHF3vsBSwpUZuLpmwTHYMFv9nsttSs","eventSeq":"1"}}}`
	resultErrorOpenAPI   = `{"error":{"blob_id":null,"failure_phase":"register","error_msg":"insufficient WAL balance"}}`
	plain413             = "Failed to buffer the request body: length limit exceeded"
	plain429             = "the publisher is receiving too many requests; please try again later"
)

func TestParseStoreResponse(t *testing.T) {
	const id = "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk"
	tests := []struct {
		name    string
		in      string
		want    StoreResult
		wantErr error
		errText string
	}{
		{name: "newlyCreated docs example", in: newlyCreatedDocs, want: StoreResult{BlobID: id, Size: 17, EndEpoch: 35,
			ObjectID: "0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50", RegisteredEpoch: 34, Cost: 132300,
			EncodedLength: 66_034_000, StartEpoch: 34, ResourceOperation: "registerFromScratch", EpochsPaid: 1}},
		{name: "newlyCreated certifiedEpoch null", in: newlyCreatedNull, want: StoreResult{BlobID: id, Size: 17, EndEpoch: 40,
			ObjectID: "0x1", SharedObjectID: "0xabc", RegisteredEpoch: 34, Deletable: true,
			EncodedLength: 66_034_000, StartEpoch: 34, ResourceOperation: "reuseAndExtend", EpochsPaid: 3}},
		{name: "newlyCreated reused storage", in: strings.Replace(newlyCreatedDocs, `"registerFromScratch":{"encodedLength":66034000,"epochsAhead":1}`,
			`"reuseStorage":{"encodedLength":66034000}`, 1), want: StoreResult{BlobID: id, Size: 17, EndEpoch: 35,
			ObjectID: "0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50", RegisteredEpoch: 34, Cost: 132300,
			EncodedLength: 66_034_000, StartEpoch: 34, ResourceOperation: "reuseStorage"}},
		{name: "newlyCreated odd resource operation", in: strings.Replace(newlyCreatedDocs, `{"registerFromScratch":{"encodedLength":66034000,"epochsAhead":1}}`,
			`"somethingNew"`, 1), want: StoreResult{BlobID: id, Size: 17, EndEpoch: 35,
			ObjectID: "0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50", RegisteredEpoch: 34, Cost: 132300,
			EncodedLength: 66_034_000, StartEpoch: 34, EpochsPaid: 1}},
		{name: "alreadyCertified event", in: alreadyEvent, want: StoreResult{BlobID: id, EndEpoch: 35, AlreadyCertified: true,
			TxDigest: "4XQHFa9S324wTzYHF3vsBSwpUZuLpmwTHYMFv9nsttSs"}},
		{name: "alreadyCertified object", in: alreadyObject, want: StoreResult{BlobID: id, EndEpoch: 35, AlreadyCertified: true,
			ObjectID: "0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50"}},
		{name: "markedInvalid", in: markedInvalid, wantErr: ErrMarkedInvalid, errText: "marked invalid"},
		{name: "error result", in: resultError, wantErr: errStoreFailed, errText: "insufficient WAL balance"},
		{name: "newlyCreated, OpenAPI spelling", in: newlyCreatedOpenAPI, want: StoreResult{BlobID: id, Size: 17, EndEpoch: 35,
			ObjectID: "0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50", RegisteredEpoch: 34, Cost: 132300,
			EncodedLength: 66_034_000, StartEpoch: 34, ResourceOperation: "registerFromScratch", EpochsPaid: 1}},
		// The schema's txDigest (an array of bytes) is not the service's
		// (a base58 string): the answer stands, the digest is not kept.
		{name: "alreadyCertified, OpenAPI spelling and schema", in: alreadyEventOpenAPI, want: StoreResult{BlobID: id, EndEpoch: 35, AlreadyCertified: true}},
		{name: "markedInvalid, OpenAPI spelling", in: markedInvalidOpenAPI, wantErr: ErrMarkedInvalid, errText: id},
		{name: "error result, OpenAPI spelling", in: resultErrorOpenAPI, wantErr: errStoreFailed, errText: "register"},
		{name: "a field in both spellings", in: strings.Replace(alreadyEvent, `"endEpoch":35`, `"endEpoch":35,"end_epoch":36`, 1), wantErr: ErrProtocol, errText: "both"},
		{name: "blobObject in both spellings", in: strings.Replace(newlyCreatedDocs, `"cost":132300`, `"cost":132300,"blob_object":{}`, 1), wantErr: ErrProtocol},
		{name: "resource operation in both spellings", in: strings.Replace(newlyCreatedDocs, `"epochsAhead":1`, `"epochsAhead":1,"epochs_ahead":2`, 1),
			want: StoreResult{BlobID: id, Size: 17, EndEpoch: 35, ObjectID: "0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50",
				RegisteredEpoch: 34, Cost: 132300, EncodedLength: 66_034_000, StartEpoch: 34, EpochsPaid: 1}},
		{name: "a variant that is no object", in: `{"alreadyCertified":[1]}`, wantErr: ErrProtocol},
		{name: "a txDigest with controls", in: strings.Replace(alreadyEvent, `4XQHFa9S324wTzYHF3vsBSwpUZuLpmwTHYMFv9nsttSs`, `a\u001bb`, 1),
			want: StoreResult{BlobID: id, EndEpoch: 35, AlreadyCertified: true, TxDigest: "a?b"}},
		{name: "api error body", in: apiErrorBody, wantErr: errStoreFailed, errText: "timed-out"},
		{name: "plain text", in: plain413, wantErr: ErrProtocol},
		{name: "empty object", in: `{}`, wantErr: ErrProtocol},
		{name: "two results", in: `{"newlyCreated":{},"alreadyCertified":{}}`, wantErr: ErrProtocol},
		{name: "snake case", in: `{"newly_created":{"blob_object":{"blob_id":"` + id + `"}}}`, wantErr: ErrProtocol},
		{name: "null result", in: `{"newlyCreated":null}`, wantErr: ErrProtocol},
		{name: "no storage", in: `{"newlyCreated":{"blobObject":{"blobId":"` + id + `","size":1}}}`, wantErr: ErrProtocol},
		{name: "bad blob id", in: strings.Replace(alreadyEvent, id, "short", 1), wantErr: ErrProtocol},
		{name: "no end epoch", in: `{"alreadyCertified":{"blobId":"` + id + `"}}`, wantErr: ErrProtocol},
		{name: "negative size", in: strings.Replace(newlyCreatedDocs, `"size":17`, `"size":-1`, 1), wantErr: ErrProtocol},
		{name: "epoch overflow", in: strings.Replace(alreadyEvent, `"endEpoch":35`, `"endEpoch":4294967296`, 1), wantErr: ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStoreResponse([]byte(tt.in))
			if tt.wantErr == nil && tt.errText == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Fatalf("got %+v\nwant %+v", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, got %+v", got)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v is not %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.errText) {
				t.Errorf("error %q lacks %q", err, tt.errText)
			}
		})
	}
}

func TestParseErrorBody(t *testing.T) {
	code, status, reason, msg := parseErrorBody([]byte(apiErrorBody))
	if code != 504 || status != "DEADLINE_EXCEEDED" || reason != "INSUFFICIENT_CONFIRMATIONS" || !strings.HasPrefix(msg, "the service timed-out") {
		t.Errorf("JSON: %d %q %q %q", code, status, reason, msg)
	}
	if code, status, reason, msg := parseErrorBody([]byte(plain429)); code != 0 || status != "" || reason != "" || msg != plain429 {
		t.Errorf("plain: %d %q %q %q", code, status, reason, msg)
	}
	_, _, _, msg = parseErrorBody([]byte("line one\n\x1b[31mred\x00\xff" + strings.Repeat("x", 1000)))
	if strings.ContainsAny(msg, "\n\x1b\x00") || !utf8.ValidString(msg) || utf8.RuneCountInString(msg) > maxErrorExcerpt+1 {
		t.Errorf("excerpt not sanitized: %q", msg)
	}
}

func TestStatusError(t *testing.T) {
	tests := []struct {
		code            int
		temporary       bool
		notFound, large bool
	}{
		{400, false, false, false}, {401, false, false, false}, {403, false, false, false},
		{404, false, true, false}, {413, false, false, true}, {416, false, false, false}, {451, false, false, false},
		{429, true, false, false}, {500, true, false, false}, {502, true, false, false}, {503, true, false, false}, {504, true, false, false},
		{501, false, false, false},
	}
	for _, tt := range tests {
		e := &StatusError{StatusCode: tt.code}
		var err error = &OpError{Op: "read", Attempts: 1, Err: e}
		if e.Temporary() != tt.temporary || e.Permanent() == tt.temporary ||
			errors.Is(err, ErrNotFound) != tt.notFound || errors.Is(err, ErrTooLarge) != tt.large {
			t.Errorf("%d: temporary %v, not found %v, too large %v", tt.code, e.Temporary(), errors.Is(err, ErrNotFound), errors.Is(err, ErrTooLarge))
		}
		if Attempts(err) != 1 {
			t.Errorf("Attempts: %d", Attempts(err))
		}
	}
	for code, want := range map[int]error{416: ErrInvalidRange, 307: ErrRedirect, 304: ErrRedirect} {
		if err := (&StatusError{StatusCode: code}); !errors.Is(err, want) || errors.Is(err, ErrNotFound) {
			t.Errorf("%d is not %v", code, want)
		}
	}
	if errors.Is(&StatusError{StatusCode: 200}, ErrRedirect) || errors.Is(&StatusError{StatusCode: 400}, ErrInvalidRange) {
		t.Error("200 or 400 matched a sentinel")
	}
	e := &StatusError{StatusCode: 413, Message: plain413}
	if !strings.Contains(e.Error(), "max_blob_size") {
		t.Errorf("413 message lacks a hint: %s", e)
	}
}

func TestBackoff(t *testing.T) {
	noJitter := func(n int64) int64 { return n - 1 } // the top of the range
	tests := []struct {
		attempt  int
		min, max time.Duration
		want     time.Duration
	}{
		{0, time.Second, time.Minute, time.Second},
		{1, time.Second, time.Minute, 2 * time.Second},
		{5, time.Second, time.Minute, 32 * time.Second},
		{6, time.Second, time.Minute, time.Minute},
		{100, time.Second, time.Minute, time.Minute},
	}
	for _, tt := range tests {
		if got := expBackoff(tt.min, tt.max, tt.attempt, noJitter); got != tt.want {
			t.Errorf("attempt %d: %s, want %s", tt.attempt, got, tt.want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		d := expBackoff(time.Second, time.Minute, 3, func(n int64) int64 { return r.Int64N(n) })
		if d < 4*time.Second || d > 8*time.Second {
			t.Fatalf("jittered backoff %s outside [4s, 8s]", d)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"3", 3 * time.Second, true},
		{"Tue, 01 Jan 2030 12:00:30 GMT", 30 * time.Second, true},
		{"Tue, 01 Jan 2030 11:00:00 GMT", 0, true},
		{"-1", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%q: %s %v, want %s %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}

	// The computed wait honours Retry-After (capped) on the endpoint
	// retried, and a different endpoint is not held back by it.
	c, err := New(Config{Publishers: []string{"http://127.0.0.1:1"}, RetryAfterMax: 45 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.now = func() time.Time { return now }
	c.jitter = func(int64) int64 { return 0 }
	resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"Tue, 01 Jan 2030 12:00:20 GMT"}}}
	op := c.newOperation(context.Background(), "store", []string{"a"})
	if got := op.backoff(time.Millisecond, time.Second, 0, resp); got != 20*time.Second {
		t.Errorf("HTTP-date Retry-After: wait %s, want 20s", got)
	}
	resp.Header.Set("Retry-After", "3600")
	if got := op.backoff(time.Millisecond, time.Second, 0, resp); got != 45*time.Second {
		t.Errorf("capped Retry-After: wait %s, want 45s", got)
	}
	op = c.newOperation(context.Background(), "store", []string{"a", "b"})
	resp.Header.Set("Retry-After", "10")
	if got := op.backoff(time.Millisecond, time.Second, 0, resp); got >= 10*time.Second {
		t.Errorf("failover to another endpoint waited %s", got)
	}
	op.cur = op.next
	op.lastErr = nil
	if got := op.backoff(time.Millisecond, time.Second, 1, nil); got != 10*time.Second {
		t.Errorf("back to the endpoint that asked for 10s: wait %s", got)
	}
}

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in                 string
		first, last, total int64
		ok                 bool
	}{
		{"bytes 0-9/10", 0, 9, 10, true},
		{"bytes 5-9/100", 5, 9, 100, true},
		{"bytes */10", 0, 0, 0, false},
		{"bytes 0-9/*", 0, 0, 0, false},
		{"bytes 9-0/10", 0, 0, 0, false},
		{"bytes 0-10/10", 0, 0, 0, false},
		{"items 0-1/2", 0, 0, 0, false},
		{"bytes -1-2/5", 0, 0, 0, false},
		{"bytes 9-9/10", 9, 9, 10, true},
		{"bytes 0-0/1", 0, 0, 1, true},
		{"bytes +1-2/5", 0, 0, 0, false},
		{"bytes 1-+2/5", 0, 0, 0, false},
		{"bytes 1-2/+5", 0, 0, 0, false},
		{"bytes  1-2/5", 0, 0, 0, false},
		{"bytes 1-2/5 ", 0, 0, 0, false},
		{"bytes 1 -2/5", 0, 0, 0, false},
		{"bytes 0-1/999999999999999999", 0, 1, 999999999999999999, true},
		{"bytes 0-1/9999999999999999999", 0, 0, 0, false},
		{"bytes 0-1-2/5", 0, 0, 0, false},
		{"bytes 0-1/5/6", 0, 0, 0, false},
		{"bytes 0x1-2/5", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	}
	for _, tt := range tests {
		f, l, n, err := parseContentRange(tt.in)
		if (err == nil) != tt.ok || (tt.ok && (f != tt.first || l != tt.last || n != tt.total)) {
			t.Errorf("%q: %d %d %d %v", tt.in, f, l, n, err)
		}
	}
}

func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes 5-9/100", "bytes */10", "bytes 0-9/*", "bytes 9-0/10", "bytes +1-2/5",
		"bytes 0-1/999999999999999999", "bytes 0-1/9999999999999999999", "bytes 007-008/9", "items 0-1/2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		first, last, size, err := parseContentRange(v)
		if err != nil {
			if first != 0 || last != 0 || size != 0 || strings.ContainsAny(err.Error(), "\n\r\x00") || !utf8.ValidString(err.Error()) {
				t.Fatalf("error %q with %d %d %d", err, first, last, size)
			}
			return
		}
		if first < 0 || last < first || size <= last {
			t.Fatalf("%q: %d-%d/%d", v, first, last, size)
		}
		// Digits only: the canonical form parses to the same numbers.
		f2, l2, s2, err := parseContentRange(fmt.Sprintf("bytes %d-%d/%d", first, last, size))
		if err != nil || f2 != first || l2 != last || s2 != size {
			t.Fatalf("%q: canonical form gives %d %d %d %v", v, f2, l2, s2, err)
		}
	})
}

func TestSanitize(t *testing.T) {
	x := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 10, "plain"},
		{"  lead  and\t\ttrail \n", 20, "lead and trail"},
		{"a\x00b\x1bc\xffd", 10, "a?b?c?d"},
		{x(10), 10, x(10)},
		{x(11), 10, x(10) + "…"},
		// The space collapsed before a rune must fit with it (the
		// fuzzer's 302-rune excerpt).
		{x(9) + " yy", 10, x(9) + "…"},
		{x(8) + " yy", 10, x(8) + " y…"},
		{x(10) + "   ", 10, x(10)},
		{x(10) + "   y", 10, x(10) + "…"},
		{x(299) + " 00", maxErrorExcerpt, x(299) + "…"},
	}
	for _, tt := range tests {
		got := sanitize(tt.in, tt.max)
		if got != tt.want {
			t.Errorf("sanitize(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
		if n := utf8.RuneCountInString(got); n > tt.max+1 {
			t.Errorf("sanitize(%q, %d): %d runes", tt.in, tt.max, n)
		}
	}
}

func TestFollowRedirect(t *testing.T) {
	req := func(u string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer t")
		r.Header.Set("Cookie", "c=1")
		r.Header.Set("Range", "bytes=0-1")
		return r
	}
	const origin = "https://agg.example:8443/base/v1/blobs/x"
	tests := []struct {
		name  string
		chain []string // hops after origin; the last is being checked
		keep  bool
		err   bool
	}{
		{"same origin", []string{"https://agg.example:8443/other"}, true, false},
		{"same origin, host case", []string{"https://AGG.example:8443/other"}, true, false},
		{"other port", []string{"https://agg.example:9443/x"}, false, false},
		{"default port spelled out", []string{"https://agg.example/x"}, false, false},
		{"downgrade", []string{"http://agg.example:8443/x"}, false, false},
		{"subdomain", []string{"https://cdn.agg.example:8443/x"}, false, false},
		{"back home after leaving", []string{"https://cdn.example/x", "https://agg.example:8443/x"}, false, false},
		{"not http", []string{"ftp://agg.example/x"}, false, true},
		{"at the limit", []string{"https://agg.example:8443/1", "https://agg.example:8443/2", "https://agg.example:8443/3", "https://agg.example:8443/4", "https://agg.example:8443/5"}, true, false},
		{"over the limit", []string{"https://agg.example:8443/1", "https://agg.example:8443/2", "https://agg.example:8443/3", "https://agg.example:8443/4", "https://agg.example:8443/5", "https://agg.example:8443/6"}, false, true},
	}
	for _, tt := range tests {
		via := []*http.Request{req(origin)}
		for _, u := range tt.chain[:len(tt.chain)-1] {
			via = append(via, req(u))
		}
		next := req(tt.chain[len(tt.chain)-1])
		err := followRedirect(next, via)
		if (err != nil) != tt.err || (err != nil && !errors.Is(err, ErrRedirect)) {
			t.Errorf("%s: error %v", tt.name, err)
			continue
		}
		if tt.err {
			continue
		}
		kept := next.Header.Get("Authorization") != "" && next.Header.Get("Cookie") != ""
		if kept != tt.keep || next.Header.Get("Range") == "" {
			t.Errorf("%s: headers %v", tt.name, next.Header)
		}
	}
	if err := refuseRedirect(req(origin), []*http.Request{req(origin)}); !errors.Is(err, ErrRedirect) || strings.Contains(err.Error(), "base") {
		t.Errorf("store redirect: %v", err)
	}
}

func TestValidateBlobID(t *testing.T) {
	good := []string{"M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk", "E7_nNXvFU_3qZVu3OH1yycRG7LZlyn1-UxEDCDDqGGU"}
	bad := []string{"", "short", "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk=", "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK+W7/4BUk",
		"M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUl", "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BU\n", "../../../../../../../../../../../etc/passwd"}
	for _, id := range good {
		if err := ValidateBlobID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range bad {
		if err := ValidateBlobID(id); !errors.Is(err, ErrInvalidBlobID) {
			t.Errorf("%q accepted (%v)", id, err)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	addr := "0x" + strings.Repeat("a", 64)
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{Publishers: []string{"http://127.0.0.1:1/"}}, true},
		{"path prefix", Config{Aggregators: []string{"https://example.com/walrus"}}, true},
		{"nothing", Config{}, false},
		{"ftp", Config{Publishers: []string{"ftp://x"}}, false},
		{"query", Config{Publishers: []string{"http://x/?epochs=3"}}, false},
		{"no host", Config{Publishers: []string{"http:///v1"}}, false},
		{"epochs", Config{Publishers: []string{"http://x"}, Epochs: 54}, false},
		{"address", Config{Publishers: []string{"http://x"}, SendObjectTo: addr}, true},
		{"short address", Config{Publishers: []string{"http://x"}, SendObjectTo: "0x2"}, false},
		{"share and send", Config{Publishers: []string{"http://x"}, SendObjectTo: addr, Share: true}, false},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 14_889_779: "14.2 MiB", 10 << 20: "10.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}

func FuzzParseStoreResponse(f *testing.F) {
	for _, s := range []string{newlyCreatedDocs, newlyCreatedNull, alreadyEvent, alreadyObject, markedInvalid, resultError, apiErrorBody, plain413, plain429, "", "null", "{}",
		newlyCreatedOpenAPI, alreadyEventOpenAPI, markedInvalidOpenAPI, resultErrorOpenAPI} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseStoreResponse(data)
		if err != nil {
			if r != (StoreResult{}) {
				t.Fatalf("error %v with a result %+v", err, r)
			}
			return
		}
		if ValidateBlobID(r.BlobID) != nil || r.Size < 0 {
			t.Fatalf("accepted a bad result %+v", r)
		}
		if c := r.Charge(); r.AlreadyCertified && c != (walruscost.Charge{}) || !r.AlreadyCertified && c.FROST != r.Cost {
			t.Fatalf("charge %+v of %+v", c, r)
		}
	})
}

func FuzzParseErrorBody(f *testing.F) {
	for _, s := range []string{apiErrorBody, plain413, plain429, `{"error":{"code":404,"status":"NOT_FOUND","message":"gone","details":[]}}`, `{"error":null}`, "\xff\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, status, reason, msg := parseErrorBody(data)
		for _, s := range []string{status, reason, msg} {
			if !utf8.ValidString(s) || strings.ContainsAny(s, "\n\r\x00\x1b") {
				t.Fatalf("unsanitized %q", s)
			}
		}
		if utf8.RuneCountInString(msg) > maxErrorExcerpt+1 {
			t.Fatalf("excerpt of %d runes", utf8.RuneCountInString(msg))
		}
	})
}

// TestStoreCharge: what the cost ledger records of a store answer.
func TestStoreCharge(t *testing.T) {
	r, err := parseStoreResponse([]byte(newlyCreatedDocs))
	if err != nil {
		t.Fatal(err)
	}
	want := walruscost.Charge{New: true, EncodedBytes: 66_034_000, EncodedByteEpochs: 66_034_000, FROST: 132_300, SuiTx: 2}
	if got := r.Charge(); got != want {
		t.Errorf("newlyCreated: %+v, want %+v", got, want)
	}
	r, err = parseStoreResponse([]byte(newlyCreatedNull))
	if err != nil {
		t.Fatal(err)
	}
	want = walruscost.Charge{New: true, EncodedBytes: 66_034_000, EncodedByteEpochs: 3 * 66_034_000, SuiTx: 2}
	if got := r.Charge(); got != want {
		t.Errorf("reuseAndExtend: %+v, want %+v", got, want)
	}
	r, err = parseStoreResponse([]byte(alreadyEvent))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Charge(); got != (walruscost.Charge{}) {
		t.Errorf("alreadyCertified: %+v, want nothing", got)
	}
}
