package redact

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p@host.example:8443/v3/KEY?q=1#f": "https://host.example:8443",
		"http://[::1]:80/x":                          "http://[::1]:80",
		"http://host":                                "http://host",
		"wss://x.example/?apikey=KEY":                "wss://x.example",
		"/relative/path":                             "(relative URL)",
		"http://[::1/x":                              "(unparsable URL)",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScrubber(t *testing.T) {
	if s := NewScrubber("http://127.0.0.1:1", "https://host/"); s != nil {
		t.Errorf("a scrubber for endpoints without secrets")
	}
	var none *Scrubber
	if got := none.String("text"); got != "text" {
		t.Errorf("nil scrubber changed text: %q", got)
	}
	tests := []struct {
		urls []string
		in   map[string]string
	}{{
		urls: []string{"https://alice:s3cr3t%21@agg.example/v3/APIKEY/", "http://pub.example/ab"},
		in: map[string]string{
			"Get \"https://alice:s3cr3t%21@agg.example/v3/APIKEY/v1/blobs/x\": refused": "Get \"https://agg.example/v1/blobs/x\": refused",
			"Cannot GET /v3/APIKEY/v1/blobs (as alice, password s3cr3t!)":               "Cannot GET /…/v1/blobs (as …, password …)",
			"https://alice:xxxxx@agg.example/v3/APIKEY":                                 "https://agg.example",
			"invalid key APIKEY": "invalid key …",
			// Parts shorter than MinSecretPart stay: they would garble text.
			"see /ab and http://pub.example/ab/v1": "see /ab and http://pub.example/v1",
		},
	}, {
		urls: []string{"https://mainnet.infura.io/v3/SUPERSECRET?key=SUPERSECRET2&x=a%2Fb%3Dc"},
		in: map[string]string{
			`Post "https://mainnet.infura.io/v3/SUPERSECRET?key=SUPERSECRET2&x=a%2Fb%3Dc": dial tcp: refused`: `Post "https://mainnet.infura.io": dial tcp: refused`,
			"invalid project id SUPERSECRET":             "invalid project id …",
			"bad query key=SUPERSECRET2&x=a%2Fb%3Dc":     "bad query …",
			"value SUPERSECRET2 and a/b=c and a%2Fb%3Dc": "value … and … and …",
			"path /v3/SUPERSECRET/extra":                 "path /…/extra",
		},
	}, {
		// go-ethereum's websocket dialer drops the userinfo from the URL
		// it quotes.
		urls: []string{"wss://bob:pa55word@ws.example:8546/?apikey=K3Y-K3Y"},
		in: map[string]string{
			"dial wss://ws.example:8546/?apikey=K3Y-K3Y: bad handshake": "dial wss://ws.example:8546: bad handshake",
			"auth bob:pa55word": "auth …",
		},
	}}
	for _, tt := range tests {
		s := NewScrubber(tt.urls...)
		for in, want := range tt.in {
			if got := s.String(in); got != want {
				t.Errorf("%v: scrub %q:\n got %q\nwant %q", tt.urls, in, got, want)
			}
		}
	}
}

func TestScrubError(t *testing.T) {
	const endpoint = "http://127.0.0.1:1/v3/SUPERSECRET"
	_, err := http.Get(endpoint)
	if err == nil {
		t.Fatal("a request to port 1 succeeded")
	}
	// Before anything formats it (fmt.Errorf fixes the text of a wrap).
	var none *Scrubber
	if got := none.Error(err); got != err || strings.Contains(got.Error(), "SUPERSECRET") {
		t.Fatalf("nil scrubber: %v", got)
	}
	var ue *url.Error
	if !errors.As(err, &ue) || ue.URL != "http://127.0.0.1:1" {
		t.Fatalf("url.Error not rewritten: %v", err)
	}

	// A server echoing the key alone: the text is scrubbed, the identity kept.
	echo := fmt.Errorf("server said: invalid key SUPERSECRET: %w", fs.ErrNotExist)
	got := NewScrubber(endpoint).Error(echo)
	if strings.Contains(got.Error(), "SUPERSECRET") || !errors.Is(got, fs.ErrNotExist) || errors.Unwrap(got) != nil {
		t.Fatalf("scrubbed error %q (is ErrNotExist %v, unwraps %v)", got, errors.Is(got, fs.ErrNotExist), errors.Unwrap(got))
	}
	var target *url.Error
	withURL := NewScrubber(endpoint).Error(fmt.Errorf("x SUPERSECRET: %w", &url.Error{Op: "Get", URL: endpoint, Err: errors.New("boom")}))
	if !errors.As(withURL, &target) || target.URL != "http://127.0.0.1:1" {
		t.Fatalf("As through a scrubbed error: %v", target)
	}
	if NewScrubber(endpoint).Error(nil) != nil {
		t.Fatal("nil error became non-nil")
	}
}

// FuzzScrub checks that no secret part survives scrubbing, whatever the
// text around it. The secret parts are upper-case letters, which neither
// the origin nor the replacements contain, so any occurrence in the output
// would be an unreplaced one.
func FuzzScrub(f *testing.F) {
	f.Add("alice", "s3cr3t", "APIKEY", "SUPERSECRET2", "noise", "https://x/?a=b")
	f.Add("", "", "k", "", "", "")
	f.Add("u", "p", "segsegseg", "v&v=v", "…/…", "%zz://[::1")
	f.Fuzz(func(t *testing.T, user, pass, seg, qv, noise, raw string) {
		// Arbitrary URLs and text never panic.
		_ = URL(raw)
		_ = NewScrubber(raw, noise).String(noise + raw)

		upper := func(s string) string {
			b := []byte(s)
			for i := range b {
				b[i] = 'A' + b[i]%26
			}
			for len(b) < MinSecretPart {
				b = append(b, 'Q')
			}
			return string(b)
		}
		user, pass, seg, qv = upper(user), upper(pass), upper(seg), upper(qv)
		u := &url.URL{Scheme: "https", Host: "h.example:8443", User: url.UserPassword(user, pass), Path: "/v3/" + seg, RawQuery: "key=" + qv}
		endpoint := u.String()
		if got := URL(endpoint); got != "https://h.example:8443" {
			t.Fatalf("URL(%q) = %q", endpoint, got)
		}
		s := NewScrubber(endpoint)
		text := strings.Join([]string{noise, endpoint, noise, u.Redacted(), seg, noise, qv, user + pass, u.Path, noise, u.RawQuery, noise}, noise)
		out := s.String(text)
		for _, secret := range []string{user, pass, seg, qv} {
			if strings.Contains(out, secret) {
				t.Fatalf("secret %q survives in %q (from %q)", secret, out, text)
			}
		}
		err := s.Error(errors.New(text))
		if strings.Contains(err.Error(), seg) {
			t.Fatalf("secret in error %q", err)
		}
	})
}
