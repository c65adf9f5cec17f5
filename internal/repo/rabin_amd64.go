//go:build !purego

package repo

import "golang.org/x/sys/cpu"

// haveRabin16 reports whether rabinPrime16 and rabinRun16 can run here.
var haveRabin16 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VBMI2

// rabinPrime16 sets d[j] to the fingerprint of the 64 bytes at
// base+idx[j], for 16 windows. Every byte must be inside one slice.
//
//go:noescape
func rabinPrime16(tab *[64]uint64, base *byte, idx *[16]uint64, d *[16]uint64)

// rabinRun16 slides 16 windows: at step k window j loses the byte at
// base+idx[j]+k and gains the one at base+idx[j]+k+64. It runs steps k,
// k+1, … while eight more fit before m (it does not read at or past
// step m) and stops after the first step after which some d[j] has no bit
// of mask set: then it returns that step and true, else the first step
// it did not run and false.
//
//go:noescape
func rabinRun16(tab *[64]uint64, base *byte, idx *[16]uint64, d *[16]uint64, k, m int, mask uint64) (next int, hit bool)
