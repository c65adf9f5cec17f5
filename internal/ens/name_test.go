package ens

import (
	"errors"
	"strings"
	"testing"
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
