package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// sanitize makes text that came from outside (a blob's lineage, a
// receipt, an error quoting a server) safe to print on a terminal: control
// characters (escape sequences), format characters (bidirectional
// overrides) and invalid UTF-8 are shown as escapes instead of being
// interpreted.
func sanitize(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += n
	}
	return b.String()
}
