// Command _asm generates internal/repo/rabin_amd64.s, the AVX-512 Rabin
// scan (see rabin16.go for what it computes and why), with avo: the
// instructions are checked against the x86 instruction database, and the
// argument offsets and frame sizes follow from the Go signatures rather
// than being written by hand.
//
//	go generate ./internal/repo  (runs: go -C _asm run . -out ../rabin_amd64.s)
//
// It is a module of its own so that avo stays out of hermesd's module
// graph; TestRabinAsmGenerated runs it and compares its output with the
// committed file byte for byte.
//
// The Rabin fingerprint of 16 windows runs at once, 8 in each of two ZMM
// registers. A table lookup t[b] of a byte b is two permutes of 16-entry
// tables, t[b&15] ^ t[b&0xf0]: both tables are linear in b over GF(2). The
// tables (rabin.vec) live in Z16-Z23 (out low, out high, mod low, mod high
// nibble, two registers each), the mask in Z24, 0xff in Z25, 8 in Z26, and
// in Z28 the shuffle that reverses the bytes of each qword: the bytes a
// window gains are taken from the top (VPSHLDQ shifts them in).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/gotypes"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/pass"
	"github.com/mmcloughlin/avo/printer"
	. "github.com/mmcloughlin/avo/reg"
)

// config names the generator in the file's header the same way however
// it was run (the drift test writes elsewhere).
var config = printer.Config{Argv: []string{"go", "run", ".", "-out", "../rabin_amd64.s"}, Pkg: "repo"}

func main() {
	// A FlagSet of its own: importing avo's build package registers
	// avo's own flags on flag.CommandLine.
	fs := flag.NewFlagSet("_asm", flag.ExitOnError)
	out := fs.String("out", "", "assembly output file")
	fs.Parse(os.Args[1:])
	if *out == "" {
		fmt.Fprintln(os.Stderr, "usage: go run . -out FILE")
		os.Exit(2)
	}
	if err := generate(*out); err != nil {
		fmt.Fprintln(os.Stderr, "rabin asm:", err)
		os.Exit(1)
	}
}

func generate(path string) error {
	a.ConstraintExpr("!purego")
	globals()
	prime16()
	run16()
	f, err := a.Result()
	if err != nil {
		return err
	}
	if err := pass.Compile.Execute(f); err != nil {
		return err
	}
	b, err := printer.NewGoAsm(config).Print(f)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// a is the file being built.
var a = build.NewContext()

var revq, shuf Mem

func globals() {
	// revq reverses the bytes of each qword of a 16-byte lane.
	revq = global("revq")
	a.AddDatum(0, U64(0x0001020304050607))
	a.AddDatum(8, U64(0x08090a0b0c0d0e0f))

	// shuf: eight 64-byte shuffles; shuffle s moves byte s of each qword to
	// its bottom (for the permutes only the low nibble of an index counts).
	shuf = global("shuf")
	for s := range 8 {
		for q := range 8 {
			a.AddDatum(64*s+8*q, U64(0x8080808080808000|uint64(s)|uint64(q%2)<<3))
		}
	}
}

// global starts the read-only data section name.
func global(name string) Mem {
	g := a.StaticGlobal(name)
	a.DataAttributes(attr.RODATA | attr.NOPTR)
	return g
}

// addr is the stack slot of an argument or result.
func addr(c gotypes.Component) Mem {
	b, err := c.Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

func loadTables(tab Register) {
	for i, z := range []VecPhysical{Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23} {
		a.VMOVDQU64(Mem{Base: tab, Disp: 64 * i}, z)
	}
	a.VBROADCASTI32X4(revq, Z28)
}

// in moves the windows of d (8 fingerprints) over the top byte of each
// lane of i (which it shifts out): d = (d<<8 | b) ^ mod[d>>45]. The
// fingerprint has degree < 53, so d>>45 is the byte above it.
func in(d, i, t1, t2 VecPhysical) {
	a.VPSRLQ(U8(45), d, t1)
	a.VPSRLQ(U8(49), d, t2)
	a.VPERMI2Q(Z21, Z20, t1)
	a.VPERMI2Q(Z23, Z22, t2)
	a.VPSHLDQ(U8(8), i, d, d)
	a.VPSLLQ(U8(8), i, i)
	a.VPTERNLOGQ(U8(0x96), t2, t1, d)
}

// out removes byte s of each lane of o from the windows of d:
// d ^= out[b].
func out(s int, d, o, t0, t1 VecPhysical) {
	a.VPSHUFB(shuf.Offset(64*s), o, t0)
	a.VPSRLQ(U8(4), t0, t1)
	a.VPERMI2Q(Z17, Z16, t0)
	a.VPERMI2Q(Z19, Z18, t1)
	a.VPTERNLOGQ(U8(0x96), t1, t0, d)
}

// step slides all 16 windows by byte s of the block and leaves the lanes
// whose fingerprint has no bit of the mask set in K2 (0-7) and K3 (8-15).
func step(s int) {
	out(s, Z0, Z4, Z8, Z9)
	out(s, Z1, Z5, Z12, Z13)
	in(Z0, Z6, Z10, Z11)
	in(Z1, Z7, Z14, Z15)
	a.VPTESTNMQ(Z24, Z0, K2)
	a.VPTESTNMQ(Z24, Z1, K3)
}

func broadcastConstants() {
	a.MOVQ(U32(0xff), R8)
	a.VPBROADCASTQ(R8, Z25)
	a.MOVQ(U32(8), R8)
	a.VPBROADCASTQ(R8, Z26)
}

// gather loads, for each of the 16 lanes, the 8 bytes at SI+off+idx (idx
// in Z2, Z3) into zlo, zhi.
func gather(off int, zlo, zhi VecPhysical) {
	a.KXNORW(K1, K1, K1)
	a.VPGATHERQQ(Mem{Base: RSI, Disp: off, Index: Z2, Scale: 1}, K1, zlo)
	a.KXNORW(K1, K1, K1)
	a.VPGATHERQQ(Mem{Base: RSI, Disp: off, Index: Z3, Scale: 1}, K1, zhi)
}

// text starts the function name with the arguments both functions begin
// with: tab in AX, base in SI, idx in BX, d in DI.
func text(name, signature string) {
	a.Function(name)
	a.Attributes(attr.NOSPLIT)
	a.SignatureExpr(signature)
	a.Load(a.Param("tab"), RAX)
	a.Load(a.Param("base"), RSI)
	a.Load(a.Param("idx"), RBX)
	a.Load(a.Param("d"), RDI)
}

func prime16() {
	text("rabinPrime16", "func(tab *[64]uint64, base *byte, idx *[16]uint64, d *[16]uint64)")
	loadTables(RAX)
	broadcastConstants()
	a.VMOVDQU64(Mem{Base: RBX}, Z2)
	a.VMOVDQU64(Mem{Base: RBX, Disp: 64}, Z3)
	a.VPXORQ(Z0, Z0, Z0)
	a.VPXORQ(Z1, Z1, Z1)
	a.MOVQ(U32(8), RCX)

	a.Label("prime")
	a.Comment("Eight bytes of each window per round, from the top of the gathered qword.")
	gather(0, Z6, Z7)
	a.VPSHUFB(Z28, Z6, Z6)
	a.VPSHUFB(Z28, Z7, Z7)
	a.VPADDQ(Z26, Z2, Z2)
	a.VPADDQ(Z26, Z3, Z3)
	for range 8 {
		in(Z0, Z6, Z10, Z11)
		in(Z1, Z7, Z14, Z15)
	}
	a.DECQ(RCX)
	a.JNZ(LabelRef("prime"))

	a.VMOVDQU64(Z0, Mem{Base: RDI})
	a.VMOVDQU64(Z1, Mem{Base: RDI, Disp: 64})
	a.VZEROUPPER()
	a.RET()
}

func run16() {
	text("rabinRun16", "func(tab *[64]uint64, base *byte, idx *[16]uint64, d *[16]uint64, k, m int, mask uint64) (next int, hit bool)")
	a.Load(a.Param("k"), RDX)
	a.Load(a.Param("m"), RCX)
	loadTables(RAX)
	a.VPBROADCASTQ(addr(a.Param("mask")), Z24)
	broadcastConstants()
	a.VPBROADCASTQ(RDX, Z27)
	a.VMOVDQU64(Mem{Base: RBX}, Z2)
	a.VMOVDQU64(Mem{Base: RBX, Disp: 64}, Z3)
	a.VPADDQ(Z27, Z2, Z2)
	a.VPADDQ(Z27, Z3, Z3)
	a.VMOVDQU64(Mem{Base: RDI}, Z0)
	a.VMOVDQU64(Mem{Base: RDI, Disp: 64}, Z1)
	a.SUBQ(U32(8), RCX)

	a.Label("loop")
	a.CMPQ(RDX, RCX)
	a.JGT(LabelRef("done"))
	a.Comment("The 8 bytes each window loses (Z4, Z5) and gains (Z6, Z7) in the next 8 steps.")
	gather(0, Z4, Z5)
	gather(64, Z6, Z7)
	a.VPSHUFB(Z28, Z6, Z6)
	a.VPSHUFB(Z28, Z7, Z7)
	a.VPADDQ(Z26, Z2, Z2)
	a.VPADDQ(Z26, Z3, Z3)
	for s := range 8 {
		step(s)
		a.Comment("Leave for hit when a lane hit, else count the step.")
		a.KORTESTW(K2, K3)
		a.JNE(LabelRef("hit"))
		a.INCQ(RDX)
	}
	a.JMP(LabelRef("loop"))

	a.Label("hit")
	a.MOVB(U8(1), addr(a.Return("hit")))
	a.JMP(LabelRef("out"))

	a.Label("done")
	a.MOVB(U8(0), addr(a.Return("hit")))

	a.Label("out")
	a.VMOVDQU64(Z0, Mem{Base: RDI})
	a.VMOVDQU64(Z1, Mem{Base: RDI, Disp: 64})
	a.Store(RDX, a.Return("next"))
	a.VZEROUPPER()
	a.RET()
}
