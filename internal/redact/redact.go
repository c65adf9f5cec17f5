package redact

import (
	"errors"
	"net/url"
	"slices"
	"strings"
)

// URL returns the origin of raw, scheme://host[:port], and nothing else of
// it; "(unparsable URL)" or "(relative URL)" when it has none.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return Origin(u)
}

// Origin is URL for a parsed URL.
func Origin(u *url.URL) string {
	if u.Scheme == "" && u.Host == "" {
		return "(relative URL)"
	}
	return u.Scheme + "://" + u.Host
}

// MinSecretPart is the shortest part of a URL (path, segment, query value,
// user name, password) replaced where it appears alone: shorter ones
// ("v3", "rpc") would garble every message and protect nothing.
const MinSecretPart = 4

// Scrubber removes the secrets of a fixed set of URLs from text. A nil
// *Scrubber (nothing to hide) leaves text unchanged; its methods are safe
// for concurrent use.
type Scrubber struct {
	r *strings.Replacer
}

// NewScrubber returns a scrubber for the given endpoint URLs, or nil when
// none of them has anything beyond its origin.
func NewScrubber(urls ...string) *Scrubber {
	type pair struct{ old, new string }
	var pairs []pair
	add := func(old, new string, min int) {
		if len(old) >= min && old != new {
			pairs = append(pairs, pair{old, new})
		}
	}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			// Nothing to show of it; the whole text goes.
			add(raw, "(unparsable URL)", 1)
			continue
		}
		// Whole URLs without trailing slashes, so that base+"/v1/..."
		// keeps its slash; in every form a client may quote them: as
		// given, re-encoded, with the password masked (net/http) and
		// without userinfo (go-ethereum's websocket dialer).
		o := Origin(u)
		noUser := *u
		noUser.User = nil
		for _, s := range []string{raw, u.String(), u.Redacted(), noUser.String()} {
			add(strings.TrimRight(s, "/"), o, 1)
		}
		add(strings.TrimRight(u.EscapedPath(), "/"), "/…", MinSecretPart)
		add(strings.TrimRight(u.Path, "/"), "/…", MinSecretPart)
		for _, seg := range strings.Split(u.Path, "/") {
			add(seg, "…", MinSecretPart)
			add(url.PathEscape(seg), "…", MinSecretPart)
		}
		add(u.RawQuery, "…", MinSecretPart)
		add(u.Fragment, "…", MinSecretPart)
		if q, err := url.ParseQuery(u.RawQuery); err == nil {
			for _, vs := range q {
				for _, v := range vs {
					add(v, "…", MinSecretPart)
					add(url.QueryEscape(v), "…", MinSecretPart)
				}
			}
		}
		// A query that does not parse still goes whole (above) and as
		// its raw '&'-separated values.
		for _, kv := range strings.Split(u.RawQuery, "&") {
			if _, v, ok := strings.Cut(kv, "="); ok {
				add(v, "…", MinSecretPart)
			}
		}
		if u.User != nil {
			add(u.User.String(), "…", MinSecretPart)
			add(u.User.Username(), "…", MinSecretPart)
			if pw, ok := u.User.Password(); ok {
				add(pw, "…", MinSecretPart)
				add(url.QueryEscape(pw), "…", MinSecretPart)
			}
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	// strings.Replacer tries the olds in argument order at each position:
	// longest first, so a whole URL wins over its path, its path over a
	// segment.
	slices.SortStableFunc(pairs, func(a, b pair) int { return len(b.old) - len(a.old) })
	args := make([]string, 0, 2*len(pairs))
	seen := make(map[string]bool, len(pairs))
	for _, p := range pairs {
		if seen[p.old] {
			continue
		}
		seen[p.old] = true
		args = append(args, p.old, p.new)
	}
	return &Scrubber{r: strings.NewReplacer(args...)}
}

// String returns s without the secrets.
func (s *Scrubber) String(text string) string {
	if s == nil {
		return text
	}
	return s.r.Replace(text)
}

// Error makes err safe to show. Every *url.Error in its tree is rewritten
// in place to name only an origin (net/http puts the full request URL
// there; the errors are the caller's own, created for its requests), even
// by a nil Scrubber. When the text still holds a secret, the result is
// WithText(err, scrubbed text).
func (s *Scrubber) Error(err error) error {
	if err == nil {
		return nil
	}
	originURLErrors(err, 0)
	msg := err.Error()
	if red := s.String(msg); red != msg {
		return WithText(err, red)
	}
	return err
}

// maxDepth bounds the walk of an error tree.
const maxDepth = 32

func originURLErrors(err error, depth int) {
	if err == nil || depth > maxDepth {
		return
	}
	if ue, ok := err.(*url.Error); ok {
		ue.URL = URL(ue.URL)
	}
	switch x := err.(type) {
	case interface{ Unwrap() error }:
		originURLErrors(x.Unwrap(), depth+1)
	case interface{ Unwrap() []error }:
		for _, e := range x.Unwrap() {
			originURLErrors(e, depth+1)
		}
	}
}

// WithText returns an error whose text is text and which matches what err
// matches (errors.Is, errors.As) but does not unwrap to it, so a walk down
// the chain meets no text but this one.
func WithText(err error, text string) error {
	return &textError{msg: text, err: err}
}

type textError struct {
	msg string
	err error
}

func (e *textError) Error() string        { return e.msg }
func (e *textError) Is(target error) bool { return errors.Is(e.err, target) }
func (e *textError) As(target any) bool   { return errors.As(e.err, target) }
