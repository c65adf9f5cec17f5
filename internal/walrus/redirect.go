package walrus

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/hermesd/hermesd/internal/redact"
)

// ErrRedirect means a redirect was refused: any redirect of an upload, or
// a read redirected too often or to something other than http(s).
var ErrRedirect = errors.New("walrus: redirect refused")

// refuseRedirect is the redirect policy of stores: none is followed. The
// Walrus API never redirects; net/http would turn a 301/302/303 into a PUT
// without its body, and follow a 307/308 with the blob and the
// single-use token to a URL the operator never configured (with the token
// even on another port of the same host, which net/http treats as the
// same site).
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return permanent(fmt.Errorf("%w: the publisher redirected to %s, and uploads follow no redirect: configure the URL it points to instead",
		ErrRedirect, redact.Origin(req.URL)))
}

// credentialHeaders are dropped from a redirect that leaves the configured
// origin.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie"}

// followRedirect is the redirect policy of reads: at most MaxRedirects
// hops, to http or https only, and without credentials as soon as a hop
// leaves the configured origin (scheme, host and port). net/http alone
// would keep Authorization on another port of the same host and on an
// https to http downgrade.
func followRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return permanent(fmt.Errorf("%w: stopped after %d redirects (last to %s)", ErrRedirect, MaxRedirects, redact.Origin(req.URL)))
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return permanent(fmt.Errorf("%w: redirect to a %q URL", ErrRedirect, sanitize(req.URL.Scheme, 16)))
	}
	left := !sameOrigin(via[0].URL, req.URL)
	for _, v := range via[1:] {
		left = left || !sameOrigin(via[0].URL, v.URL)
	}
	if left {
		for _, h := range credentialHeaders {
			req.Header.Del(h)
		}
	}
	return nil
}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}
