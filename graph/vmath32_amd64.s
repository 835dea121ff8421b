//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 kernels of vmath32.go: exp, log, tanh and the logistic
// sigmoid in float32, sixteen at a time, operation for operation as
// expOne32, logOne32, tanhOne32 and sigmoidOne32. The reduction's and the
// polynomials' constants are vmath32.go's variables (exp32Log2e,
// exp32Ln2Hi, exp32Ln2Lo, exp32C, log32Ln2Hi, log32Ln2Lo, log32C).

#define CONST32(name, bits) \
	DATA name<>+0(SB)/4, $bits \
	GLOBL name<>(SB), RODATA|NOPTR, $4

CONST32(v32Abs, 0x7fffffff)
CONST32(v32Sign, 0x80000000)
CONST32(v32One, 0x3f800000)
CONST32(v32Zero, 0x00000000)
CONST32(v32Minus1, 0xbf800000)
CONST32(v32Minus2, 0xc0000000)
CONST32(v32NaN, 0x7fc00000)
CONST32(v32Inf, 0x7f800000)
CONST32(v32NegInf, 0xff800000)
CONST32(v32ExpMin, 0xc2d00000) // −104
CONST32(v32ExpMax, 0x42b20000) // 89
CONST32(v32TanhMax, 0x41200000) // 10
CONST32(v32SigmoidMax, 0x42d00000) // 104
CONST32(v32K1, 0xc2800000) // −64

// EXPREDUCE32: from y in Z1, k in Z2, r in Z4 and w in Z6 with
// e^y = 2^k·(1 + r + w) (expReduce32); uses Z3, Z5:
// r1 = y − k·ln2Hi in Z3, r = r1 − k·ln2Lo in Z4,
// rlo = (r1 − r) − k·ln2Lo in Z5, Q(r) by Horner in Z6, w = r²·Q(r) + rlo.
#define EXPREDUCE32 \
	VMULPS.BCST ·exp32Log2e(SB), Z1, Z2 \
	VRNDSCALEPS $0, Z2, Z2 \
	VMOVAPS Z1, Z3 \
	VFNMADD231PS.BCST ·exp32Ln2Hi(SB), Z2, Z3 \
	VMOVAPS Z3, Z4 \
	VFNMADD231PS.BCST ·exp32Ln2Lo(SB), Z2, Z4 \
	VSUBPS Z4, Z3, Z5 \
	VFNMADD231PS.BCST ·exp32Ln2Lo(SB), Z2, Z5 \
	VBROADCASTSS ·exp32C+0(SB), Z6 \
	VFMADD213PS.BCST ·exp32C+4(SB), Z4, Z6 \
	VFMADD213PS.BCST ·exp32C+8(SB), Z4, Z6 \
	VFMADD213PS.BCST ·exp32C+12(SB), Z4, Z6 \
	VFMADD213PS.BCST ·exp32C+16(SB), Z4, Z6 \
	VFMADD213PS.BCST ·exp32C+20(SB), Z4, Z6 \
	VFMADD213PS.BCST ·exp32C+24(SB), Z4, Z6 \
	VMULPS Z4, Z4, Z3 \
	VFMADD213PS Z5, Z3, Z6

// EXPM1PARTS32: EXPREDUCE32, then p = r + w in Z7 and its rounding error
// plo in Z8 (Fast2Sum).
#define EXPM1PARTS32 \
	EXPREDUCE32 \
	VADDPS Z6, Z4, Z7 \
	VSUBPS Z7, Z4, Z8 \
	VADDPS Z6, Z8, Z8

// ONEPLUS32(op, out, outlo): 1 ± s ± b in out with its rounding error in
// outlo (onePlus32), s in Z9, b in Z5, op VADDPS or VSUBPS; uses Z18, Z19.
#define ONEPLUS32(op, out, outlo) \
	op Z9, Z15, Z18 \
	VSUBPS Z18, Z15, Z19 \
	op Z9, Z19, Z19 \
	op Z5, Z18, out \
	VSUBPS out, Z18, outlo \
	op Z5, outlo, outlo \
	VADDPS Z19, outlo, outlo

// QUOFIX32: (n + nlo)/(d + dlo) in Z8 (quoFix32) from n, nlo, d, dlo in
// Z10–Z13: the reciprocal of d in Z14, q = n·(1/d) in Z16.
#define QUOFIX32 \
	VDIVPS Z12, Z15, Z14 \
	VMULPS Z14, Z10, Z16 \
	VMOVAPS Z10, Z8 \
	VFNMADD231PS Z12, Z16, Z8 \
	VADDPS Z11, Z8, Z8 \
	VFNMADD231PS Z13, Z16, Z8 \
	VFMADD213PS Z16, Z14, Z8

// PROLOGUE32: the arguments dst, src, n in DI, SI, CX, the index AX = 0,
// ones in Z15.
#define PROLOGUE32 \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ n+16(FP), CX \
	XORQ AX, AX \
	VBROADCASTSS v32One<>(SB), Z15

// LOAD32: x = src[AX:AX+16] in Z0.
#define LOAD32 VMOVUPS (SI)(AX*4), Z0

// STORE32: Z8 to dst[AX:AX+16], x itself where x is NaN; AX += 16.
#define STORE32 \
	VCMPPS $3, Z0, Z0, K1 \
	VMOVAPS Z0, K1, Z8 \
	VMOVUPS Z8, (DI)(AX*4) \
	ADDQ $16, AX

// func exp32AVX512(dst, src *float32, n int)
// writes e^src[i] to dst[i], n a multiple of 16.
TEXT ·exp32AVX512(SB), NOSPLIT, $0-24
	PROLOGUE32

exp32loop:
	CMPQ AX, CX
	JGE  exp32done
	LOAD32
	VMAXPS.BCST v32ExpMin<>(SB), Z0, Z1
	VMINPS.BCST v32ExpMax<>(SB), Z1, Z1 // y = min(max(x, −104), 89)
	EXPREDUCE32
	VADDPS Z4, Z15, Z7                  // t = 1 + r
	VSUBPS Z7, Z15, Z8
	VADDPS Z4, Z8, Z8                   // its rounding error tlo
	VADDPS Z6, Z8, Z8
	VADDPS Z8, Z7, Z8                   // t + (tlo + w)
	VSCALEFPS Z2, Z8, Z8                // ·2^k
	STORE32
	JMP  exp32loop

exp32done:
	VZEROUPPER
	RET

// func log32AVX512(dst, src *float32, n int)
// writes ln src[i] to dst[i], n a multiple of 16.
TEXT ·log32AVX512(SB), NOSPLIT, $0-24
	PROLOGUE32

log32loop:
	CMPQ AX, CX
	JGE  log32done
	LOAD32
	VGETMANTPS $3, Z0, Z1               // m in [3/4, 3/2)
	VGETEXPPS Z0, Z2                    // ⌊log2 x⌋
	VCMPPS $1, Z15, Z1, K2              // m < 1: x = m·2^(⌊log2 x⌋+1)
	VADDPS Z15, Z2, K2, Z2              // e
	VSUBPS Z15, Z1, Z3                  // f = m − 1
	VADDPS Z1, Z15, Z4                  // d = 1 + m
	VSUBPS Z4, Z15, Z5
	VADDPS Z1, Z5, Z5                   // its rounding error dlo
	VDIVPS Z4, Z15, Z6                  // 1/d
	VMULPS Z6, Z3, Z7                   // s = f·(1/d)
	VMOVAPS Z3, Z8
	VFNMADD231PS Z4, Z7, Z8
	VFNMADD231PS Z5, Z7, Z8
	VMULPS Z6, Z8, Z8                   // slo = (f − s·d − s·dlo)·(1/d)
	VMULPS Z7, Z7, Z9                   // z = s²
	VBROADCASTSS ·log32C+0(SB), Z10
	VFMADD213PS.BCST ·log32C+4(SB), Z9, Z10
	VFMADD213PS.BCST ·log32C+8(SB), Z9, Z10
	VFMADD213PS.BCST ·log32C+12(SB), Z9, Z10
	VFMADD213PS.BCST ·log32C+16(SB), Z9, Z10
	VADDPS Z9, Z9, Z9
	VMULPS Z9, Z10, Z10                 // R = 2z·(1/3 + z/5 + …)
	VSUBPS Z10, Z3, Z10                 // f − R
	VMULPS.BCST ·log32Ln2Hi(SB), Z2, Z11 // e·ln2Hi, exact
	VADDPS Z3, Z11, Z12                 // h = e·ln2Hi + f
	VSUBPS Z12, Z11, Z13
	VADDPS Z3, Z13, Z13                 // its rounding error hlo
	VFMADD231PS.BCST ·log32Ln2Lo(SB), Z2, Z13 // u = e·ln2Lo + hlo
	VFNMADD231PS Z3, Z8, Z13            // u −= slo·f
	VFNMADD231PS Z10, Z7, Z13           // u −= s·(f − R)
	VADDPS Z13, Z12, Z8                 // h + u
	VCMPPS.BCST $1, v32Zero<>(SB), Z0, K1
	VBROADCASTSS v32NaN<>(SB), K1, Z8   // x < 0: NaN
	VCMPPS.BCST $0, v32Zero<>(SB), Z0, K1
	VBROADCASTSS v32NegInf<>(SB), K1, Z8 // x = ±0: −Inf
	VCMPPS.BCST $0, v32Inf<>(SB), Z0, K1
	VMOVAPS Z0, K1, Z8                  // x = +Inf: +Inf
	STORE32
	JMP  log32loop

log32done:
	VZEROUPPER
	RET

// func tanh32AVX512(dst, src *float32, n int)
// writes tanh src[i] to dst[i], n a multiple of 16.
TEXT ·tanh32AVX512(SB), NOSPLIT, $0-24
	PROLOGUE32

tanh32loop:
	CMPQ AX, CX
	JGE  tanh32done
	LOAD32
	VPANDD.BCST v32Abs<>(SB), Z0, Z1
	VMINPS.BCST v32TanhMax<>(SB), Z1, Z1
	VMULPS.BCST v32Minus2<>(SB), Z1, Z1 // y = −2·min(|x|, 10)
	EXPM1PARTS32
	VSCALEFPS Z2, Z15, Z9               // s = 2^k
	VMULPS Z7, Z9, Z5                   // b = s·p
	VMULPS Z8, Z9, Z22                  // blo = s·plo
	ONEPLUS32(VSUBPS, Z10, Z11)         // n = 1 − s − b
	VSUBPS Z22, Z11, Z11
	ONEPLUS32(VADDPS, Z12, Z13)         // d = 1 + s + b
	VADDPS Z22, Z13, Z13
	QUOFIX32
	VPANDD.BCST v32Abs<>(SB), Z8, Z8
	VPANDD.BCST v32Sign<>(SB), Z0, Z10
	VPORD Z10, Z8, Z8                   // with x's sign
	STORE32
	JMP  tanh32loop

tanh32done:
	VZEROUPPER
	RET

// func sigmoid32AVX512(dst, src *float32, n int)
// writes 1/(1 + e^−src[i]) to dst[i], n a multiple of 16.
TEXT ·sigmoid32AVX512(SB), NOSPLIT, $0-24
	PROLOGUE32
	VPXORD Z20, Z20, Z20

sigmoid32loop:
	CMPQ AX, CX
	JGE  sigmoid32done
	LOAD32
	VPANDD.BCST v32Abs<>(SB), Z0, Z1
	VMINPS.BCST v32SigmoidMax<>(SB), Z1, Z1
	VMULPS.BCST v32Minus1<>(SB), Z1, Z1 // y = −min(|x|, 104)
	EXPM1PARTS32
	VMAXPS.BCST v32K1<>(SB), Z2, Z16    // k1 = max(k, −64)
	VSUBPS Z16, Z2, Z17                 // k − k1
	VSCALEFPS Z16, Z15, Z9              // s = 2^k1
	VMULPS Z7, Z9, Z5                   // b = s·p
	VMULPS Z8, Z9, Z22                  // blo = s·plo
	ONEPLUS32(VADDPS, Z12, Z13)         // d = 1 + s + b
	VADDPS Z22, Z13, Z13
	VADDPS Z5, Z9, Z10                  // n = s + b
	VSUBPS Z10, Z9, Z11
	VADDPS Z5, Z11, Z11                 // its rounding error
	VADDPS Z22, Z11, Z11                // + blo
	VCMPPS.BCST $13, v32Zero<>(SB), Z0, K2
	VMOVAPS Z15, K2, Z10                // x ≥ 0: n = 1,
	VMOVAPS Z20, K2, Z11                // nlo = 0,
	VMOVAPS Z20, K2, Z17                // no scaling
	QUOFIX32
	VSCALEFPS Z17, Z8, Z8
	STORE32
	JMP  sigmoid32loop

sigmoid32done:
	VZEROUPPER
	RET
