package walrustest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Comparing a server's answer with a documented one: the same JSON
// structure (keys, types, array lengths), the same strings where the
// service's are fixed (encodingType, error statuses and reasons,
// identifiers, tags), ids of the right shape, and the same id wherever
// the documented answer repeats one. Numbers are compared by type only:
// what they must be follows from the request, and each case checks that
// itself.

var idEncoding = base64.RawURLEncoding.Strict()

// isBlobID reports whether s is a blob id: 43 characters of URL-safe
// base64 without padding, 32 bytes.
func isBlobID(s string) bool {
	b, err := idEncoding.DecodeString(s)
	return len(s) == 43 && err == nil && len(b) == 32
}

// patchQuilt returns the quilt id a patch id begins with: a patch id is
// URL-safe base64 without padding of the quilt's 32-byte blob id and
// more bytes (the patch's internal id).
func patchQuilt(s string) (string, bool) {
	b, err := idEncoding.DecodeString(s)
	if len(s) <= 43 || err != nil || len(b) <= 32 || len(b) > 64 {
		return "", false
	}
	return idEncoding.EncodeToString(b[:32]), true
}

var (
	suiObjectID = regexp.MustCompile(`^0x[0-9a-f]{64}$`)
	suiDigest   = regexp.MustCompile(`^[1-9A-HJ-NP-Za-km-z]{32,44}$`)
)

// binder maps the ids of documented answers to the ids a live server
// gave for the same things. An id not yet bound binds on first sight
// (after a check of its shape); after that the server must repeat it.
type binder map[string]string

// match checks that got is what the documented id doc stands for.
func (b binder) match(doc, got string) error {
	if live, ok := b[doc]; ok {
		if got != live {
			return fmt.Errorf("%s, want %s (the id this server gave before)", got, live)
		}
		return nil
	}
	if isBlobID(doc) {
		if !isBlobID(got) {
			return fmt.Errorf("%q is not a blob id (43 characters of URL-safe base64, 32 bytes)", got)
		}
		b[doc] = got
		return nil
	}
	docQuilt, ok := patchQuilt(doc)
	if !ok {
		// Not an id of the Walrus kind (the OpenAPI's older patch ids
		// are, too): compared exactly.
		if got != doc {
			return fmt.Errorf("%q, want %q", got, doc)
		}
		return nil
	}
	gotQuilt, ok := patchQuilt(got)
	if !ok {
		return fmt.Errorf("%q is not a quilt patch id (a quilt id followed by the patch's bytes)", got)
	}
	if err := b.match(docQuilt, gotQuilt); err != nil {
		return fmt.Errorf("patch id %s is not of the quilt: %w", got, err)
	}
	for d, l := range b {
		if l == got && d != doc {
			return fmt.Errorf("patch id %s again, given before for another patch", got)
		}
	}
	b[doc] = got
	return nil
}

// idKeys are the JSON keys whose values are blob or patch ids.
var idKeys = []string{"blobId", "blob_id", "quiltPatchId", "patch_id"}

// shape holds what a case says about comparing one answer.
type shape struct {
	// optional keys may be missing from, or extra in, the server's
	// answer (sharedBlobObject; a stored patch's range, which the
	// service sends and the docs' example lacks).
	optional []string
	// vary are string keys whose values differ between answers
	// (messages with request-specific parts).
	vary []string
}

// compareJSON compares a server's JSON answer with the documented one.
func compareJSON(doc, got []byte, sh shape, ids binder) []string {
	var d, g any
	if err := decodeJSON(doc, &d); err != nil {
		return []string{"documented answer: " + err.Error()}
	}
	if err := decodeJSON(got, &g); err != nil {
		return []string{fmt.Sprintf("answer is not JSON: %v: %.200q", err, got)}
	}
	var diffs []string
	compareValue("$", "", d, g, sh, ids, &diffs)
	return diffs
}

func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// compareValue compares got with the documented doc at path (key is the
// object key that holds them).
func compareValue(path, key string, doc, got any, sh shape, ids binder, diffs *[]string) {
	fail := func(format string, args ...any) {
		*diffs = append(*diffs, path+": "+fmt.Sprintf(format, args...))
	}
	if doc == nil {
		// A documented null stands for a nullable field (certifiedEpoch
		// in the docs' quilt example): any value is its shape.
		return
	}
	if jsonType(doc) != jsonType(got) {
		fail("%s, want %s like %s", jsonType(got), jsonType(doc), clip(doc))
		return
	}
	switch d := doc.(type) {
	case map[string]any:
		g := got.(map[string]any)
		for _, k := range sortedKeys(d) {
			if _, ok := g[k]; !ok {
				if !slices.Contains(sh.optional, k) {
					fail("missing %q", k)
				}
				continue
			}
			compareValue(path+"."+k, k, d[k], g[k], sh, ids, diffs)
		}
		for _, k := range sortedKeys(g) {
			if _, ok := d[k]; !ok && !slices.Contains(sh.optional, k) {
				fail("unexpected %q (the service does not send it)", k)
			}
		}
	case []any:
		g := got.([]any)
		if len(g) != len(d) {
			fail("%d elements, want %d", len(g), len(d))
			return
		}
		for i := range d {
			compareValue(fmt.Sprintf("%s[%d]", path, i), key, d[i], g[i], sh, ids, diffs)
		}
	case string:
		g := got.(string)
		switch {
		case slices.Contains(idKeys, key):
			if err := ids.match(d, g); err != nil {
				fail("%v", err)
			}
		case key == "id" || key == "object" || key == "sharedBlobObject":
			if !suiObjectID.MatchString(g) {
				fail("%q is not a Sui object id (0x and 64 hex digits)", g)
			}
		case key == "txDigest":
			if !suiDigest.MatchString(g) {
				fail("%q is not a Sui transaction digest (base58 of 32 bytes)", g)
			}
		case slices.Contains(sh.vary, key):
		default:
			if g != d {
				fail("%q, want %q", g, d)
			}
		}
	case json.Number:
		if key == "code" && got.(json.Number) != d {
			fail("%s, want %s", got, d)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func clip(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}

// lookup returns the value at a path of keys and indexes in a decoded
// JSON document (nil when there is none).
func lookup(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// number is lookup for a non-negative integer (-1 when there is none).
func number(v any, path ...any) int64 {
	n, ok := lookup(v, path...).(json.Number)
	if !ok {
		return -1
	}
	i, err := n.Int64()
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// str is lookup for a string ("" when there is none).
func str(v any, path ...any) string {
	s, _ := lookup(v, path...).(string)
	return s
}

// compareText compares a plain-text answer: exactly, or from the start
// up to prefix's length when the rest names the request.
func compareText(doc, got []byte, prefix string) []string {
	if prefix != "" {
		if !strings.HasPrefix(string(got), prefix) {
			return []string{fmt.Sprintf("text %.200q does not start %q", got, prefix)}
		}
		return nil
	}
	if !bytes.Equal(doc, got) {
		return []string{fmt.Sprintf("text %.200q, want %q", got, doc)}
	}
	return nil
}
