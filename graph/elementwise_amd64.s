//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 kernels of elementwise.go's arithmetic and comparisons:
// out[i] = x[i] op y[i] (y a vector) or x[i] op c (c a number), for n
// elements, a vector of eight float64 or sixteen float32 at a time and
// the last ones under a mask. Each element is the one IEEE operation (or
// comparison) the portable loops perform, so the results have the same
// bits.

DATA elemOne64<>+0(SB)/8, $0x3ff0000000000000
GLOBL elemOne64<>(SB), RODATA|NOPTR, $8
DATA elemOne32<>+0(SB)/4, $0x3f800000
GLOBL elemOne32<>(SB), RODATA|NOPTR, $4

// Operand y: a vector read at AX (PREV, VECY, VECYM), or the number c
// broadcast into Z1 once (PRE64, PRE32, and NOY for the loads).
#define PREV MOVQ y+16(FP), DX
#define PRE64 VBROADCASTSD c+16(FP), Z1
#define PRE32 VBROADCASTSS c+16(FP), Z1
#define VECY(MOV, SH) MOV (DX)(AX*SH), Z1
#define VECYM(MOV, SH) MOV.Z (DX)(AX*SH), K1, Z1
#define NOY(MOV, SH)

// TAILMASK sets K1 to the CX − AX elements left, or jumps to done when
// none are.
#define TAILMASK(done) \
	SUBQ AX, CX \
	JZ   done \
	MOVL $1, BX \
	SHLL CX, BX \
	DECL BX \
	KMOVW BX, K1

// ARITH: out = x OPI y, W lanes of size SH.
#define ARITH(OPI, MOV, SH, W, PRE, LY, LYM) \
	MOVQ out+0(FP), DI \
	MOVQ x+8(FP), SI \
	MOVQ n+24(FP), CX \
	PRE \
	XORQ AX, AX \
aloop: \
	LEAQ W(AX), BX \
	CMPQ BX, CX \
	JGT  atail \
	MOV (SI)(AX*SH), Z0 \
	LY(MOV, SH) \
	OPI Z1, Z0, Z0 \
	MOV Z0, (DI)(AX*SH) \
	MOVQ BX, AX \
	JMP  aloop \
atail: \
	TAILMASK(adone) \
	MOV.Z (SI)(AX*SH), K1, Z0 \
	LYM(MOV, SH) \
	OPI Z1, Z0, Z0 \
	MOV Z0, K1, (DI)(AX*SH) \
adone: \
	VZEROUPPER \
	RET

// CMPL: out = 1 where x CMPI(PRED) y, 0 elsewhere; ONE is 1 in the
// precision, BC its broadcast.
#define CMPL(CMPI, PRED, BC, ONE, MOV, SH, W, PRE, LY, LYM) \
	MOVQ out+0(FP), DI \
	MOVQ x+8(FP), SI \
	MOVQ n+24(FP), CX \
	PRE \
	BC ONE(SB), Z2 \
	XORQ AX, AX \
cloop: \
	LEAQ W(AX), BX \
	CMPQ BX, CX \
	JGT  ctail \
	MOV (SI)(AX*SH), Z0 \
	LY(MOV, SH) \
	CMPI $PRED, Z1, Z0, K2 \
	MOV.Z Z2, K2, Z0 \
	MOV Z0, (DI)(AX*SH) \
	MOVQ BX, AX \
	JMP  cloop \
ctail: \
	TAILMASK(cdone) \
	MOV.Z (SI)(AX*SH), K1, Z0 \
	LYM(MOV, SH) \
	CMPI $PRED, Z1, Z0, K2 \
	MOV.Z Z2, K2, Z0 \
	MOV Z0, K1, (DI)(AX*SH) \
cdone: \
	VZEROUPPER \
	RET

// func addVecF64(out, x, y *float64, n int)
TEXT ·addVecF64(SB), NOSPLIT, $0-32
	ARITH(VADDPD, VMOVUPD, 8, 8, PREV, VECY, VECYM)

// func addNumF64(out, x *float64, c float64, n int)
TEXT ·addNumF64(SB), NOSPLIT, $0-32
	ARITH(VADDPD, VMOVUPD, 8, 8, PRE64, NOY, NOY)

// func addVecF32(out, x, y *float32, n int)
TEXT ·addVecF32(SB), NOSPLIT, $0-32
	ARITH(VADDPS, VMOVUPS, 4, 16, PREV, VECY, VECYM)

// func addNumF32(out, x *float32, c float32, n int)
TEXT ·addNumF32(SB), NOSPLIT, $0-32
	ARITH(VADDPS, VMOVUPS, 4, 16, PRE32, NOY, NOY)

// func subVecF64(out, x, y *float64, n int)
TEXT ·subVecF64(SB), NOSPLIT, $0-32
	ARITH(VSUBPD, VMOVUPD, 8, 8, PREV, VECY, VECYM)

// func subNumF64(out, x *float64, c float64, n int)
TEXT ·subNumF64(SB), NOSPLIT, $0-32
	ARITH(VSUBPD, VMOVUPD, 8, 8, PRE64, NOY, NOY)

// func subVecF32(out, x, y *float32, n int)
TEXT ·subVecF32(SB), NOSPLIT, $0-32
	ARITH(VSUBPS, VMOVUPS, 4, 16, PREV, VECY, VECYM)

// func subNumF32(out, x *float32, c float32, n int)
TEXT ·subNumF32(SB), NOSPLIT, $0-32
	ARITH(VSUBPS, VMOVUPS, 4, 16, PRE32, NOY, NOY)

// func mulVecF64(out, x, y *float64, n int)
TEXT ·mulVecF64(SB), NOSPLIT, $0-32
	ARITH(VMULPD, VMOVUPD, 8, 8, PREV, VECY, VECYM)

// func mulNumF64(out, x *float64, c float64, n int)
TEXT ·mulNumF64(SB), NOSPLIT, $0-32
	ARITH(VMULPD, VMOVUPD, 8, 8, PRE64, NOY, NOY)

// func mulVecF32(out, x, y *float32, n int)
TEXT ·mulVecF32(SB), NOSPLIT, $0-32
	ARITH(VMULPS, VMOVUPS, 4, 16, PREV, VECY, VECYM)

// func mulNumF32(out, x *float32, c float32, n int)
TEXT ·mulNumF32(SB), NOSPLIT, $0-32
	ARITH(VMULPS, VMOVUPS, 4, 16, PRE32, NOY, NOY)

// func divVecF64(out, x, y *float64, n int)
TEXT ·divVecF64(SB), NOSPLIT, $0-32
	ARITH(VDIVPD, VMOVUPD, 8, 8, PREV, VECY, VECYM)

// func divNumF64(out, x *float64, c float64, n int)
TEXT ·divNumF64(SB), NOSPLIT, $0-32
	ARITH(VDIVPD, VMOVUPD, 8, 8, PRE64, NOY, NOY)

// func divVecF32(out, x, y *float32, n int)
TEXT ·divVecF32(SB), NOSPLIT, $0-32
	ARITH(VDIVPS, VMOVUPS, 4, 16, PREV, VECY, VECYM)

// func divNumF32(out, x *float32, c float32, n int)
TEXT ·divNumF32(SB), NOSPLIT, $0-32
	ARITH(VDIVPS, VMOVUPS, 4, 16, PRE32, NOY, NOY)

// func cmpLTVecF64(out, x, y *float64, n int)
TEXT ·cmpLTVecF64(SB), NOSPLIT, $0-32
	CMPL(VCMPPD, 1, VBROADCASTSD, elemOne64<>, VMOVUPD, 8, 8, PREV, VECY, VECYM)

// func cmpLTNumF64(out, x *float64, c float64, n int)
TEXT ·cmpLTNumF64(SB), NOSPLIT, $0-32
	CMPL(VCMPPD, 1, VBROADCASTSD, elemOne64<>, VMOVUPD, 8, 8, PRE64, NOY, NOY)

// func cmpLTVecF32(out, x, y *float32, n int)
TEXT ·cmpLTVecF32(SB), NOSPLIT, $0-32
	CMPL(VCMPPS, 1, VBROADCASTSS, elemOne32<>, VMOVUPS, 4, 16, PREV, VECY, VECYM)

// func cmpLTNumF32(out, x *float32, c float32, n int)
TEXT ·cmpLTNumF32(SB), NOSPLIT, $0-32
	CMPL(VCMPPS, 1, VBROADCASTSS, elemOne32<>, VMOVUPS, 4, 16, PRE32, NOY, NOY)

// func cmpGTVecF64(out, x, y *float64, n int)
TEXT ·cmpGTVecF64(SB), NOSPLIT, $0-32
	CMPL(VCMPPD, 14, VBROADCASTSD, elemOne64<>, VMOVUPD, 8, 8, PREV, VECY, VECYM)

// func cmpGTNumF64(out, x *float64, c float64, n int)
TEXT ·cmpGTNumF64(SB), NOSPLIT, $0-32
	CMPL(VCMPPD, 14, VBROADCASTSD, elemOne64<>, VMOVUPD, 8, 8, PRE64, NOY, NOY)

// func cmpGTVecF32(out, x, y *float32, n int)
TEXT ·cmpGTVecF32(SB), NOSPLIT, $0-32
	CMPL(VCMPPS, 14, VBROADCASTSS, elemOne32<>, VMOVUPS, 4, 16, PREV, VECY, VECYM)

// func cmpGTNumF32(out, x *float32, c float32, n int)
TEXT ·cmpGTNumF32(SB), NOSPLIT, $0-32
	CMPL(VCMPPS, 14, VBROADCASTSS, elemOne32<>, VMOVUPS, 4, 16, PRE32, NOY, NOY)

// func cmpLEVecF64(out, x, y *float64, n int)
TEXT ·cmpLEVecF64(SB), NOSPLIT, $0-32
	CMPL(VCMPPD, 2, VBROADCASTSD, elemOne64<>, VMOVUPD, 8, 8, PREV, VECY, VECYM)

// func cmpLENumF64(out, x *float64, c float64, n int)
TEXT ·cmpLENumF64(SB), NOSPLIT, $0-32
	CMPL(VCMPPD, 2, VBROADCASTSD, elemOne64<>, VMOVUPD, 8, 8, PRE64, NOY, NOY)

// func cmpLEVecF32(out, x, y *float32, n int)
TEXT ·cmpLEVecF32(SB), NOSPLIT, $0-32
	CMPL(VCMPPS, 2, VBROADCASTSS, elemOne32<>, VMOVUPS, 4, 16, PREV, VECY, VECYM)

// func cmpLENumF32(out, x *float32, c float32, n int)
TEXT ·cmpLENumF32(SB), NOSPLIT, $0-32
	CMPL(VCMPPS, 2, VBROADCASTSS, elemOne32<>, VMOVUPS, 4, 16, PRE32, NOY, NOY)

// func cmpGEVecF64(out, x, y *float64, n int)
TEXT ·cmpGEVecF64(SB), NOSPLIT, $0-32
	CMPL(VCMPPD, 13, VBROADCASTSD, elemOne64<>, VMOVUPD, 8, 8, PREV, VECY, VECYM)

// func cmpGENumF64(out, x *float64, c float64, n int)
TEXT ·cmpGENumF64(SB), NOSPLIT, $0-32
	CMPL(VCMPPD, 13, VBROADCASTSD, elemOne64<>, VMOVUPD, 8, 8, PRE64, NOY, NOY)

// func cmpGEVecF32(out, x, y *float32, n int)
TEXT ·cmpGEVecF32(SB), NOSPLIT, $0-32
	CMPL(VCMPPS, 13, VBROADCASTSS, elemOne32<>, VMOVUPS, 4, 16, PREV, VECY, VECYM)

// func cmpGENumF32(out, x *float32, c float32, n int)
TEXT ·cmpGENumF32(SB), NOSPLIT, $0-32
	CMPL(VCMPPS, 13, VBROADCASTSS, elemOne32<>, VMOVUPS, 4, 16, PRE32, NOY, NOY)

// func cmpEQVecF64(out, x, y *float64, n int)
TEXT ·cmpEQVecF64(SB), NOSPLIT, $0-32
	CMPL(VCMPPD, 0, VBROADCASTSD, elemOne64<>, VMOVUPD, 8, 8, PREV, VECY, VECYM)

// func cmpEQNumF64(out, x *float64, c float64, n int)
TEXT ·cmpEQNumF64(SB), NOSPLIT, $0-32
	CMPL(VCMPPD, 0, VBROADCASTSD, elemOne64<>, VMOVUPD, 8, 8, PRE64, NOY, NOY)

// func cmpEQVecF32(out, x, y *float32, n int)
TEXT ·cmpEQVecF32(SB), NOSPLIT, $0-32
	CMPL(VCMPPS, 0, VBROADCASTSS, elemOne32<>, VMOVUPS, 4, 16, PREV, VECY, VECYM)

// func cmpEQNumF32(out, x *float32, c float32, n int)
TEXT ·cmpEQNumF32(SB), NOSPLIT, $0-32
	CMPL(VCMPPS, 0, VBROADCASTSS, elemOne32<>, VMOVUPS, 4, 16, PRE32, NOY, NOY)

// func cmpNEVecF64(out, x, y *float64, n int)
TEXT ·cmpNEVecF64(SB), NOSPLIT, $0-32
	CMPL(VCMPPD, 4, VBROADCASTSD, elemOne64<>, VMOVUPD, 8, 8, PREV, VECY, VECYM)

// func cmpNENumF64(out, x *float64, c float64, n int)
TEXT ·cmpNENumF64(SB), NOSPLIT, $0-32
	CMPL(VCMPPD, 4, VBROADCASTSD, elemOne64<>, VMOVUPD, 8, 8, PRE64, NOY, NOY)

// func cmpNEVecF32(out, x, y *float32, n int)
TEXT ·cmpNEVecF32(SB), NOSPLIT, $0-32
	CMPL(VCMPPS, 4, VBROADCASTSS, elemOne32<>, VMOVUPS, 4, 16, PREV, VECY, VECYM)

// func cmpNENumF32(out, x *float32, c float32, n int)
TEXT ·cmpNENumF32(SB), NOSPLIT, $0-32
	CMPL(VCMPPS, 4, VBROADCASTSS, elemOne32<>, VMOVUPS, 4, 16, PRE32, NOY, NOY)
