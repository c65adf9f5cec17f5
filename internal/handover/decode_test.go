package handover

import (
	"errors"
	"strings"
	"testing"
)

// TestDecodeStrict: every way a document can differ from the format is
// refused with ErrInvalid and a message naming what is wrong.
func TestDecodeStrict(t *testing.T) {
	good := string(mustEncode(t, fixture()))
	field := func(name, value string) string { // replaces one field's value
		i := strings.Index(good, `"`+name+`": `)
		if i < 0 {
			t.Fatalf("no field %s", name)
		}
		j := i + strings.Index(good[i:], "\n")
		end := strings.TrimSuffix(good[i:j], ",")
		return good[:i] + `"` + name + `": ` + value + good[i+len(end):]
	}
	drop := func(name string) string {
		i := strings.Index(good, `  "`+name+`": `)
		j := i + strings.Index(good[i:], "\n") + 1
		out := good[:i] + good[j:]
		if name == "seller" { // the last field: drop the comma before it
			out = strings.Replace(out, `Z",`, `Z"`, 1)
		}
		return out
	}
	for _, tc := range []struct {
		name, doc, msg string
	}{
		{"empty", "", "want one JSON object"},
		{"array", "[]", "want one JSON object"},
		{"null", "null", "want one JSON object"},
		{"trailing object", good + "{}", "trailing data"},
		{"trailing garbage", good + "x", "trailing data"},
		{"unknown field", strings.Replace(good, "{", `{"extra": 1,`, 1), `unknown field "extra"`},
		{"case variant", strings.Replace(good, `"agent"`, `"Agent"`, 1), `unknown field "Agent"`},
		{"duplicate", strings.Replace(good, "{", `{"agent": "other",`, 1), `"agent" appears twice`},
		{"nested", field("agent", `{"a": 1}`), "want a string, number or null"},
		{"nested array", field("token_id", `[7]`), "want a string, number or null"},
		{"missing agent", drop("agent"), `"agent" is missing`},
		{"missing token", drop("token_id"), `"token_id" is missing`},
		{"missing seller", drop("seller"), `"seller" is missing`},
		{"null string", field("head", "null"), `"head": want a string, not null`},
		{"format", field("format", `"hermesd/handover/v2"`), "format"},
		{"agent id", field("agent", `"Auditor"`), "agent"},
		{"agent number", field("agent", `7`), "json"},
		{"identity", field("identity", `"other.eth"`), "is not the ENS name"},
		{"ens not normalized", strings.ReplaceAll(good, "auditor.hermes.eth", "Auditor.hermes.eth"), "not a normalized ENS name"},
		{"ens one label", strings.ReplaceAll(good, "auditor.hermes.eth", "auditor"), "not a normalized ENS name"},
		{"ens empty", strings.ReplaceAll(good, `"auditor.hermes.eth"`, `""`), "identity is empty"},
		{"token negative", field("token_id", "-1"), "json"},
		{"token float", field("token_id", "7.0"), "json"},
		{"token exp", field("token_id", "7e0"), "json"},
		{"token string", field("token_id", `"7"`), "json"},
		{"token too big", field("token_id", "18446744073709551616"), "json"},
		{"head", field("head", `"a/b"`), "not a blob id"},
		{"head empty", field("head", `""`), "not a blob id"},
		{"bundle upper", field("bundle_hash", `"0xABCD0000000000000000000000000000000000000000000000000000000000EF"`), "lowercase"},
		{"bundle short", field("bundle_hash", `"0xabcd"`), "bundle_hash"},
		{"key short", field("key", `"AQID"`), "key: want 43"},
		{"key padded", field("key", `"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="`), "key: want 43"},
		{"key std alphabet", field("key", `"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHy+"`), "key: want 43"},
		{"key other", field("key", `"AAIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA"`), "does not belong to the key"},
		{"key zero", field("key", `"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"`), "does not belong"},
		{"key id upper", field("key_id", `"93296DDB349D06A6"`), "does not belong to the key"},
		{"created offset", field("created", `"2026-09-01T14:00:00+02:00"`), "UTC to the second"},
		{"created fraction", field("created", `"2026-09-01T12:00:00.5Z"`), "UTC to the second"},
		{"created date", field("created", `"2026-09-01"`), "UTC to the second"},
		{"seller short", field("seller", `"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeA"`), "seller"},
		{"seller no prefix", field("seller", `"5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"`), "seller"},
		{"seller bad checksum", field("seller", `"0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"`), "seller"},
		{"seller zero", field("seller", `"0x0000000000000000000000000000000000000000"`), "zero address"},
		{"invalid utf8", strings.Replace(good, "auditor", "audit\xffr", 1), "not UTF-8"},
		{"too large", good + strings.Repeat(" ", MaxSize), "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Decode: %v, want ErrInvalid mentioning %q", err, tc.msg)
			}
		})
	}
}

// TestDecodeAccepts the forms that carry the same content.
func TestDecodeAccepts(t *testing.T) {
	good := string(mustEncode(t, fixture()))
	for _, tc := range []struct{ name, doc string }{
		{"as encoded", good},
		{"compact", strings.Join(strings.Fields(good), "")},
		{"reordered", strings.Replace(strings.Replace(good, `"format": "hermesd/handover/v1",`, "", 1), "{", `{"format": "hermesd/handover/v1",`, 1)},
		{"seller lower case", strings.Replace(good, "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", 1)},
		{"trailing newline and spaces", good + "\n  \n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Decode([]byte(tc.doc))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			equal(t, h, fixture())
		})
	}
}
