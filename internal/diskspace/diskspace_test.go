package diskspace

import (
	"errors"
	"math"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	if err := Check(dir, 1); err != nil {
		t.Fatalf("one byte: %v", err)
	}
	err := Check(dir, math.MaxInt64)
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("an exabyte: %v", err)
	}
	if err := Check(dir+"/missing", 1); err == nil || errors.Is(err, ErrNoSpace) {
		t.Fatalf("missing dir: %v", err)
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.000 KiB",
		1<<30 - 1: "1024.000 MiB", 1 << 30: "1.000 GiB", 1<<30 + 1<<20: "1.001 GiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}
