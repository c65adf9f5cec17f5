package localwalrus

import (
	"fmt"
	"testing"
)

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-0", "bytes=10-20", " bytes=1-2 ", "bytes=5-", "bytes=-5", "bytes=0-1,2-3",
		"bytes=3-1", "bytes=", "items=0-1", "bytes=999999999999999999-9999999999999999999", "bytes= 1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r, err := parseRange(v)
		if err != nil {
			return
		}
		if r.first < 0 || r.last < r.first {
			t.Fatalf("parseRange(%q) = %+v", v, r)
		}
		// An accepted range is the closed form; re-rendering parses to the same.
		again, err := parseRange(fmt.Sprintf("bytes=%d-%d", r.first, r.last))
		if err != nil || again != r {
			t.Fatalf("round trip of %+v: %+v %v", r, again, err)
		}
	})
}
