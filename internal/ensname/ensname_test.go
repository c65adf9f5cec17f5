package ensname

import (
	"errors"
	"runtime"
	"testing"
)

// TestNormalizerIsNotKept: the ENSIP-15 tables (~7 MB) go with the next
// collections once no normalisation runs; names normalised before are
// remembered, and a new name builds them again.
func TestNormalizerIsNotKept(t *testing.T) {
	for _, c := range []struct{ in, want string }{{"Agent.ETH", "agent.eth"}, {"agent.eth", "agent.eth"}} {
		if got, err := Normalize(c.in); err != nil || got != c.want {
			t.Fatalf("Normalize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := Normalize("a..eth"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an empty label: %v", err)
	}
	if _, ok := remembered("a..eth"); ok {
		t.Fatal("a rejected name was remembered")
	}
	runtime.GC()
	runtime.GC()
	if normRef.Value() != nil {
		t.Fatal("the ENSIP-15 tables are still held after two collections")
	}
	if got, ok := remembered("Agent.ETH"); !ok || got != "agent.eth" {
		t.Fatalf("remembered(Agent.ETH) = %q, %v", got, ok)
	}
	if got, err := Normalize("Other.Eth"); err != nil || got != "other.eth" {
		t.Fatalf("a new name after the tables went: %q, %v", got, err)
	}
}

// TestMemoBounded: names past memoMax are normalised, not remembered.
func TestMemoBounded(t *testing.T) {
	memoMu.Lock()
	saved := memo
	memo = map[string]string{}
	for i := range memoMax {
		memo[string(rune('a'+i%26))+string(rune(i))] = "x"
	}
	memoMu.Unlock()
	defer func() { memoMu.Lock(); memo = saved; memoMu.Unlock() }()
	if got, err := Normalize("Late.eth"); err != nil || got != "late.eth" {
		t.Fatalf("Normalize with a full memo: %q, %v", got, err)
	}
	if _, ok := remembered("Late.eth"); ok {
		t.Fatal("a full memo took another name")
	}
}
