package headref

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The vectors of docs/format-v3.md §14, asserted exactly.
const (
	vecBlob   = "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk"
	vecPatch  = "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUkBAwAFAA"
	vecCommit = "922f7cfdba94e42d2d0fbffbe84085fbb4f55a660cc6291099647bf86b42893a" // §12's commit id
	vecDigest = "ki98_bqU5C0tD7_76ECF-7T1WmYMxikQmWR7-GtCiTo"
)

func commitDigest(t *testing.T, h string) Digest {
	t.Helper()
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad hex %q", h)
	}
	return Digest(b)
}

func TestVectors(t *testing.T) {
	d := commitDigest(t, vecCommit)
	if got := d.String(); got != vecDigest {
		t.Fatalf("digest text %q, want %q", got, vecDigest)
	}
	for _, tc := range []struct {
		ref   Ref
		text  string
		patch bool
	}{
		{Bind(vecBlob, d), vecBlob + "." + vecDigest, false},
		{Bind(vecPatch, d), vecPatch + "." + vecDigest, true},
		{Bare(vecBlob), vecBlob, false},
		{Bare(vecPatch), vecPatch, true},
	} {
		if got := tc.ref.String(); got != tc.text {
			t.Errorf("String() = %q, want %q", got, tc.text)
		}
		got, err := Parse(tc.text)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.text, err)
		}
		if got != tc.ref {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.text, got, tc.ref)
		}
		if got.IsPatch() != tc.patch {
			t.Errorf("%q: IsPatch %v", tc.text, got.IsPatch())
		}
	}
	// The lengths the gas bench measures: the longest record is a patch
	// id with its digest.
	if n := len(Bind(vecBlob, d).String()); n != 87 {
		t.Errorf("blob reference: %d characters", n)
	}
	if n := len(Bind(vecPatch, d).String()); n != 94 {
		t.Errorf("patch reference: %d characters", n)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, s := range []string{
		"",
		".",
		"." + vecDigest,                 // no id
		vecBlob + ".",                   // an empty digest
		vecBlob + "." + vecDigest + "A", // 44 characters
		vecBlob + "." + vecDigest[:42],  // 42
		vecBlob + "." + vecDigest + "." + vecDigest, // two separators
		vecBlob + "." + vecDigest[:42] + "p",        // bits beyond the 32 bytes: not canonical
		vecBlob + "." + vecDigest[:42] + "=",
		vecBlob + "." + vecDigest[:20] + "\n" + vecDigest[21:],
		vecBlob + "." + vecDigest[:20] + "+" + vecDigest[21:], // standard alphabet
		vecBlob + " ",
		" " + vecBlob,
		vecBlob + "\n",
		vecBlob[:10] + "/" + vecBlob[11:],
		vecBlob[:10] + "é" + vecBlob[12:],
		strings.Repeat("A", MaxIDLen+1),
		strings.Repeat("A", MaxIDLen+1) + "." + vecDigest,
		vecBlob + ":" + vecDigest,
	} {
		if r, err := Parse(s); err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrInvalid", s, r, err)
		}
	}
	// The id rule is the format's: 1 to 128 characters of the alphabet.
	for _, s := range []string{"A", strings.Repeat("_", MaxIDLen), strings.Repeat("-", MaxIDLen) + "." + vecDigest} {
		if _, err := Parse(s); err != nil {
			t.Errorf("Parse(%q): %v", s, err)
		}
	}
}

func TestSame(t *testing.T) {
	d := commitDigest(t, vecCommit)
	var e Digest
	e[0] = 1
	bound, other, bare := Bind(vecBlob, d).String(), Bind(vecBlob, e).String(), vecBlob
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{bound, bound, true},
		{bound, bare, true},
		{bare, bound, true},
		{bound, other, false},
		{bound, Bind(vecPatch, d).String(), false},
		{"not a ref!", "not a ref!", true},
		{"not a ref!", bare, false},
		{"", bare, false},
	} {
		if got := Same(tc.a, tc.b); got != tc.want {
			t.Errorf("Same(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
	if ID(bound) != vecBlob || ID("x y") != "x y" {
		t.Errorf("ID: %q, %q", ID(bound), ID("x y"))
	}
}

// TestText: a Ref in JSON is its text form, and what does not parse is
// refused on the way in and out.
func TestText(t *testing.T) {
	type entry struct {
		Head Ref `json:"head"`
	}
	ref := Bind(vecPatch, commitDigest(t, vecCommit))
	b, err := json.Marshal(entry{ref})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"head":"` + vecPatch + "." + vecDigest + `"}`; string(b) != want {
		t.Fatalf("json %s, want %s", b, want)
	}
	var got entry
	if err := json.Unmarshal(b, &got); err != nil || got.Head != ref {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if err := json.Unmarshal([]byte(`{"head":"`+vecBlob+`"}`), &got); err != nil || got.Head != Bare(vecBlob) {
		t.Fatalf("bare: %+v, %v", got, err)
	}
	for _, bad := range []string{`{"head":""}`, `{"head":"` + vecBlob + `.x"}`, `{"head":3}`} {
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
	if _, err := json.Marshal(entry{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("the zero Ref marshals: %v", err)
	}
}

// FuzzParse (seed corpus: testdata/fuzz/FuzzParse): Parse never panics, accepts only text it prints back
// exactly (one text form per reference), and what it accepts is within
// the grammar's bounds.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q): %v does not match ErrInvalid", s, err)
			}
			return
		}
		if r.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, r.String())
		}
		if len(r.ID) == 0 || len(r.ID) > MaxIDLen || strings.ContainsRune(r.ID, Sep) {
			t.Fatalf("Parse(%q): id %q", s, r.ID)
		}
		if r2, err := Parse(r.String()); err != nil || r2 != r {
			t.Fatalf("round trip of %q: %+v, %v", s, r2, err)
		}
	})
}
