package cipher

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// knownError reports whether err is one of the package's documented errors,
// so that no raw library error reaches callers.
func knownError(err error) bool {
	for _, e := range []error{ErrUnknownFormat, ErrUnsupportedVersion, ErrTooLarge, ErrAuth,
		ErrAuthFirstSegment, ErrCorrupted, ErrTruncated, ErrTrailingData} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// segmentsFor returns how many v2 segments hold n plaintext bytes.
func segmentsFor(n int) int {
	if n <= v2FirstPlaintext {
		return 1
	}
	return 1 + (n-v2FirstPlaintext+v2Plaintext-1)/v2Plaintext
}

func fuzzSeeds(f *testing.F) {
	f.Add([]byte{})
	for _, size := range []int{0, 1, 100} {
		blob := encryptV2(f, testKey, testIdentity, plaintext(size))
		f.Add(blob)
		f.Add(blob[:len(blob)-1])
		f.Add(blob[:50])
		env, err := SealV1(testKey, plaintext(size))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(env)
		f.Add(env[:len(env)-1])
	}
}

// FuzzDecryptV2 feeds arbitrary blobs to Decrypt under a fixed key and
// identity. It must never panic, must report only documented errors, must
// never return plaintext of a segment that failed, and a success must have
// the exact shape of a genuine blob.
func FuzzDecryptV2(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, src := range sources {
			r, err := Decrypt(src.open(data), testKey, testIdentity, WithMaxV1Size(1<<20))
			var out []byte
			if err == nil {
				out, err = io.ReadAll(r)
			}
			if err != nil {
				if !knownError(err) {
					t.Fatalf("%s: undocumented error %v", src.name, err)
				}
				var ae *AuthError
				boundary := 0
				if errors.As(err, &ae) && ae.Segment > 0 {
					boundary = int(plaintextEnd(ae.Segment - 1))
				}
				if len(out) != boundary {
					t.Fatalf("%s: %d plaintext bytes before %v", src.name, len(out), err)
				}
				continue
			}
			switch format, _ := Detect(data[:min(len(data), DetectSize)]); format {
			case FormatV2:
				if want := len(data) - 8 - v2HeaderLen - v2TagSize*segmentsFor(len(out)); len(out) != want {
					t.Fatalf("v2 success with %d plaintext bytes from a %d-byte blob", len(out), len(data))
				}
			case FormatV1:
				if len(out) != len(data)-V1Overhead {
					t.Fatalf("v1 success with %d plaintext bytes from a %d-byte envelope", len(out), len(data))
				}
			default:
				t.Fatalf("success on a blob of format %v", format)
			}
		}
	})
}

// FuzzDecryptV1 checks the whole-buffer v1 path: OpenV1 and Decrypt with a
// small cap agree, and success has the envelope's exact shape.
func FuzzDecryptV1(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 4096
		pt, err := OpenV1(testKey, data)
		if err != nil {
			if !knownError(err) {
				t.Fatalf("OpenV1: undocumented error %v", err)
			}
		} else if len(pt) != len(data)-V1Overhead || !bytes.HasPrefix(data, []byte{1, 0, 0, 0}) {
			t.Fatalf("OpenV1 success with %d bytes from a %d-byte envelope", len(pt), len(data))
		}
		r, derr := Decrypt(bytes.NewReader(data), testKey, testIdentity, WithMaxV1Size(limit))
		if f, _ := Detect(data[:min(len(data), DetectSize)]); f != FormatV1 {
			return
		}
		switch {
		case len(data) > limit+V1Overhead:
			if !errors.Is(derr, ErrTooLarge) {
				t.Fatalf("Decrypt over the cap: %v", derr)
			}
		case (err == nil) != (derr == nil):
			t.Fatalf("OpenV1 %v, Decrypt %v", err, derr)
		case derr == nil:
			got, _ := io.ReadAll(r)
			if !bytes.Equal(got, pt) {
				t.Fatal("OpenV1 and Decrypt disagree")
			}
		}
	})
}

// FuzzParseKey: no panic, errors wrap ErrInvalidKey and do not repeat the
// input, and every accepted key round-trips through Secret.
func FuzzParseKey(f *testing.F) {
	f.Add(testKey.Secret())
	f.Add(testKey.Secret() + "=\n")
	f.Add(strings.NewReplacer("-", "+", "_", "/").Replace(testKey.Secret()))
	f.Add("AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("")
	f.Add("not a key!")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("ParseKey(%q): %v does not wrap ErrInvalidKey", s, err)
			}
			if in := strings.TrimSpace(s); len(in) >= 16 && strings.Contains(err.Error(), in) {
				t.Fatalf("error %q repeats the input", err)
			}
			return
		}
		text := k.Secret()
		if len(text) != 43 {
			t.Fatalf("Secret() is %d chars", len(text))
		}
		if k2, err := ParseKey(text); err != nil || k2 != k {
			t.Fatalf("round trip of %q: %v", s, err)
		}
	})
}

// TestFuzzCorpusValid checks that the committed valid seeds really are valid,
// so the fuzzers start from inputs that reach the success path.
func TestFuzzCorpusValid(t *testing.T) {
	for _, name := range []string{"v2-small", "v2-empty-plaintext", "v1-small", "v1-empty-plaintext"} {
		raw, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzDecryptV2", name))
		if err != nil {
			t.Fatal(err)
		}
		lit, ok := strings.CutPrefix(string(raw), "go test fuzz v1\n[]byte(")
		lit, ok2 := strings.CutSuffix(lit, ")\n")
		if !ok || !ok2 {
			t.Fatalf("%s: not a go test fuzz v1 []byte file", name)
		}
		blob, err := strconv.Unquote(lit)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := decryptAll(strings.NewReader(blob), testKey, testIdentity); err != nil {
			t.Errorf("%s does not decrypt: %v", name, err)
		}
	}
}
