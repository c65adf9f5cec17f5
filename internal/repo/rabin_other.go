//go:build !amd64 || purego

package repo

// haveRabin16 is false: the vector scan is written for amd64 only.
var haveRabin16 = false

func rabinPrime16(tab *[64]uint64, base *byte, idx *[16]uint64, d *[16]uint64) {
	panic("repo: no vector Rabin scan on this platform")
}

func rabinRun16(tab *[64]uint64, base *byte, idx *[16]uint64, d *[16]uint64, k, m int, mask uint64) (int, bool) {
	panic("repo: no vector Rabin scan on this platform")
}
