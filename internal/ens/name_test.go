package ens

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
)

func TestNormalizeAndNode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"agent.eth", "agent.eth"},
		{"Agent.ETH", "agent.eth"},
		{"Auditor.Example.eth", "auditor.example.eth"},
		{"ﬁ.eth", "fi.eth"},
		{"Ⅻ.eth", "xii.eth"},
		{"ß.eth", "ß.eth"},
		{"_agent.eth", "_agent.eth"},
		{"💩.eth", "💩.eth"},
		{"eth", "eth"},
	} {
		got, err := Normalize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	// Namehash vectors from EIP-137.
	for name, want := range map[string]string{
		"eth":     "0x93cdeb708b7545dc668eb9280176169d1c33cfd8ed6f04690a0bcc88a93fc4ae",
		"foo.eth": "0xde9b09fd7c5f901e23a3f19fecc54828e9c848539801e86591bd9801b019f84f",
	} {
		got, err := Node(name)
		if err != nil || got != common.HexToHash(want) {
			t.Errorf("Node(%s) = %s, %v; want %s", name, got, err, want)
		}
	}
	if nameHash("") != (common.Hash{}) {
		t.Error("namehash of the root is not zero")
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"agent.eth", "Agent.ETH", "a..eth", "\u0430pple.eth", "xn--ls8h.eth", "a_b.eth",
		"💩.eth", "ﬁ.eth", "test\u200d.eth", "\u0301a.eth", "", ".", "eth.", "\xff.eth",
		"👨‍👩‍👧.eth", "Ⅻ.eth", "ß.eth", "_a.eth",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		norm, err := Normalize(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("Normalize(%q): error %v does not wrap ErrInvalidName", name, err)
			}
			if _, nerr := Node(name); nerr == nil {
				t.Fatalf("Node(%q) accepted a name Normalize rejects", name)
			}
			return
		}
		if norm == "" || !utf8.ValidString(norm) || strings.Contains(norm, "..") {
			t.Fatalf("Normalize(%q) = %q", name, norm)
		}
		again, err := Normalize(norm)
		if err != nil || again != norm {
			t.Fatalf("not idempotent: %q → %q → %q, %v", name, norm, again, err)
		}
		a, _ := Node(name)
		if b := nameHash(norm); a != b {
			t.Fatalf("Node(%q) != nameHash(%q)", name, norm)
		}
	})
}

// TestInvalidNameReadable: an invalid name is shown as it reads, with
// only what does not show escaped ({U+200E}, {0xFF}) and a note saying
// so; ensip15's invisible LEFT-TO-RIGHT MARKs are gone.
func TestInvalidNameReadable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		want    []string
		note    bool
		notWant []string
	}{
		{"a_b\u200e.eth", []string{`invalid name "a_b{U+200E}.eth"`, `invalid label "a_b{U+200E}"`, "disallowed character: {U+200E}"}, true, nil},
		{"Ab_c.eth", []string{`invalid name "Ab_c.eth"`, `invalid label "Ab_c"`, "underscore allowed only at start"}, false, nil},
		{"a\xffb.eth", []string{`invalid name "a{0xFF}b.eth"`}, true, nil},
		{"a\tb.eth", []string{`"a{U+0009}b.eth"`}, true, nil},
		{"\u0430b.eth", []string{`invalid name "аb.eth"`, "illegal mixture: Cyrillic + Latin"}, false, []string{"{U+0430}"}},
		{"a!b.eth", []string{`invalid name "a!b.eth"`, `disallowed character: "!" {U+0021}`}, false, nil},
	} {
		_, err := Normalize(tc.name)
		if !errors.Is(err, ErrInvalidName) {
			t.Fatalf("%q: %v", tc.name, err)
		}
		msg := err.Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%q: %q lacks %q", tc.name, msg, w)
			}
		}
		for _, w := range append(tc.notWant, "\u200e", `\u`, `\x`) {
			if strings.Contains(msg, w) {
				t.Errorf("%q: %q holds %q", tc.name, msg, w)
			}
		}
		if note := strings.Contains(msg, "characters that do not show are written {U+XXXX}"); note != tc.note {
			t.Errorf("%q: note %v, want %v: %q", tc.name, note, tc.note, msg)
		}
		for _, r := range msg {
			if r != ' ' && (!unicode.IsGraphic(r) || unicode.IsSpace(r)) {
				t.Errorf("%q: %q holds %U, which does not show", tc.name, msg, r)
			}
		}
	}
}
