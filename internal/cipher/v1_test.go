package cipher

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestV1RoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, 15, 16, 17, 1000, 1 << 20} {
		pt := plaintext(size)
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			env, err := SealV1(testKey, pt)
			if err != nil {
				t.Fatal(err)
			}
			if len(env) != size+32 || !bytes.HasPrefix(env, []byte{1, 0, 0, 0}) {
				t.Fatalf("envelope is %d bytes starting % x", len(env), env[:4])
			}
			got, err := OpenV1(testKey, env)
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("OpenV1 = %d bytes, %v", len(got), err)
			}

			// The streaming writer produces the same layout, in one Write.
			var buf bytes.Buffer
			w, err := EncryptV1(&buf, testKey, int64(size))
			if err != nil {
				t.Fatal(err)
			}
			for rest := pt; len(rest) > 0; rest = rest[min(len(rest), 777):] {
				if _, err := w.Write(rest[:min(len(rest), 777)]); err != nil {
					t.Fatal(err)
				}
			}
			if buf.Len() != 0 {
				t.Fatal("EncryptV1 wrote before Close")
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err == nil {
				t.Error("second Close succeeded")
			}
			r, err := Decrypt(onlyReader{&buf}, testKey, "ignored", WithMaxV1Size(int64(size)))
			if err != nil {
				t.Fatal(err)
			}
			got, err = io.ReadAll(r)
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("Decrypt = %d bytes, %v", len(got), err)
			}
		})
	}
}

func TestV1Failures(t *testing.T) {
	pt := plaintext(5000)
	env, err := SealV1(testKey, pt)
	if err != nil {
		t.Fatal(err)
	}
	other := testKey
	other[3] ^= 8
	if _, err := OpenV1(other, env); !errors.Is(err, ErrAuth) {
		t.Errorf("wrong key: %v", err)
	}
	if _, err := Decrypt(bytes.NewReader(env), other, testIdentity); !errors.Is(err, ErrAuth) {
		t.Errorf("Decrypt, wrong key: %v", err)
	}
	for _, at := range []int{4, 15, 16, 2000, len(env) - 16, len(env) - 1} {
		bad := bytes.Clone(env)
		bad[at] ^= 0x80
		if _, err := OpenV1(testKey, bad); !errors.Is(err, ErrAuth) {
			t.Errorf("flip at %d: %v", at, err)
		}
		if _, err := Decrypt(bytes.NewReader(bad), testKey, testIdentity); !errors.Is(err, ErrAuth) {
			t.Errorf("Decrypt, flip at %d: %v", at, err)
		}
	}
	for _, n := range []int{len(env) - 1, 32} {
		if _, err := OpenV1(testKey, env[:n]); !errors.Is(err, ErrAuth) {
			t.Errorf("cut to %d: %v", n, err)
		}
	}
	for _, n := range []int{31, 16, 5, 4} {
		if _, err := OpenV1(testKey, env[:n]); !errors.Is(err, ErrTruncated) {
			t.Errorf("cut to %d: %v", n, err)
		}
	}
	if _, err := OpenV1(testKey, append(bytes.Clone(env), 0)); !errors.Is(err, ErrAuth) {
		t.Errorf("appended byte: %v", err)
	}

	// The version must be 1, which the reference never checks.
	for _, v := range [][]byte{{2, 0, 0, 0}, {1, 0, 0, 1}, {0, 0, 0, 1}} {
		bad := append(bytes.Clone(v), env[4:]...)
		if _, err := OpenV1(testKey, bad); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("version % x: %v", v, err)
		}
	}
	v2 := encryptV2(t, testKey, testIdentity, []byte("x"))
	if _, err := OpenV1(testKey, v2); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("v2 blob: %v", err)
	}
}

func TestV1TooLarge(t *testing.T) {
	env, err := SealV1(testKey, plaintext(1000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decrypt(bytes.NewReader(env), testKey, testIdentity, WithMaxV1Size(999)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Decrypt over the cap: %v", err)
	}
	if _, err := Decrypt(bytes.NewReader(env), testKey, testIdentity, WithMaxV1Size(1000)); err != nil {
		t.Errorf("Decrypt at the cap: %v", err)
	}
	// The reader stops one byte past the cap instead of reading everything.
	huge := io.MultiReader(bytes.NewReader(env), neverEnding{})
	counter := &countingReader{r: huge}
	if _, err := Decrypt(counter, testKey, testIdentity, WithMaxV1Size(1<<20)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("endless v1: %v", err)
	}
	if counter.n > 1<<20+32+1 {
		t.Errorf("read %d bytes for a %d-byte cap", counter.n, 1<<20)
	}

	var buf bytes.Buffer
	w, err := EncryptV1(&buf, testKey, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	_, err = w.Write([]byte{1})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("write past the cap: %v", err)
	}
	if err2 := w.Close(); err2 != err {
		t.Errorf("Close after ErrTooLarge = %v, want the sticky error", err2)
	}
	if buf.Len() != 0 {
		t.Error("a failed writer wrote an envelope")
	}
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) { return len(p), nil }
