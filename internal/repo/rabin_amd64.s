//go:build !purego

#include "textflag.h"

// The Rabin fingerprint of 16 windows at once, 8 in each of two ZMM
// registers (see rabin16 in rabin16.go for what these compute and why).
//
// A table lookup t[b] of a byte b is two permutes of 16-entry tables,
// t[b&15] ^ t[b&0xf0]: both tables are linear in b over GF(2). The
// tables live in Z16-Z23 (out low, out high, mod low, mod high nibble, two
// registers each), the split mask in Z24, 0xff in Z25, 8 in Z26, and in
// Z28 the shuffle that reverses the bytes of each qword: the bytes a
// window gains are taken from the top (VPSHLDQ shifts them in).

DATA revq<>+0(SB)/8, $0x0001020304050607
DATA revq<>+8(SB)/8, $0x08090a0b0c0d0e0f
GLOBL revq<>(SB), RODATA|NOPTR, $16

// shuf: eight 64-byte shuffles, for byte 0..7 of each qword.
DATA shuf<>+0(SB)/8, $0x8080808080808000
DATA shuf<>+8(SB)/8, $0x8080808080808008
DATA shuf<>+16(SB)/8, $0x8080808080808000
DATA shuf<>+24(SB)/8, $0x8080808080808008
DATA shuf<>+32(SB)/8, $0x8080808080808000
DATA shuf<>+40(SB)/8, $0x8080808080808008
DATA shuf<>+48(SB)/8, $0x8080808080808000
DATA shuf<>+56(SB)/8, $0x8080808080808008
DATA shuf<>+64(SB)/8, $0x8080808080808001
DATA shuf<>+72(SB)/8, $0x8080808080808009
DATA shuf<>+80(SB)/8, $0x8080808080808001
DATA shuf<>+88(SB)/8, $0x8080808080808009
DATA shuf<>+96(SB)/8, $0x8080808080808001
DATA shuf<>+104(SB)/8, $0x8080808080808009
DATA shuf<>+112(SB)/8, $0x8080808080808001
DATA shuf<>+120(SB)/8, $0x8080808080808009
DATA shuf<>+128(SB)/8, $0x8080808080808002
DATA shuf<>+136(SB)/8, $0x808080808080800a
DATA shuf<>+144(SB)/8, $0x8080808080808002
DATA shuf<>+152(SB)/8, $0x808080808080800a
DATA shuf<>+160(SB)/8, $0x8080808080808002
DATA shuf<>+168(SB)/8, $0x808080808080800a
DATA shuf<>+176(SB)/8, $0x8080808080808002
DATA shuf<>+184(SB)/8, $0x808080808080800a
DATA shuf<>+192(SB)/8, $0x8080808080808003
DATA shuf<>+200(SB)/8, $0x808080808080800b
DATA shuf<>+208(SB)/8, $0x8080808080808003
DATA shuf<>+216(SB)/8, $0x808080808080800b
DATA shuf<>+224(SB)/8, $0x8080808080808003
DATA shuf<>+232(SB)/8, $0x808080808080800b
DATA shuf<>+240(SB)/8, $0x8080808080808003
DATA shuf<>+248(SB)/8, $0x808080808080800b
DATA shuf<>+256(SB)/8, $0x8080808080808004
DATA shuf<>+264(SB)/8, $0x808080808080800c
DATA shuf<>+272(SB)/8, $0x8080808080808004
DATA shuf<>+280(SB)/8, $0x808080808080800c
DATA shuf<>+288(SB)/8, $0x8080808080808004
DATA shuf<>+296(SB)/8, $0x808080808080800c
DATA shuf<>+304(SB)/8, $0x8080808080808004
DATA shuf<>+312(SB)/8, $0x808080808080800c
DATA shuf<>+320(SB)/8, $0x8080808080808005
DATA shuf<>+328(SB)/8, $0x808080808080800d
DATA shuf<>+336(SB)/8, $0x8080808080808005
DATA shuf<>+344(SB)/8, $0x808080808080800d
DATA shuf<>+352(SB)/8, $0x8080808080808005
DATA shuf<>+360(SB)/8, $0x808080808080800d
DATA shuf<>+368(SB)/8, $0x8080808080808005
DATA shuf<>+376(SB)/8, $0x808080808080800d
DATA shuf<>+384(SB)/8, $0x8080808080808006
DATA shuf<>+392(SB)/8, $0x808080808080800e
DATA shuf<>+400(SB)/8, $0x8080808080808006
DATA shuf<>+408(SB)/8, $0x808080808080800e
DATA shuf<>+416(SB)/8, $0x8080808080808006
DATA shuf<>+424(SB)/8, $0x808080808080800e
DATA shuf<>+432(SB)/8, $0x8080808080808006
DATA shuf<>+440(SB)/8, $0x808080808080800e
DATA shuf<>+448(SB)/8, $0x8080808080808007
DATA shuf<>+456(SB)/8, $0x808080808080800f
DATA shuf<>+464(SB)/8, $0x8080808080808007
DATA shuf<>+472(SB)/8, $0x808080808080800f
DATA shuf<>+480(SB)/8, $0x8080808080808007
DATA shuf<>+488(SB)/8, $0x808080808080800f
DATA shuf<>+496(SB)/8, $0x8080808080808007
DATA shuf<>+504(SB)/8, $0x808080808080800f
GLOBL shuf<>(SB), RODATA|NOPTR, $512

#define LOADTABLES(tab) \
	VMOVDQU64 0(tab), Z16;   \
	VMOVDQU64 64(tab), Z17;  \
	VMOVDQU64 128(tab), Z18; \
	VMOVDQU64 192(tab), Z19; \
	VMOVDQU64 256(tab), Z20; \
	VMOVDQU64 320(tab), Z21; \
	VMOVDQU64 384(tab), Z22; \
	VMOVDQU64 448(tab), Z23; \
	VBROADCASTI32X4 revq<>(SB), Z28

// IN moves the window of D (8 fingerprints) over the top byte of each
// lane of I (which it shifts out): D = (D<<8 | b) ^ mod[D>>45]. The
// fingerprint has degree < 53, so D>>45 is the byte above it.
#define IN(D, I, T1, T2) \
	VPSRLQ     $45, D, T1;       \
	VPSRLQ     $49, D, T2;       \
	VPERMI2Q   Z21, Z20, T1;     \
	VPERMI2Q   Z23, Z22, T2;     \
	VPSHLDQ    $8, I, D, D;      \
	VPSLLQ     $8, I, I;         \
	VPTERNLOGQ $0x96, T2, T1, D

// OUT removes byte s of each lane of O from the windows of D:
// D ^= out[b]. The shuffle at off moves byte s of each qword to its
// bottom (for the permutes only the low nibble of an index counts).
#define OUT(off, D, O, T0, T1) \
	VPSHUFB    shuf<>+off(SB), O, T0; \
	VPSRLQ     $4, T0, T1;            \
	VPERMI2Q   Z17, Z16, T0;          \
	VPERMI2Q   Z19, Z18, T1;          \
	VPTERNLOGQ $0x96, T1, T0, D

// STEP slides all 16 windows by byte s of the block (off = 64*s) and
// leaves the lanes whose fingerprint has no bit of the mask set in K2
// (0-7) and K3 (8-15).
#define STEP(off) \
	OUT(off, Z0, Z4, Z8, Z9);   \
	OUT(off, Z1, Z5, Z12, Z13); \
	IN(Z0, Z6, Z10, Z11);       \
	IN(Z1, Z7, Z14, Z15);       \
	VPTESTNMQ Z24, Z0, K2;      \
	VPTESTNMQ Z24, Z1, K3

// func rabinPrime16(tab *[64]uint64, base *byte, idx *[16]uint64, d *[16]uint64)
TEXT ·rabinPrime16(SB), NOSPLIT, $0-32
	MOVQ tab+0(FP), AX
	MOVQ base+8(FP), SI
	MOVQ idx+16(FP), BX
	MOVQ d+24(FP), DI
	LOADTABLES(AX)
	MOVQ $0xff, R8
	VPBROADCASTQ R8, Z25
	MOVQ $8, R8
	VPBROADCASTQ R8, Z26
	VMOVDQU64 0(BX), Z2
	VMOVDQU64 64(BX), Z3
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	MOVQ $8, CX

prime:
	KXNORW K1, K1, K1
	VPGATHERQQ (SI)(Z2*1), K1, Z6
	KXNORW K1, K1, K1
	VPGATHERQQ (SI)(Z3*1), K1, Z7
	VPSHUFB Z28, Z6, Z6
	VPSHUFB Z28, Z7, Z7
	VPADDQ Z26, Z2, Z2
	VPADDQ Z26, Z3, Z3
	IN(Z0, Z6, Z10, Z11); IN(Z1, Z7, Z14, Z15)
	IN(Z0, Z6, Z10, Z11); IN(Z1, Z7, Z14, Z15)
	IN(Z0, Z6, Z10, Z11); IN(Z1, Z7, Z14, Z15)
	IN(Z0, Z6, Z10, Z11); IN(Z1, Z7, Z14, Z15)
	IN(Z0, Z6, Z10, Z11); IN(Z1, Z7, Z14, Z15)
	IN(Z0, Z6, Z10, Z11); IN(Z1, Z7, Z14, Z15)
	IN(Z0, Z6, Z10, Z11); IN(Z1, Z7, Z14, Z15)
	IN(Z0, Z6, Z10, Z11); IN(Z1, Z7, Z14, Z15)
	DECQ CX
	JNZ  prime

	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z1, 64(DI)
	VZEROUPPER
	RET

// CHECK leaves the loop for hit when a lane hit, else counts the step.
#define CHECK \
	KORTESTW K2, K3; \
	JNE      hit;    \
	INCQ     DX

// func rabinRun16(tab *[64]uint64, base *byte, idx *[16]uint64, d *[16]uint64, k, m int, mask uint64) (next int, hit bool)
TEXT ·rabinRun16(SB), NOSPLIT, $0-65
	MOVQ tab+0(FP), AX
	MOVQ base+8(FP), SI
	MOVQ idx+16(FP), BX
	MOVQ d+24(FP), DI
	MOVQ k+32(FP), DX
	MOVQ m+40(FP), CX
	LOADTABLES(AX)
	VPBROADCASTQ mask+48(FP), Z24
	MOVQ $0xff, R8
	VPBROADCASTQ R8, Z25
	MOVQ $8, R8
	VPBROADCASTQ R8, Z26
	VPBROADCASTQ DX, Z27
	VMOVDQU64 0(BX), Z2
	VMOVDQU64 64(BX), Z3
	VPADDQ Z27, Z2, Z2
	VPADDQ Z27, Z3, Z3
	VMOVDQU64 0(DI), Z0
	VMOVDQU64 64(DI), Z1
	SUBQ $8, CX

loop:
	CMPQ DX, CX
	JGT  done
	KXNORW K1, K1, K1
	VPGATHERQQ (SI)(Z2*1), K1, Z4
	KXNORW K1, K1, K1
	VPGATHERQQ (SI)(Z3*1), K1, Z5
	KXNORW K1, K1, K1
	VPGATHERQQ 64(SI)(Z2*1), K1, Z6
	KXNORW K1, K1, K1
	VPGATHERQQ 64(SI)(Z3*1), K1, Z7
	VPSHUFB Z28, Z6, Z6
	VPSHUFB Z28, Z7, Z7
	VPADDQ Z26, Z2, Z2
	VPADDQ Z26, Z3, Z3
	STEP(0); CHECK
	STEP(64); CHECK
	STEP(128); CHECK
	STEP(192); CHECK
	STEP(256); CHECK
	STEP(320); CHECK
	STEP(384); CHECK
	STEP(448); CHECK
	JMP loop

hit:
	MOVB $1, hit+64(FP)
	JMP  out

done:
	MOVB $0, hit+64(FP)

out:
	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z1, 64(DI)
	MOVQ DX, next+56(FP)
	VZEROUPPER
	RET
