//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 kernels of vmath.go: tanh and the logistic sigmoid, eight
// at a time, operation for operation as tanhOne and sigmoidOne.

#define CONST(name, bits) \
	DATA name<>+0(SB)/8, $bits \
	GLOBL name<>(SB), RODATA|NOPTR, $8

CONST(vmAbs, 0x7fffffffffffffff)
CONST(vmSign, 0x8000000000000000)
CONST(vmOne, 0x3ff0000000000000)
CONST(vmZero, 0x0000000000000000)
CONST(vmMinus1, 0xbff0000000000000)
CONST(vmMinus2, 0xc000000000000000)
CONST(vmMinus1000, 0xc08f400000000000)
CONST(vmTanhMax, 0x4036000000000000) // 22
CONST(vmSigmoidMax, 0x4087500000000000) // 746
CONST(vmLog2e, 0x3ff71547652b82fe) // 1/ln 2
CONST(vmLn2Hi, 0x3fe62e42fee00000) // ln 2, high part
CONST(vmLn2Lo, 0x3dea39ef35793c76) // ln 2, low part
CONST(vmC13, 0x3de6124613a86d09) // 1/13!
CONST(vmC12, 0x3e21eed8eff8d898) // 1/12!
CONST(vmC11, 0x3e5ae64567f544e4) // 1/11!
CONST(vmC10, 0x3e927e4fb7789f5c) // 1/10!
CONST(vmC9, 0x3ec71de3a556c734) // 1/9!
CONST(vmC8, 0x3efa01a01a01a01a) // 1/8!
CONST(vmC7, 0x3f2a01a01a01a01a) // 1/7!
CONST(vmC6, 0x3f56c16c16c16c17) // 1/6!
CONST(vmC5, 0x3f81111111111111) // 1/5!
CONST(vmC4, 0x3fa5555555555555) // 1/4!
CONST(vmC3, 0x3fc5555555555555) // 1/3!
CONST(vmC2, 0x3fe0000000000000) // 1/2

// EXPM1PARTS: from y ≤ 0 in Z1, k in Z2, 2^k in Z7, p in Z6 and plo in
// Z21 with e^y = 2^k·(1 + p + plo) (expm1Parts); Z15 holds ones. Uses Z2–Z7
// and Z21: r1 = y − k·ln2Hi in Z3, r = r1 − k·ln2Lo in Z4,
// rlo = (r1 − r) − k·ln2Lo in Z5, Q(r) by Horner in Z6,
// p = r + (r²·Q(r) + rlo) by Fast2Sum.
#define EXPM1PARTS \
	VMULPD.BCST vmLog2e<>(SB), Z1, Z2 \
	VRNDSCALEPD $0, Z2, Z2 \
	VMOVAPD Z1, Z3 \
	VFNMADD231PD.BCST vmLn2Hi<>(SB), Z2, Z3 \
	VMOVAPD Z3, Z4 \
	VFNMADD231PD.BCST vmLn2Lo<>(SB), Z2, Z4 \
	VSUBPD Z4, Z3, Z5 \
	VFNMADD231PD.BCST vmLn2Lo<>(SB), Z2, Z5 \
	VBROADCASTSD vmC13<>(SB), Z6 \
	VFMADD213PD.BCST vmC12<>(SB), Z4, Z6 \
	VFMADD213PD.BCST vmC11<>(SB), Z4, Z6 \
	VFMADD213PD.BCST vmC10<>(SB), Z4, Z6 \
	VFMADD213PD.BCST vmC9<>(SB), Z4, Z6 \
	VFMADD213PD.BCST vmC8<>(SB), Z4, Z6 \
	VFMADD213PD.BCST vmC7<>(SB), Z4, Z6 \
	VFMADD213PD.BCST vmC6<>(SB), Z4, Z6 \
	VFMADD213PD.BCST vmC5<>(SB), Z4, Z6 \
	VFMADD213PD.BCST vmC4<>(SB), Z4, Z6 \
	VFMADD213PD.BCST vmC3<>(SB), Z4, Z6 \
	VFMADD213PD.BCST vmC2<>(SB), Z4, Z6 \
	VMULPD Z4, Z4, Z7 \
	VFMADD213PD Z5, Z7, Z6 \
	VADDPD Z6, Z4, Z3 \
	VSUBPD Z3, Z4, Z21 \
	VADDPD Z6, Z21, Z21 \
	VMOVAPD Z3, Z6 \
	VSCALEFPD Z2, Z15, Z7

// ONEPLUS(op, out, outlo): 1 ± s ± b in out with its rounding error in
// outlo (onePlus), s in Z7, b in Z5, op VADDPD or VSUBPD; uses Z8, Z9.
#define ONEPLUS(op, out, outlo) \
	op Z7, Z15, Z8 \
	VSUBPD Z8, Z15, Z9 \
	op Z7, Z9, Z9 \
	op Z5, Z8, out \
	VSUBPD out, Z8, outlo \
	op Z5, outlo, outlo \
	VADDPD Z9, outlo, outlo

// QUOFIX: (n + nlo)/(d + dlo) in Z8 (quoFix) from n, nlo, d, dlo in
// Z10–Z13; uses Z14.
#define QUOFIX \
	VDIVPD Z12, Z10, Z8 \
	VMOVAPD Z10, Z14 \
	VFNMADD231PD Z12, Z8, Z14 \
	VADDPD Z11, Z14, Z14 \
	VFNMADD231PD Z13, Z8, Z14 \
	VDIVPD Z12, Z14, Z14 \
	VADDPD Z14, Z8, Z8

// PROLOGUE: the arguments dst, src, n in DI, SI, CX, the index AX = 0,
// ones in Z15.
#define PROLOGUE \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ n+16(FP), CX \
	XORQ AX, AX \
	VBROADCASTSD vmOne<>(SB), Z15

// LOADY(limit, factor): x = src[AX:AX+8] in Z0, y = factor·min(|x|, limit)
// in Z1.
#define LOADY(limit, factor) \
	VMOVUPD (SI)(AX*8), Z0 \
	VPANDQ.BCST vmAbs<>(SB), Z0, Z1 \
	VMINPD.BCST limit, Z1, Z1 \
	VMULPD.BCST factor, Z1, Z1

// STORE: Z8 to dst[AX:AX+8], x itself where x is NaN; AX += 8.
#define STORE \
	VCMPPD $3, Z0, Z0, K1 \
	VMOVAPD Z0, K1, Z8 \
	VMOVUPD Z8, (DI)(AX*8) \
	ADDQ $8, AX

// func tanhAVX512(dst, src *float64, n int)
// writes tanh(src[i]) to dst[i], n a multiple of 8.
TEXT ·tanhAVX512(SB), NOSPLIT, $0-24
	PROLOGUE

tanhloop:
	CMPQ AX, CX
	JGE  tanhdone
	LOADY(vmTanhMax<>(SB), vmMinus2<>(SB)) // y = −2·min(|x|, 22)
	EXPM1PARTS
	VMULPD Z6, Z7, Z5                  // b = 2^k·p
	VMULPD Z21, Z7, Z22                // blo = 2^k·plo
	ONEPLUS(VSUBPD, Z10, Z11)          // n = 1 − 2^k − b
	VSUBPD Z22, Z11, Z11
	ONEPLUS(VADDPD, Z12, Z13)          // d = 1 + 2^k + b
	VADDPD Z22, Z13, Z13
	QUOFIX
	VPANDQ.BCST vmAbs<>(SB), Z8, Z8
	VPANDQ.BCST vmSign<>(SB), Z0, Z10
	VPORQ Z10, Z8, Z8                  // with x's sign
	STORE
	JMP  tanhloop

tanhdone:
	VZEROUPPER
	RET

// func sigmoidAVX512(dst, src *float64, n int)
// writes 1/(1 + e^−src[i]) to dst[i], n a multiple of 8.
TEXT ·sigmoidAVX512(SB), NOSPLIT, $0-24
	PROLOGUE
	VPXORQ Z20, Z20, Z20

sigmoidloop:
	CMPQ AX, CX
	JGE  sigmoiddone
	LOADY(vmSigmoidMax<>(SB), vmMinus1<>(SB)) // y = −min(|x|, 746)
	EXPM1PARTS
	VMULPD Z6, Z7, Z5                  // b = 2^k·p
	ONEPLUS(VADDPD, Z12, Z13)          // d = 1 + 2^k + b
	VMULPD Z21, Z7, Z22
	VADDPD Z22, Z13, Z13               // + 2^k·plo
	VMAXPD.BCST vmMinus1000<>(SB), Z2, Z16 // k1 = max(k, −1000)
	VSUBPD Z16, Z2, Z17                // k − k1
	VSCALEFPD Z16, Z15, Z18            // 2^k1
	VMULPD Z6, Z18, Z19
	VADDPD Z19, Z18, Z10               // n = 2^k1 + 2^k1·p
	VSUBPD Z10, Z18, Z11
	VADDPD Z19, Z11, Z11               // its rounding error
	VMULPD Z21, Z18, Z22
	VADDPD Z22, Z11, Z11               // + 2^k1·plo
	VCMPPD.BCST $13, vmZero<>(SB), Z0, K2
	VMOVAPD Z15, K2, Z10               // x ≥ 0: n = 1,
	VMOVAPD Z20, K2, Z11               // nlo = 0,
	VMOVAPD Z20, K2, Z17               // no scaling
	QUOFIX
	VSCALEFPD Z17, Z8, Z8
	STORE
	JMP  sigmoidloop

sigmoiddone:
	VZEROUPPER
	RET
