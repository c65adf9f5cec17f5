package main

import "testing"

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode ✓":   "plain text, ünïcode ✓",
		"\x1b[2J\x1b]0;pwned\x07": `\u001b[2J\u001b]0;pwned\u0007`,
		"line\nbreak\ttab\r":      `line\u000abreak\u0009tab\u000d`,
		"bidi \u202egnp.exe":      `bidi \u202egnp.exe`,
		"bad \xff utf8":           `bad \xff utf8`,
		"c1 \u009b31m":            `c1 \u009b31m`,
		"0xabc123 blobId_-AZaz09": "0xabc123 blobId_-AZaz09",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}
