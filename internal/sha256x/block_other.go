//go:build !amd64 || purego

package sha256x

// havePair is false: no interleaved assembly here.
const havePair = false

func blocks(h *[8]uint32, p []byte) { blocksGeneric(h, p) }

func blocksPair(ha, hb *[8]uint32, pa, pb []byte) {
	blocksGeneric(ha, pa)
	blocksGeneric(hb, pb)
}
