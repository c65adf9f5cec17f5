package receipts

import "errors"

// A small JSON validator. encoding/json's scanner (behind json.Valid and
// json.Compact) runs at roughly 100 MB/s, which dominated importing and
// opening large logs; receipts are almost always compact already, so we
// validate here and call json.Compact only when there is whitespace to
// remove. FuzzParse checks this validator against json.Valid.

// maxJSONDepth matches encoding/json's nesting limit.
const maxJSONDepth = 10000

var errJSONSyntax = errors.New("invalid JSON")

type jsonScanner struct {
	b     []byte
	i     int
	space bool // insignificant whitespace seen
	depth int
	// The spans of the top-level object's keys and values, recorded in
	// the same pass so Parse need not scan again. The first few live in
	// the scanner itself, so a scanner on the stack does not allocate.
	record bool
	mem    [24]member
	n      int
	more   []member
}

// member locates one top-level key (with quotes) and its value in b.
type member struct{ k0, k1, v0, v1 int }

// validJSON reports whether b is exactly one JSON value (surrounding
// whitespace allowed), and whether it contains insignificant whitespace.
// It does not check UTF-8.
func validJSON(b []byte) (ok, hasSpace bool) {
	var s jsonScanner
	return s.scan(b)
}

// scan validates b as validJSON does, recording top-level members when
// s.record is set.
func (s *jsonScanner) scan(b []byte) (ok, hasSpace bool) {
	s.b, s.i, s.space, s.depth, s.n, s.more = b, 0, false, 0, 0, s.more[:0]
	s.ws()
	if !s.value() {
		return false, false
	}
	s.ws()
	return s.i == len(s.b), s.space
}

// members returns the recorded members; the slice may share s's memory.
func (s *jsonScanner) members() []member {
	if s.n <= len(s.mem) {
		return s.mem[:s.n]
	}
	return append(s.mem[:], s.more...)
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.space = true
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) value() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == '"':
		return s.str()
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	}
	return false
}

func (s *jsonScanner) lit(w string) bool {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return false
	}
	s.i += len(w)
	return true
}

func (s *jsonScanner) object() bool {
	if s.depth++; s.depth > maxJSONDepth {
		return false
	}
	s.i++ // '{'
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		k0 := s.i
		if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
			return false
		}
		k1 := s.i
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		v0 := s.i
		if !s.value() {
			return false
		}
		if s.depth == 1 && s.record {
			if s.n < len(s.mem) {
				s.mem[s.n] = member{k0, k1, v0, s.i}
			} else {
				s.more = append(s.more, member{k0, k1, v0, s.i})
			}
			s.n++
		}
		if end, ok := s.after('}'); !ok || end {
			return ok
		}
	}
}

func (s *jsonScanner) array() bool {
	if s.depth++; s.depth > maxJSONDepth {
		return false
	}
	s.i++ // '['
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return true
	}
	for {
		if !s.value() {
			return false
		}
		if end, ok := s.after(']'); !ok || end {
			return ok
		}
	}
}

// after consumes what follows a member or element: a comma (more to
// come) or the closing bracket (end). ok is false on anything else.
func (s *jsonScanner) after(closing byte) (end, ok bool) {
	s.ws()
	if s.i >= len(s.b) {
		return false, false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		s.ws()
		return false, true
	case closing:
		s.i++
		s.depth--
		return true, true
	}
	return false, false
}

// str scans a string literal starting at its opening quote.
func (s *jsonScanner) str() bool {
	b := s.b
	i := s.i + 1
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return true
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return false
				}
				i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			i++
		}
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func (s *jsonScanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() bool {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		return false
	}
	if s.b[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}
