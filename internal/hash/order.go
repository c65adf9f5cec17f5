package hash

import "math/bits"

// Excluded reports whether the key rel is left out of the bundle hash:
// exactly the top-level bundle.lock.json and receipts.ndjson (the same names
// deeper in the tree are hashed). Both are written after the hash is taken
// and before the tar, so hashing them would make every restored tree differ
// from its lock.
func Excluded(rel string) bool {
	return rel == "bundle.lock.json" || rel == "receipts.ndjson"
}

// Less reports whether key a sorts before key b in UTF-16 code-unit order,
// JavaScript's default string sort, which the reference uses.
func Less(a, b string) bool { return Compare(a, b) < 0 }

// Compare orders keys like Less and returns -1, 0 or +1.
//
// For valid UTF-8, UTF-16 code-unit order equals byte order except in one
// place: a character outside the BMP (UTF-8 lead byte F0–F4, a surrogate
// pair D800–DFFF in UTF-16) sorts *before* one in U+E000–U+FFFF (lead byte
// EE or EF). Since both orders are lexicographic, comparing the strings
// byte by byte with those seven lead-byte values rotated (F0–F4 below
// EE–EF) gives exactly UTF-16 order, and the rotation is a permutation of
// byte values, so the result is a total order even for invalid UTF-8. Only
// the first differing byte needs the table, so the common prefix is skipped
// eight bytes at a time.
func Compare(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if x, y := load64(a[i:]), load64(b[i:]); x != y {
			i += bits.TrailingZeros64(x^y) >> 3
			return compareUnit(a[i], b[i])
		}
	}
	for ; i < n; i++ {
		if a[i] != b[i] {
			return compareUnit(a[i], b[i])
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return +1
	}
	return 0
}

// load64 reads 8 bytes little-endian (the compiler merges the loads), so
// the lowest differing byte of two words is the first differing byte.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// unitWeight is the byte permutation described at Compare.
var unitWeight = func() (w [256]uint8) {
	for i := range w {
		w[i] = uint8(i)
	}
	for c := 0xF0; c <= 0xF4; c++ {
		w[c] = uint8(c - 2) // F0..F4 → EE..F2
	}
	w[0xEE], w[0xEF] = 0xF3, 0xF4
	return w
}()

func compareUnit(x, y byte) int {
	if unitWeight[x] < unitWeight[y] {
		return -1
	}
	return +1 // x != y and the table is a permutation
}

// compareEntry compares two names of one directory as if every directory
// name carried a trailing '/'. Sorting each listing this way and walking
// depth-first yields all paths of the tree in global Compare order, so no
// sort over the whole tree is needed. Names never contain '/'.
func compareEntry(a string, aDir bool, b string, bDir bool) int {
	n := min(len(a), len(b))
	if c := Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	switch {
	case len(a) < len(b):
		if !aDir {
			return -1
		}
		return compareUnit('/', b[n])
	case len(a) > len(b):
		if !bDir {
			return +1
		}
		return compareUnit(a[n], '/')
	}
	return 0
}
