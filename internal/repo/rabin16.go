package repo

// The vector scan: sixteen lanes, eight in each of two AVX-512
// registers (rabin_amd64.s). Per byte and lane the scalar loop does two
// dependent table lookups; here a lookup is two permutes over 16-entry
// tables held in registers (rabin.vec), and the lanes' bytes come in with
// one gather per 8 steps. The fingerprints and candidates are exactly
// scanLane's; TestScan16MatchesScalar compares them.

// minLane16 is the shortest lane the vector scan takes: shorter scans
// would spend more on priming the windows (64 steps) than on scanning.
const minLane16 = 256

// scan16 is scan in sixteen lanes. It needs r.shift == 45, haveRabin16,
// window <= from and to <= len(buf)+1.
func (r *rabin) scan16(buf []byte, from, to int, mask uint64, base int64, found []int64, hits *[16][]int64) []int64 {
	L := (to - from) / 16
	if from < window || to > len(buf)+1 || L < 9 || r.shift != 53-8 {
		panic("repo: scan16 out of range")
	}
	// Lane j checks positions [aj, aj+L), aj = from+j*L; its window at
	// step k is buf[aj-window+k : aj+k]. The assembly reads only bytes
	// of buf: below aj-window+m+window = aj+L-1 <= to-1 <= len(buf).
	var idx, d [16]uint64
	for j := range idx {
		idx[j] = uint64(from + j*L - window)
	}
	rabinPrime16(&r.vec, &buf[0], &idx, &d)
	for j := range hits {
		hits[j] = hits[j][:0]
		if d[j]&mask == 0 {
			hits[j] = append(hits[j], base+int64(from+j*L))
		}
	}
	m, k := L-1, 0
	for {
		next, hit := rabinRun16(&r.vec, &buf[0], &idx, &d, k, m, mask)
		k = next
		if !hit {
			break
		}
		for j, dj := range d {
			if dj&mask == 0 {
				hits[j] = append(hits[j], base+int64(from+j*L+k+1))
			}
		}
		k++
	}
	// The last steps (fewer than 8) lane by lane.
	for j := range d {
		a, dj := from+j*L, d[j]
		for s := k; s < m; s++ {
			x := dj ^ r.out[buf[a-window+s]]
			dj = (x<<8 | uint64(buf[a+s])) ^ r.mod[byte(x>>(53-8))]
			if dj&mask == 0 {
				hits[j] = append(hits[j], base+int64(a+s+1))
			}
		}
	}
	for _, h := range hits {
		found = append(found, h...)
	}
	return r.scanLane(buf, from+16*L, to, mask, base, found)
}
