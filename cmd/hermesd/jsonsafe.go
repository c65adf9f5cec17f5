package main

import (
	"encoding/json"
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// newJSONEncoder is json.NewEncoder for output that holds remote text (a
// receipt's callId, an error quoting a server): encoding/json escapes C0
// controls but writes C1 controls (U+0080-U+009F, which terminals obey as
// CSI, OSC, ...), DEL and bidirectional overrides as they are. Here every
// rune that is not printable is written as a \u escape, so the output
// means the same to a JSON reader and nothing to a terminal.
func newJSONEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(jsonEscaper{w})
	enc.SetEscapeHTML(false)
	return enc
}

// jsonEscaper rewrites what a json.Encoder writes (whole values, valid
// UTF-8: invalid bytes were already replaced by U+FFFD). Outside strings
// encoding/json writes only ASCII, so only string contents change.
type jsonEscaper struct{ w io.Writer }

func (e jsonEscaper) Write(p []byte) (int, error) {
	clean := true
	for _, r := range string(p) {
		if r >= 0x7f && !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return e.w.Write(p)
	}
	out := make([]byte, 0, len(p)+64)
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		switch {
		case r < 0x7f || unicode.IsPrint(r):
			out = append(out, p[i:i+n]...)
		case r > 0xffff:
			r1, r2 := utf16Pair(r)
			out = appendU(appendU(out, r1), r2)
		default:
			out = appendU(out, r)
		}
		i += n
	}
	if _, err := e.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func appendU(b []byte, r rune) []byte {
	b = append(b, `\u`...)
	h := strconv.FormatInt(int64(r), 16)
	for range 4 - len(h) {
		b = append(b, '0')
	}
	return append(b, h...)
}

// utf16Pair splits a rune above the BMP into its surrogates.
func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}
