package bundlelock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jsCanonical re-encodes one JSON value the way JavaScript's JSON.parse
// followed by JSON.stringify would: strings with only the escapes
// JSON.stringify emits, numbers in JavaScript's shortest form, and a
// duplicate object key keeping its first position but its last value. The
// result is compact. This makes our rewrite of a lock byte-identical to the
// reference runtime's.
func jsCanonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	var b bytes.Buffer
	v.encode(&b)
	return b.Bytes(), nil
}

const maxDepth = 256

type jsValue struct {
	kind   byte // 'o' object, 'a' array, 's' string, 'n' number, 'l' literal
	lit    string
	keys   []string
	fields map[string]*jsValue
	elems  []*jsValue
}

func decodeValue(dec *json.Decoder, depth int) (*jsValue, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := &jsValue{kind: 'o', fields: map[string]*jsValue{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				e, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if _, dup := v.fields[k]; !dup {
					v.keys = append(v.keys, k)
				}
				v.fields[k] = e
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		case '[':
			v := &jsValue{kind: 'a'}
			for dec.More() {
				e, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.elems = append(v.elems, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &jsValue{kind: 's', lit: t}, nil
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, err
		}
		return &jsValue{kind: 'n', lit: jsNumber(f)}, nil
	case bool:
		return &jsValue{kind: 'l', lit: strconv.FormatBool(t)}, nil
	case nil:
		return &jsValue{kind: 'l', lit: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

func (v *jsValue) encode(b *bytes.Buffer) {
	switch v.kind {
	case 'o':
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSString(b, k)
			b.WriteByte(':')
			v.fields[k].encode(b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, e := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			e.encode(b)
		}
		b.WriteByte(']')
	case 's':
		writeJSString(b, v.lit)
	default:
		b.WriteString(v.lit)
	}
}

// jsNumber formats f as JavaScript's Number.prototype.toString does, which
// is what JSON.stringify uses. Non-finite values become null, as there.
func jsNumber(f float64) string {
	switch {
	case math.IsInf(f, 0) || math.IsNaN(f):
		return "null"
	case f == 0:
		return "0"
	}
	a := math.Abs(f)
	if a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // e.g. 1.5e+21, 1e-07
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[0]
	exp = strings.TrimLeft(exp[1:], "0")
	return mant + "e" + string(sign) + exp
}

// writeJSString writes s with JSON.stringify's escaping: quote, backslash
// and control characters only; everything else literally.
func writeJSString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r)
			i += size
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}
