package main

import (
	"bytes"
	"strings"
	"testing"
)

// The gas figures come out, and the goal holds: an agent whose record
// lives on the L2 costs no L1 gas per update (run exits with an error
// otherwise). A bare blob id's update (the reference runtime's record)
// costs ledger.NaiveWriteGas; the longest record hermesd writes, a patch
// id and its head's digest, is measured beside it.
func TestGasFigures(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-dir", t.TempDir()}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"record on L1", "record on the L2", "47819", "(goal 0): PASS", "patch id + head digest (v3)", "53629"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}
