package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestJSONEncoderEscapesControls: what newJSONEncoder writes decodes to
// the same values, and holds no control a terminal would obey.
func TestJSONEncoderEscapesControls(t *testing.T) {
	in := map[string]string{
		"c0":    "\x1b]0;pwned\x07\x1b[2J",
		"c1":    "\u009b31m \u009d0;x\u009c",
		"del":   "a\x7fb",
		"bidi":  "\u202egnp.exe \u2066x\u2069",
		"plain": "ünïcode ✓ <b>&amp;</b> 𝄞 😀",
		"tag":   "\U000e0041", // a format character above the BMP
	}
	var out bytes.Buffer
	if err := newJSONEncoder(&out).Encode(in); err != nil {
		t.Fatal(err)
	}
	if ctx, bad := rawControl(out.String()); bad {
		t.Errorf("raw control in %q", ctx)
	}
	for _, r := range out.String() {
		if r == 0x202e || r == 0x2066 || r == 0xe0041 {
			t.Errorf("format character %U written raw", r)
		}
	}
	var back map[string]string
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	for k, v := range in {
		if back[k] != v {
			t.Errorf("%s: %q decodes as %q", k, v, back[k])
		}
	}
	if !bytes.Contains(out.Bytes(), []byte(`<b>&amp;</b> 𝄞 😀`)) {
		t.Errorf("printable text was escaped: %s", out.Bytes())
	}
}
