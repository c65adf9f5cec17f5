package walrus

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors callers branch on (with errors.Is).
var (
	// ErrNotFound means the aggregator does not know the blob: it never
	// existed, expired or was deleted (HTTP 404).
	ErrNotFound = errors.New("walrus: blob not found")
	// ErrTooLarge means the body exceeds the publisher's limit, found either
	// before the upload (MaxBlobSize) or by the publisher (HTTP 413).
	ErrTooLarge = errors.New("walrus: blob too large")
	// ErrMismatch means a blob read back differs from what was stored.
	ErrMismatch = errors.New("walrus: blob mismatch")
	// ErrInvalidBlobID means a string is not a Walrus blob id.
	ErrInvalidBlobID = errors.New("walrus: invalid blob id")
	// ErrProtocol means a server answered in a way the API does not allow
	// (unknown JSON shape, wrong Content-Range, wrong size).
	ErrProtocol = errors.New("walrus: protocol error")
	// ErrAttemptTimeout means one attempt stalled longer than
	// AttemptTimeout or IdleTimeout; the attempt is retried.
	ErrAttemptTimeout = errors.New("walrus: attempt timed out")
	// ErrTimeout means a whole operation ran longer than Config.Timeout.
	ErrTimeout = errors.New("walrus: operation timed out")
	// ErrBodyTooLarge means an answer is, or says it is, larger than the
	// bound of the read (the expected size, WithMaxSize or
	// Config.MaxReadSize) or of a publisher's answer. It is permanent: the
	// read stops at once and is neither retried nor failed over.
	ErrBodyTooLarge = errors.New("walrus: answer larger than its bound")
	// ErrNoSpace means the filesystem a download would be written to lacks
	// the room for it plus a safety margin; nothing was written.
	ErrNoSpace = errors.New("walrus: not enough free disk space")
	// ErrInvalidRange means a byte range is not inside the blob: a bad
	// ReadRange argument, or HTTP 416 from the aggregator.
	ErrInvalidRange = errors.New("walrus: invalid byte range")
	// ErrBlobID means the bytes an aggregator served for a blob id are
	// not that blob: their Walrus blob id (RS2 over Config.Shards) is
	// another. Every configured aggregator was tried; none of the bytes
	// reached the caller.
	ErrBlobID = errors.New("walrus: the aggregator served other bytes than the blob id names")
)

// StatusError is a non-success HTTP answer.
type StatusError struct {
	Op         string // "store" or "read"
	URL        string // scheme://host[:port] of the request, nothing more
	StatusCode int
	// Status, Code and Message come from a JSON error body
	// ({"error":{"code","status","message","details"}}); Reason is the
	// first ErrorInfo reason (BLOB_NOT_FOUND, ...). For a plain-text body
	// Message holds a sanitized excerpt of it.
	Code    int
	Status  string
	Reason  string
	Message string
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d", e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		b.WriteString(" " + t)
	}
	if e.Reason != "" {
		b.WriteString(" (" + e.Reason + ")")
	} else if e.Status != "" {
		b.WriteString(" (" + e.Status + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	switch e.StatusCode {
	case http.StatusRequestEntityTooLarge:
		b.WriteString(": the publisher's body limit is below walrus.max_blob_size; lower max_blob_size to match it or use a publisher with a larger limit")
	case http.StatusUnauthorized:
		b.WriteString(": the publisher requires a valid bearer token (walrus.token)")
	}
	return b.String()
}

// Temporary reports whether the status is worth retrying (429, 500, 502,
// 503, 504).
func (e *StatusError) Temporary() bool { return retryableStatus(e.StatusCode) }

// Permanent is the opposite of Temporary.
func (e *StatusError) Permanent() bool { return !e.Temporary() }

// Is makes errors.Is(err, ErrNotFound) true for 404,
// errors.Is(err, ErrTooLarge) true for 413,
// errors.Is(err, ErrInvalidRange) true for 416 and
// errors.Is(err, ErrRedirect) true for a 3xx that was not followed.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrTooLarge:
		return e.StatusCode == http.StatusRequestEntityTooLarge
	case ErrInvalidRange:
		return e.StatusCode == http.StatusRequestedRangeNotSatisfiable
	case ErrRedirect:
		return e.StatusCode >= 300 && e.StatusCode < 400
	}
	return false
}

// OpError is the error of a store or read that failed, after all its
// attempts.
type OpError struct {
	Op       string // "store" or "read"
	BlobID   string // reads only
	Endpoint string // scheme://host[:port] of the last attempt's endpoint
	Attempts int
	Err      error // a *StatusError, a network error, ErrAttemptTimeout, ...
}

func (e *OpError) Error() string {
	what := "walrus " + e.Op
	if e.BlobID != "" {
		what += " " + e.BlobID
	}
	n := "attempt"
	if e.Attempts != 1 {
		n = "attempts"
	}
	return fmt.Sprintf("%s failed after %d %s (last %s): %v", what, e.Attempts, n, e.Endpoint, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// Attempts returns how many HTTP attempts the failed operation behind err
// made, or 0 when err carries no count.
func Attempts(err error) int {
	var oe *OpError
	if errors.As(err, &oe) {
		return oe.Attempts
	}
	return 0
}

// permanentError stops retries for errors that would fail the same way
// again (a bad answer, a failing destination writer).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

func protocolErrorf(format string, args ...any) error {
	return permanent(fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...))
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// apiError is the JSON error body of Walrus services (AIP-193 style).
type apiError struct {
	Error *struct {
		Code    int    `json:"code"`
		Status  string `json:"status"`
		Message string `json:"message"`
		Details []struct {
			Type   string `json:"@type"`
			Reason string `json:"reason"`
		} `json:"details"`
	} `json:"error"`
}

// maxErrorExcerpt bounds how much of a plain-text error body is kept.
const maxErrorExcerpt = 300

// parseErrorBody extracts what an error body says: the fields of a JSON
// error, or a sanitized excerpt of any other body.
func parseErrorBody(body []byte) (code int, status, reason, message string) {
	var ae apiError
	if json.Unmarshal(body, &ae) == nil && ae.Error != nil {
		for _, d := range ae.Error.Details {
			if d.Reason != "" {
				reason = sanitize(d.Reason, 64)
				break
			}
		}
		return ae.Error.Code, sanitize(ae.Error.Status, 64), reason, sanitize(ae.Error.Message, maxErrorExcerpt)
	}
	return 0, "", "", sanitize(string(body), maxErrorExcerpt)
}

// sanitize makes untrusted text safe for one log line: valid UTF-8, no
// control characters, collapsed whitespace, at most max runes plus a
// closing "…" when something was cut.
func sanitize(s string, max int) string {
	var b strings.Builder
	n := 0
	space := false
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size <= 1:
			r = '?'
		case unicode.IsSpace(r):
			space = b.Len() > 0
			s = s[size:]
			continue
		case !unicode.IsPrint(r):
			r = '?'
		}
		// A collapsed space is written together with the rune after it,
		// so both must fit: checking only the rune let the pair overrun
		// the bound by one.
		need := 1
		if space {
			need = 2
		}
		if n+need > max {
			break
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
		n += need
		s = s[size:]
	}
	if len(s) > 0 {
		b.WriteString("…")
	}
	return b.String()
}
