package walrus

import (
	"errors"
	"net/url"
	"slices"
	"strings"
)

// Endpoint URLs are secrets beyond their origin: providers put API keys in
// the path (/v3/KEY), and userinfo holds passwords. Only
// scheme://host[:port] leaves the client, in errors, logs and results.

// redact returns the origin of a URL: scheme://host[:port], nothing else.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return originOf(u)
}

func originOf(u *url.URL) string {
	if u.Scheme == "" && u.Host == "" {
		return "(relative URL)"
	}
	return u.Scheme + "://" + u.Host
}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// minSecretPart is the shortest path or userinfo part replaced where it
// appears alone: shorter ones would garble every message and protect
// nothing.
const minSecretPart = 4

// newRedactor returns a replacer that turns every configured endpoint, in
// the forms it can appear in, into its origin, and its path and userinfo
// into "…" where a server echoes them alone (a gateway's "Cannot GET
// /v3/KEY/v1/blobs"). It is nil when no endpoint has anything to hide.
func newRedactor(endpoints []string) *strings.Replacer {
	type pair struct{ old, new string }
	var pairs []pair
	add := func(old, new string, min int) {
		if len(old) >= min && old != new {
			pairs = append(pairs, pair{old, new})
		}
	}
	for _, e := range endpoints {
		u, err := url.Parse(e)
		if err != nil {
			continue // New refuses it
		}
		// Without trailing slashes, so that base+"/v1/..." keeps its slash.
		o := originOf(u)
		add(normalizeBase(e), o, 1)
		add(normalizeBase(u.Redacted()), o, 1)
		add(strings.TrimRight(u.EscapedPath(), "/"), "/…", minSecretPart)
		add(strings.TrimRight(u.Path, "/"), "/…", minSecretPart)
		if u.User != nil {
			add(u.User.String(), "…", minSecretPart)
			add(u.User.Username(), "…", minSecretPart)
			if pw, ok := u.User.Password(); ok {
				add(pw, "…", minSecretPart)
				add(url.QueryEscape(pw), "…", minSecretPart)
			}
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	// strings.Replacer tries the olds in argument order at each position:
	// longest first, so a whole URL wins over its path.
	slices.SortStableFunc(pairs, func(a, b pair) int { return len(b.old) - len(a.old) })
	args := make([]string, 0, 2*len(pairs))
	for i, p := range pairs {
		if i > 0 && p.old == pairs[i-1].old {
			continue
		}
		args = append(args, p.old, p.new)
	}
	return strings.NewReplacer(args...)
}

// redactText removes the configured endpoints' secrets from s.
func (c *Client) redactText(s string) string {
	if c.redactor == nil {
		return s
	}
	return c.redactor.Replace(s)
}

// redactErr makes err safe to show: every *url.Error in it names only an
// origin, and when its text still holds a secret (a server echoing the
// path, say) it is wrapped in an error with the redacted text that still
// matches what err matches.
func (c *Client) redactErr(err error) error {
	if err == nil {
		return nil
	}
	redactURLErrors(err, 0)
	msg := err.Error()
	if red := c.redactText(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

// redactURLErrors rewrites the URL of every *url.Error in the tree of
// err to its origin, in place: net/http puts the full request URL (or a
// redirect's target) there. The errors are the client's own, created for
// its requests, so changing them harms nobody.
func redactURLErrors(err error, depth int) {
	if err == nil || depth > 32 {
		return
	}
	if ue, ok := err.(*url.Error); ok {
		ue.URL = redact(ue.URL)
	}
	switch x := err.(type) {
	case interface{ Unwrap() error }:
		redactURLErrors(x.Unwrap(), depth+1)
	case interface{ Unwrap() []error }:
		for _, e := range x.Unwrap() {
			redactURLErrors(e, depth+1)
		}
	}
}

// redactedError is an error whose text had secrets removed. It matches
// what the original matches (errors.Is, errors.As) but does not unwrap to
// it, so a walk down the chain meets no unredacted text.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string        { return e.msg }
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }
func (e *redactedError) As(target any) bool   { return errors.As(e.err, target) }
