package handover

import (
	"bytes"
	"errors"
	"testing"

	"filippo.io/age"
)

// fuzzIdentity is a fixed, test-only identity: the seed corpus of
// FuzzOpen (testdata/fuzz/FuzzOpen) holds handovers sealed to it.
const fuzzIdentity = "AGE-SECRET-KEY-1KZGKXSR9WQ5E9LRMLMJ7F069A6AQL27X7AK237530Q9CH06AZMHQZCV6S3"

// FuzzDecode: the parser never panics, and what it accepts is valid and
// re-encodes to a document that decodes to the same handover.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("refusal does not match ErrInvalid: %v", err)
			}
			return
		}
		if err := h.Validate(); err != nil {
			t.Fatalf("accepted an invalid handover: %v", err)
		}
		enc, err := h.Encode()
		if err != nil {
			t.Fatalf("accepted handover does not encode: %v", err)
		}
		h2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		enc2, _ := h2.Encode()
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoding is not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzOpen: whole files, age framing included, with a fixed identity.
// Every refusal is one of the package's errors.
func FuzzOpen(f *testing.F) {
	id, err := age.ParseX25519Identity(fuzzIdentity)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Open(bytes.NewReader(b), id)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrWrongIdentity) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unclassified refusal: %v", err)
			}
			return
		}
		if err := h.Validate(); err != nil {
			t.Fatalf("opened an invalid handover: %v", err)
		}
	})
}
