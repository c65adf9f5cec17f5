package seal

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// BCS (Binary Canonical Serialization) for the few fixed structures Seal and
// Sui use. The reader is strict: lengths must be canonical ULEB128 that fit
// in what is left of the input, and booleans and option tags must be 0 or 1.

// errShort is returned when the input ends inside a value.
var errShort = errors.New("unexpected end of input")

// bcsWriter appends BCS values to a byte slice.
type bcsWriter struct{ b []byte }

func (w *bcsWriter) u8(v uint8)     { w.b = append(w.b, v) }
func (w *bcsWriter) raw(p []byte)   { w.b = append(w.b, p...) }
func (w *bcsWriter) bytes(p []byte) { w.uleb(uint64(len(p))); w.b = append(w.b, p...) }
func (w *bcsWriter) str(s string)   { w.uleb(uint64(len(s))); w.b = append(w.b, s...) }

func (w *bcsWriter) u16(v uint16) { w.b = binary.LittleEndian.AppendUint16(w.b, v) }
func (w *bcsWriter) u64(v uint64) { w.b = binary.LittleEndian.AppendUint64(w.b, v) }

func (w *bcsWriter) boolean(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

func (w *bcsWriter) uleb(v uint64) {
	for v >= 0x80 {
		w.b = append(w.b, byte(v)|0x80)
		v >>= 7
	}
	w.b = append(w.b, byte(v))
}

// ulebLen is the encoded size of v.
func ulebLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// bcsReader reads BCS values with a sticky error: after the first failure
// every read returns zero values and err keeps the first cause.
type bcsReader struct {
	b   []byte
	off int
	err error
}

func (r *bcsReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("offset %d: "+format, append([]any{r.off}, args...)...)
	}
}

func (r *bcsReader) remaining() int { return len(r.b) - r.off }

func (r *bcsReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.remaining() {
		r.fail("%w (need %d bytes, have %d)", errShort, n, r.remaining())
		return nil
	}
	p := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return p
}

func (r *bcsReader) u8() uint8 {
	p := r.take(1)
	if p == nil {
		return 0
	}
	return p[0]
}

func (r *bcsReader) u16() uint16 {
	p := r.take(2)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint16(p)
}

func (r *bcsReader) u64() uint64 {
	p := r.take(8)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(p)
}

func (r *bcsReader) boolean() bool {
	switch r.u8() {
	case 0:
		return false
	case 1:
		return true
	default:
		r.fail("boolean is not 0 or 1")
		return false
	}
}

// uleb reads a canonical ULEB128 value of at most 32 bits, which is what BCS
// allows for lengths and enum tags.
func (r *bcsReader) uleb() uint64 {
	var v uint64
	for i := 0; i < 5; i++ {
		p := r.take(1)
		if p == nil {
			return 0
		}
		c := p[0]
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if i > 0 && c == 0 {
				r.fail("non-canonical ULEB128")
				return 0
			}
			if v > 0xffffffff {
				r.fail("ULEB128 value exceeds 32 bits")
				return 0
			}
			return v
		}
	}
	r.fail("ULEB128 longer than 5 bytes")
	return 0
}

// length reads a vector length and checks that at least n*elem bytes remain,
// so a hostile length never drives an allocation.
func (r *bcsReader) length(elem int) int {
	n := r.uleb()
	if r.err != nil {
		return 0
	}
	if elem > 0 && n > uint64(r.remaining()/elem) {
		r.fail("%w: length %d exceeds the remaining %d bytes", errShort, n, r.remaining())
		return 0
	}
	return int(n)
}

// bytes reads a vector<u8>; the result aliases the input.
func (r *bcsReader) bytes() []byte {
	n := r.length(1)
	if r.err != nil {
		return nil
	}
	return r.take(n)
}

// option reads an Option tag.
func (r *bcsReader) option() bool {
	switch r.u8() {
	case 0:
		return false
	case 1:
		return true
	default:
		r.fail("option tag is not 0 or 1")
		return false
	}
}

// finish reports the sticky error, or trailing bytes.
func (r *bcsReader) finish() error {
	if r.err != nil {
		return r.err
	}
	if r.off != len(r.b) {
		return fmt.Errorf("%d trailing bytes after offset %d", len(r.b)-r.off, r.off)
	}
	return nil
}
