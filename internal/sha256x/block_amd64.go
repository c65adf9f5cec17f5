//go:build !purego

package sha256x

import "github.com/klauspost/cpuid/v2"

//go:generate python3 gen.py

// havePair: SHA-NI (with the SSSE3 and SSE4.1 its state shuffles use).
var havePair = cpuid.CPU.Supports(cpuid.SHA, cpuid.SSSE3, cpuid.SSE4)

//go:noescape
func blocksSHA(h *[8]uint32, p *byte, n int)

//go:noescape
func blocksPairSHA(ha, hb *[8]uint32, pa, pb *byte, n int)

func blocks(h *[8]uint32, p []byte) {
	if havePair && len(p) >= blockSize {
		blocksSHA(h, &p[0], len(p)/blockSize)
		return
	}
	blocksGeneric(h, p)
}

// blocksPair hashes the whole blocks of pa into ha and of pb into hb;
// len(pa) == len(pb).
func blocksPair(ha, hb *[8]uint32, pa, pb []byte) {
	if len(pa) != len(pb) {
		panic("sha256x: uneven streams")
	}
	if len(pa) < blockSize {
		return
	}
	blocksPairSHA(ha, hb, &pa[0], &pb[0], len(pa)/blockSize)
}
