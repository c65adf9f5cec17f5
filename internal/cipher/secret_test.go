package cipher

import (
	"bytes"
	"encoding/base64"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// leaks returns the forms in which a key's bytes could show up in text:
// its base64url, standard base64 (padded or not), hex in both cases, the
// raw bytes, and fmt's own renderings of a byte array (decimal, %#v).
// Prefixes catch a form cut short by a width or precision.
func leaks(k Key) map[string]string {
	raw := k[:]
	forms := map[string]string{
		"base64url":  base64.RawURLEncoding.EncodeToString(raw),
		"base64":     base64.StdEncoding.EncodeToString(raw),
		"hex":        hex.EncodeToString(raw),
		"HEX":        strings.ToUpper(hex.EncodeToString(raw)),
		"raw":        string(raw),
		"decimal":    strings.Trim(fmt.Sprint([KeySize]byte(k)), "[]"),
		"go-syntax":  strings.TrimPrefix(fmt.Sprintf("%#v", [KeySize]byte(k)), "[32]uint8{"),
		"spaced hex": fmt.Sprintf("% x", raw),
	}
	out := map[string]string{}
	for name, s := range forms {
		out[name] = s
		out[name+" prefix"] = s[:12]
	}
	return out
}

func checkNoLeak(t *testing.T, k Key, what, text string) {
	t.Helper()
	for form, needle := range leaks(k) {
		if strings.Contains(text, needle) {
			t.Errorf("%s shows the key (%s): %q", what, form, text)
		}
	}
}

func TestKeyNeverPrints(t *testing.T) {
	generated, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Key{testKey, generated} {
		type config struct {
			Name string
			Key  Key
			Ptr  *Key
		}
		wrapped := fmt.Errorf("load key %v: %w", k, io.ErrUnexpectedEOF)
		values := map[string]any{
			"Key":          k,
			"*Key":         &k,
			"struct":       config{Name: "a", Key: k, Ptr: &k},
			"*struct":      &config{Key: k},
			"slice":        []Key{k, k},
			"map value":    map[string]Key{"k": k},
			"map key":      map[Key]int{k: 1},
			"array":        [2]Key{k},
			"interface":    []any{k},
			"error via %w": fmt.Errorf("outer: %w", wrapped),
		}
		verbs := []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "% x", "%d", "%o", "%b", "%c", "%U", "%08x", "%-50s", "%.5s", "%T %v"}
		for what, v := range values {
			for _, verb := range verbs {
				checkNoLeak(t, k, what+" "+verb, fmt.Sprintf(verb, v))
			}
			checkNoLeak(t, k, what+" Sprint", fmt.Sprint(v))
			checkNoLeak(t, k, what+" Sprintln", fmt.Sprintln(v, v))
		}
		if got := fmt.Sprintf("%v %x %#v %q", k, k, k, k); got != "[REDACTED] [REDACTED] [REDACTED] [REDACTED]" {
			t.Errorf("formatted key = %q", got)
		}
		if k.String() != redacted || k.GoString() != redacted {
			t.Errorf("String %q, GoString %q", k.String(), k.GoString())
		}

		// slog, text and JSON, as an attribute, in a group and in a struct.
		for name, h := range map[string]func(io.Writer) slog.Handler{
			"text": func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, nil) },
			"json": func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, nil) },
		} {
			var buf bytes.Buffer
			log := slog.New(h(&buf))
			log.Info("start", "key", k, slog.Group("g", "key", &k), "cfg", config{Key: k}, "keys", []Key{k})
			log.Info("err", "err", wrapped)
			checkNoLeak(t, k, "slog "+name, buf.String())
			if !strings.Contains(buf.String(), redacted) {
				t.Errorf("slog %s output does not show the redaction: %s", name, buf.String())
			}
		}

		// Encoders: JSON and text redact, gob refuses, decoding refuses.
		j, err := json.Marshal(map[string]any{"cfg": config{Key: k, Ptr: &k}, "byKey": map[Key]int{k: 1}})
		if err != nil || !strings.Contains(string(j), `"Key":"[REDACTED]"`) {
			t.Errorf("json = %s, %v", j, err)
		}
		checkNoLeak(t, k, "json", string(j))
		if err := gob.NewEncoder(io.Discard).Encode(config{Key: k}); err == nil {
			t.Error("gob encoded a key")
		}
		var back config
		for _, in := range []string{`{"Key":"` + k.Secret() + `"}`, `{"Key":[1,2,3]}`, `{"Key":"[REDACTED]"}`} {
			if err := json.Unmarshal([]byte(in), &back); err == nil {
				t.Errorf("json decoded a key from %s", in)
			}
		}
		if back.Key != (Key{}) {
			t.Error("a failed decode left key material")
		}
	}
}

// TestInternalTypesNeverPrint: the writers and readers this package
// returns hold the key only behind pointers, so formatting them (a %v in a
// debug log) does not show it.
func TestInternalTypesNeverPrint(t *testing.T) {
	k := testKey
	w1, err := EncryptV1(io.Discard, k, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := Encrypt(io.Discard, k, testIdentity)
	if err != nil {
		t.Fatal(err)
	}
	blob := encryptV2(t, k, testIdentity, plaintext(10))
	r2, err := Decrypt(bytes.NewReader(blob), k, testIdentity)
	if err != nil {
		t.Fatal(err)
	}
	type holder struct {
		R      io.Reader
		W1, W2 io.WriteCloser
		r      io.Reader // fmt cannot call Format here, only reflect
		w1, w2 io.WriteCloser
	}
	h := holder{r2, w1, w2, r2, w1, w2}
	for what, v := range map[string]any{"v1 writer": w1, "v2 writer": w2, "v2 reader": r2, "holder": h, "*holder": &h} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%x", "%X", "%s", "%q", "%d"} {
			checkNoLeak(t, k, what+" "+verb, fmt.Sprintf(verb, v))
		}
	}
}

func TestWeakKeys(t *testing.T) {
	pattern := func(p ...byte) Key {
		var k Key
		for i := range k {
			k[i] = p[i%len(p)]
		}
		return k
	}
	weak := []struct {
		name string
		key  Key
		msg  string
	}{
		{"all zero", Key{}, "all 32 bytes are equal"},
		{"all 0xff", pattern(0xff), "all 32 bytes are equal"},
		{"all 'k'", pattern('k'), "all 32 bytes are equal"},
		{"period 2", pattern(0xde, 0xad), "repeats a 2-byte pattern"},
		{"period 3", pattern(1, 2, 3), "repeats a 3-byte pattern"},
		{"period 4", pattern(0xde, 0xad, 0xbe, 0xef), "repeats a 4-byte pattern"},
		{"period 7", pattern(testKey[:7]...), "repeats a 7-byte pattern"},
		{"period 8", pattern(testKey[:8]...), "repeats a 8-byte pattern"},
	}
	for _, tt := range weak {
		text := tt.key.Secret()
		for _, in := range []string{text, text + "=\n", base64.StdEncoding.EncodeToString(tt.key[:])} {
			_, err := ParseKey(in)
			if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("%s: ParseKey(%q) = %v; want ErrInvalidKey: %s", tt.name, in, err, tt.msg)
				continue
			}
			checkNoLeak(t, tt.key, tt.name+" error", err.Error())
		}
	}
	if _, err := ParseKey(strings.Repeat("A", 43)); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("the all-zero key of 43 'A's: %v", err)
	}

	// Random keys, and patterns that only nearly repeat, are fine.
	good := []Key{testKey, pattern(testKey[:9]...), pattern(testKey[:16]...)}
	almost := pattern(0xde, 0xad)
	almost[31] = 0
	good = append(good, almost)
	for i := range 100 {
		k, err := GenerateKey()
		if err != nil {
			t.Fatalf("GenerateKey #%d: %v", i, err)
		}
		good = append(good, k)
	}
	for _, k := range good {
		if got, err := ParseKey(k.Secret()); err != nil || got != k {
			t.Errorf("ParseKey(%s) = %v", k.Secret(), err)
		}
	}

	// Key files: refused on load, never written.
	dir := t.TempDir()
	p := filepath.Join(dir, "zero.key")
	if err := os.WriteFile(p, []byte(strings.Repeat("A", 43)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(p); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("ReadKeyFile(zero key) = %v", err)
	}
	p = filepath.Join(dir, "weak.key")
	if err := WriteKeyFile(p, pattern(1, 2)); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("WriteKeyFile(weak key) = %v", err)
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a weak key file was created: %v", err)
	}
}
