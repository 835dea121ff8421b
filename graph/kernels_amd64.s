//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 product kernels, each for the left operand a in float64
// and in float32 (Objective.Float32Data: data widened as they are loaded,
// arithmetic in float64). SH is log2 of a's element size; the LD and PF
// macros load and prefetch a's elements.

// Loads of eight elements of a row of a at index AX under the mask K1,
// and prefetches 32 groups of eight ahead.
#define LDA64(r, z) VMOVUPD.Z (r)(AX*8), K1, z
#define LDA32(r, z) VCVTPS2PD.Z (r)(AX*4), K1, z
#define PFA64(r) PREFETCHT0 2048(r)(AX*8)
#define PFA32(r) PREFETCHT0 1024(r)(AX*4)

// DOT45 is the body of kernDot4x5: it sets c[i·ldc+j] = Σ_p
// a[i·lda+p]·bt[j·ldb+p] for i < 4, j < 5, p < k + popcount(tail), k a
// multiple of 8: four rows of a dotted with five rows of bt, eight terms
// at a time in twenty accumulators, then the last terms under the mask
// tail (bit l: term k + l), summed across lanes at the end. The rows of a
// stream from memory, so they are prefetched.
#define DOT45(SH, LDA, PFA) \
	MOVQ a+0(FP), SI \
	MOVQ lda+8(FP), AX \
	SHLQ $SH, AX \
	LEAQ (SI)(AX*1), R8 \
	LEAQ (R8)(AX*1), R9 \
	LEAQ (R9)(AX*1), R10 \
	MOVQ bt+16(FP), DI \
	MOVQ ldb+24(FP), AX \
	SHLQ $3, AX \
	LEAQ (DI)(AX*1), R11 \
	LEAQ (R11)(AX*1), R12 \
	LEAQ (R12)(AX*1), R13 \
	LEAQ (R13)(AX*1), BX \
	MOVQ k+32(FP), CX \
	VPXORQ Z0, Z0, Z0 \
	VPXORQ Z1, Z1, Z1 \
	VPXORQ Z2, Z2, Z2 \
	VPXORQ Z3, Z3, Z3 \
	VPXORQ Z4, Z4, Z4 \
	VPXORQ Z5, Z5, Z5 \
	VPXORQ Z6, Z6, Z6 \
	VPXORQ Z7, Z7, Z7 \
	VPXORQ Z8, Z8, Z8 \
	VPXORQ Z9, Z9, Z9 \
	VPXORQ Z10, Z10, Z10 \
	VPXORQ Z11, Z11, Z11 \
	VPXORQ Z12, Z12, Z12 \
	VPXORQ Z13, Z13, Z13 \
	VPXORQ Z14, Z14, Z14 \
	VPXORQ Z15, Z15, Z15 \
	VPXORQ Z16, Z16, Z16 \
	VPXORQ Z17, Z17, Z17 \
	VPXORQ Z18, Z18, Z18 \
	VPXORQ Z19, Z19, Z19 \
	XORQ AX, AX \
	MOVQ $0xff, DX \
	KMOVW DX, K1 \
	MOVQ tail+56(FP), DX \
 \
d45loop: \
	CMPQ AX, CX \
	JGE  d45done \
	PFA(SI) \
	PFA(R8) \
	PFA(R9) \
	PFA(R10) \
	LDA(SI, Z20) \
	LDA(R8, Z21) \
	LDA(R9, Z22) \
	LDA(R10, Z23) \
	VMOVUPD.Z (DI)(AX*8), K1, Z24 \
	VFMADD231PD Z24, Z20, Z0 \
	VFMADD231PD Z24, Z21, Z5 \
	VFMADD231PD Z24, Z22, Z10 \
	VFMADD231PD Z24, Z23, Z15 \
	VMOVUPD.Z (R11)(AX*8), K1, Z24 \
	VFMADD231PD Z24, Z20, Z1 \
	VFMADD231PD Z24, Z21, Z6 \
	VFMADD231PD Z24, Z22, Z11 \
	VFMADD231PD Z24, Z23, Z16 \
	VMOVUPD.Z (R12)(AX*8), K1, Z24 \
	VFMADD231PD Z24, Z20, Z2 \
	VFMADD231PD Z24, Z21, Z7 \
	VFMADD231PD Z24, Z22, Z12 \
	VFMADD231PD Z24, Z23, Z17 \
	VMOVUPD.Z (R13)(AX*8), K1, Z24 \
	VFMADD231PD Z24, Z20, Z3 \
	VFMADD231PD Z24, Z21, Z8 \
	VFMADD231PD Z24, Z22, Z13 \
	VFMADD231PD Z24, Z23, Z18 \
	VMOVUPD.Z (BX)(AX*8), K1, Z24 \
	VFMADD231PD Z24, Z20, Z4 \
	VFMADD231PD Z24, Z21, Z9 \
	VFMADD231PD Z24, Z22, Z14 \
	VFMADD231PD Z24, Z23, Z19 \
	ADDQ $8, AX \
	JMP  d45loop \
 \
d45done: \
	TESTQ DX, DX \
	JZ   d45sum \
	KMOVW DX, K1 \
	XORQ DX, DX \
	ADDQ $8, CX \
	JMP  d45loop \
 \
d45sum: \
	MOVQ c+40(FP), DX \
	MOVQ ldc+48(FP), AX \
	SHLQ $3, AX \
	HSUM5(Z0, Z1, Z2, Z3, Z4, Y0, Y1, Y2, Y3, Y4, X0, X1, X2, X3, X4) \
	ADDQ AX, DX \
	HSUM5(Z5, Z6, Z7, Z8, Z9, Y5, Y6, Y7, Y8, Y9, X5, X6, X7, X8, X9) \
	ADDQ AX, DX \
	HSUM5(Z10, Z11, Z12, Z13, Z14, Y10, Y11, Y12, Y13, Y14, X10, X11, X12, X13, X14) \
	ADDQ AX, DX \
	HSUM5(Z15, Z16, Z17, Z18, Z19, Y15, Y16, Y17, Y18, Y19, X15, X16, X17, X18, X19) \
	VZEROUPPER \
	RET

// Loads of thirty-two elements of a row of a at SI into Z20–Z23, and
// prefetches of the same columns eight rows (BX bytes each) down.
#define LDT64 \
	VMOVUPD (SI), Z20 \
	VMOVUPD 64(SI), Z21 \
	VMOVUPD 128(SI), Z22 \
	VMOVUPD 192(SI), Z23
#define LDT32 \
	VCVTPS2PD (SI), Z20 \
	VCVTPS2PD 32(SI), Z21 \
	VCVTPS2PD 64(SI), Z22 \
	VCVTPS2PD 96(SI), Z23
#define PFT64 \
	PREFETCHT0 (SI)(BX*8) \
	PREFETCHT0 64(SI)(BX*8) \
	PREFETCHT0 128(SI)(BX*8) \
	PREFETCHT0 192(SI)(BX*8)
#define PFT32 \
	PREFETCHT0 (SI)(BX*8) \
	PREFETCHT0 64(SI)(BX*8)

// TARGS loads the arguments of the transposed kernels: a in SI, its row
// stride in bytes (lda << SH) in BX, b in DI, k in CX, and the five rows of
// c (stride ldc float64s) in DX, R8, R9, R10, R11.
#define TARGS(SH) \
	MOVQ a+0(FP), SI \
	MOVQ lda+8(FP), BX \
	SHLQ $SH, BX \
	MOVQ b+16(FP), DI \
	MOVQ k+24(FP), CX \
	MOVQ c+32(FP), DX \
	MOVQ ldc+40(FP), AX \
	SHLQ $3, AX \
	LEAQ (DX)(AX*1), R8 \
	LEAQ (R8)(AX*1), R9 \
	LEAQ (R9)(AX*1), R10 \
	LEAQ (R10)(AX*1), R11

// T325 is the body of kernT32x5: it adds Σ_p a[p·lda+i]·b[5p+j] to
// c[j·ldc+i] for i < 32, j < 5, p < k: thirty-two columns of a,
// transposed, times a packed block of five columns, the result held
// transposed (one row of c per column of the block) in twenty registers.
#define T325(SH, LDT, PFT) \
	TARGS(SH) \
	LOAD4(DX, Z0, Z1, Z2, Z3) \
	LOAD4(R8, Z4, Z5, Z6, Z7) \
	LOAD4(R9, Z8, Z9, Z10, Z11) \
	LOAD4(R10, Z12, Z13, Z14, Z15) \
	LOAD4(R11, Z16, Z17, Z18, Z19) \
 \
t325loop: \
	TESTQ CX, CX \
	JLE   t325done \
	PFT \
	LDT \
	VBROADCASTSD (DI), Z24 \
	FMA4(Z0, Z1, Z2, Z3) \
	VBROADCASTSD 8(DI), Z24 \
	FMA4(Z4, Z5, Z6, Z7) \
	VBROADCASTSD 16(DI), Z24 \
	FMA4(Z8, Z9, Z10, Z11) \
	VBROADCASTSD 24(DI), Z24 \
	FMA4(Z12, Z13, Z14, Z15) \
	VBROADCASTSD 32(DI), Z24 \
	FMA4(Z16, Z17, Z18, Z19) \
	ADDQ BX, SI \
	ADDQ $40, DI \
	DECQ CX \
	JMP  t325loop \
 \
t325done: \
	STORE4(DX, Z0, Z1, Z2, Z3) \
	STORE4(R8, Z4, Z5, Z6, Z7) \
	STORE4(R9, Z8, Z9, Z10, Z11) \
	STORE4(R10, Z12, Z13, Z14, Z15) \
	STORE4(R11, Z16, Z17, Z18, Z19) \
	VZEROUPPER \
	RET

// T85 is T325 for the columns i < 8 of a selected by mask (bit i),
// reading and writing only those.
#define T85(SH, LDM) \
	TARGS(SH) \
	MOVQ mask+48(FP), AX \
	KMOVW AX, K1 \
	VMOVUPD.Z (DX), K1, Z0 \
	VMOVUPD.Z (R8), K1, Z1 \
	VMOVUPD.Z (R9), K1, Z2 \
	VMOVUPD.Z (R10), K1, Z3 \
	VMOVUPD.Z (R11), K1, Z4 \
 \
t85loop: \
	TESTQ CX, CX \
	JLE   t85done \
	LDM \
	VFMADD231PD.BCST (DI), Z20, Z0 \
	VFMADD231PD.BCST 8(DI), Z20, Z1 \
	VFMADD231PD.BCST 16(DI), Z20, Z2 \
	VFMADD231PD.BCST 24(DI), Z20, Z3 \
	VFMADD231PD.BCST 32(DI), Z20, Z4 \
	ADDQ BX, SI \
	ADDQ $40, DI \
	DECQ CX \
	JMP  t85loop \
 \
t85done: \
	VMOVUPD Z0, K1, (DX) \
	VMOVUPD Z1, K1, (R8) \
	VMOVUPD Z2, K1, (R9) \
	VMOVUPD Z3, K1, (R10) \
	VMOVUPD Z4, K1, (R11) \
	VZEROUPPER \
	RET

#define LDM64 VMOVUPD.Z (SI), K1, Z20
#define LDM32 VCVTPS2PD.Z (SI), K1, Z20

// T1610 is the body of kernT16x10: it adds Σ_p a[p·lda+i]·b[10p+j] to
// c[j·ldc+i] for the columns i < 16 selected by mask (bit i), j < 10,
// p < k: sixteen columns of a, transposed, times a packed block of ten
// columns, the result held transposed (two vectors per column of the
// block) in twenty registers. One pass over the rows of a serves ten
// columns of B.
#define T1610(SH, LD16, PF16) \
	MOVQ a+0(FP), SI \
	MOVQ lda+8(FP), BX \
	SHLQ $SH, BX \
	MOVQ BX, R10 \
	SHLQ $5, R10 \
	MOVQ b+16(FP), DI \
	MOVQ k+24(FP), CX \
	MOVQ ldc+40(FP), R9 \
	SHLQ $3, R9 \
	MOVQ mask+48(FP), AX \
	KMOVW AX, K1 \
	SHRQ $8, AX \
	KMOVW AX, K2 \
	MOVQ c+32(FP), R8 \
	CLOAD2(Z0, Z1) \
	CLOAD2(Z2, Z3) \
	CLOAD2(Z4, Z5) \
	CLOAD2(Z6, Z7) \
	CLOAD2(Z8, Z9) \
	CLOAD2(Z10, Z11) \
	CLOAD2(Z12, Z13) \
	CLOAD2(Z14, Z15) \
	CLOAD2(Z16, Z17) \
	CLOAD2(Z18, Z19) \
 \
t1610loop: \
	TESTQ CX, CX \
	JLE   t1610done \
	PF16 \
	LD16 \
	BFMA2(0, Z0, Z1) \
	BFMA2(8, Z2, Z3) \
	BFMA2(16, Z4, Z5) \
	BFMA2(24, Z6, Z7) \
	BFMA2(32, Z8, Z9) \
	BFMA2(40, Z10, Z11) \
	BFMA2(48, Z12, Z13) \
	BFMA2(56, Z14, Z15) \
	BFMA2(64, Z16, Z17) \
	BFMA2(72, Z18, Z19) \
	ADDQ BX, SI \
	ADDQ $80, DI \
	DECQ CX \
	JMP  t1610loop \
 \
t1610done: \
	MOVQ c+32(FP), R8 \
	CSTORE2(Z0, Z1) \
	CSTORE2(Z2, Z3) \
	CSTORE2(Z4, Z5) \
	CSTORE2(Z6, Z7) \
	CSTORE2(Z8, Z9) \
	CSTORE2(Z10, Z11) \
	CSTORE2(Z12, Z13) \
	CSTORE2(Z14, Z15) \
	CSTORE2(Z16, Z17) \
	CSTORE2(Z18, Z19) \
	VZEROUPPER \
	RET

// CLOAD2 and CSTORE2 move the sixteen columns of a row of c at R8 (those
// under the masks K1 and K2) to and from two registers, then step R8 to
// the next row (R9 bytes).
#define CLOAD2(z0, z1) \
	VMOVUPD.Z (R8), K1, z0 \
	VMOVUPD.Z 64(R8), K2, z1 \
	ADDQ R9, R8

#define CSTORE2(z0, z1) \
	VMOVUPD z0, K1, (R8) \
	VMOVUPD z1, K2, 64(R8) \
	ADDQ R9, R8

// BFMA2 multiplies the two vectors of a's row (Z20, Z21) by the element
// of b at off(DI), broadcast, into c0 and c1.
#define BFMA2(off, c0, c1) \
	VBROADCASTSD off(DI), Z22 \
	VFMADD231PD Z20, Z22, c0 \
	VFMADD231PD Z21, Z22, c1

// Loads of sixteen elements of a row of a at SI under the masks K1 and K2
// into Z20 and Z21, and prefetches of the same columns 32 rows down (R10
// bytes).
#define LD16F64 \
	VMOVUPD.Z (SI), K1, Z20 \
	VMOVUPD.Z 64(SI), K2, Z21
#define LD16F32 \
	VCVTPS2PD.Z (SI), K1, Z20 \
	VCVTPS2PD.Z 32(SI), K2, Z21
#define PF16F64 \
	PREFETCHT0 (SI)(R10*1) \
	PREFETCHT0 64(SI)(R10*1)
#define PF16F32 \
	PREFETCHT0 (SI)(R10*1)

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET

// Constants of expAVX, each repeated in the four lanes of a vector.
#define CONST4(name, bits) \
	DATA name<>+0(SB)/8, $bits \
	DATA name<>+8(SB)/8, $bits \
	DATA name<>+16(SB)/8, $bits \
	DATA name<>+24(SB)/8, $bits \
	GLOBL name<>(SB), RODATA|NOPTR, $32

CONST4(expAbs, 0x7fffffffffffffff)
CONST4(expBound, 0x4085e00000000000) // 700
CONST4(expLog2e, 0x3ff71547652b82fe) // 1/ln 2
CONST4(expLn2Hi, 0x3fe62e42fee00000) // ln 2, high part (math.Ln2Hi)
CONST4(expLn2Lo, 0x3dea39ef35793c76) // ln 2, low part (math.Ln2Lo)
CONST4(expC13, 0x3de6124613a86d09) // 1/13!
CONST4(expC12, 0x3e21eed8eff8d898) // 1/12!
CONST4(expC11, 0x3e5ae64567f544e4) // 1/11!
CONST4(expC10, 0x3e927e4fb7789f5c) // 1/10!
CONST4(expC9, 0x3ec71de3a556c734) // 1/9!
CONST4(expC8, 0x3efa01a01a01a01a) // 1/8!
CONST4(expC7, 0x3f2a01a01a01a01a) // 1/7!
CONST4(expC6, 0x3f56c16c16c16c17) // 1/6!
CONST4(expC5, 0x3f81111111111111) // 1/5!
CONST4(expC4, 0x3fa5555555555555) // 1/4!
CONST4(expC3, 0x3fc5555555555555) // 1/3!
CONST4(expC2, 0x3fe0000000000000) // 1/2
CONST4(expOne, 0x3ff0000000000000) // 1

// func expAVX(dst, src *float64, n int) int
// writes exp(src[i]) to dst[i] four at a time while every element of a
// group of four lies in [-700, 700], n a multiple of 4, and returns the
// number of elements written (the start of the first group it left).
// exp(x) = 2^k·exp(r), k = round(x/ln 2), r = x − k·ln 2 (|r| ≤ ln 2 / 2,
// in two parts so that k·ln2Hi is exact), exp(r) by its Taylor polynomial of
// degree 13 (truncation error below 2^−57), 2^k added to the exponent bits.
TEXT ·expAVX(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

exploop:
	CMPQ AX, CX
	JGE  expdone
	VMOVUPD (SI)(AX*8), Y0
	VANDPD  expAbs<>(SB), Y0, Y1
	VCMPPD  $6, expBound<>(SB), Y1, Y1 // !(|x| <= 700), true for NaN
	VMOVMSKPD Y1, DX
	TESTQ   DX, DX
	JNZ     expdone
	VMULPD  expLog2e<>(SB), Y0, Y2
	VROUNDPD $0, Y2, Y2                // k
	VMOVAPD Y0, Y3
	VFNMADD231PD expLn2Hi<>(SB), Y2, Y3 // r = x − k·ln2Hi
	VFNMADD231PD expLn2Lo<>(SB), Y2, Y3 // r −= k·ln2Lo
	VMOVUPD expC13<>(SB), Y4
	VFMADD213PD expC12<>(SB), Y3, Y4
	VFMADD213PD expC11<>(SB), Y3, Y4
	VFMADD213PD expC10<>(SB), Y3, Y4
	VFMADD213PD expC9<>(SB), Y3, Y4
	VFMADD213PD expC8<>(SB), Y3, Y4
	VFMADD213PD expC7<>(SB), Y3, Y4
	VFMADD213PD expC6<>(SB), Y3, Y4
	VFMADD213PD expC5<>(SB), Y3, Y4
	VFMADD213PD expC4<>(SB), Y3, Y4
	VFMADD213PD expC3<>(SB), Y3, Y4
	VFMADD213PD expC2<>(SB), Y3, Y4
	VFMADD213PD expOne<>(SB), Y3, Y4
	VFMADD213PD expOne<>(SB), Y3, Y4   // exp(r)
	VCVTPD2DQY Y2, X5
	VPMOVSXDQ X5, Y5
	VPSLLQ  $52, Y5, Y5
	VPADDQ  Y5, Y4, Y4                 // ·2^k
	VMOVUPD Y4, (DI)(AX*8)
	ADDQ    $4, AX
	JMP     exploop

expdone:
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET

// FMA3 multiplies the three columns Y12–Y14 by the broadcast Y15 into
// the accumulators c0–c2.
#define FMA3(c0, c1, c2) \
	VFMADD231PD Y12, Y15, c0 \
	VFMADD231PD Y13, Y15, c1 \
	VFMADD231PD Y14, Y15, c2

// func kern4x12AVX(a *float64, lda int, b *float64, k int, c *float64, ldc int)
// sets c[i·ldc+j] = Σ_p a[i·lda+p]·b[12p+j] for i < 4, j < 12, p < k: four
// rows of a times a packed block of twelve columns, the 4×12 result held in
// twelve registers.
TEXT ·kern4x12AVX(SB), NOSPLIT, $0-48
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), BX
	SHLQ $3, BX
	MOVQ b+16(FP), DI
	MOVQ k+24(FP), CX
	MOVQ c+32(FP), DX
	LEAQ (SI)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	XORQ AX, AX

k4loop:
	CMPQ AX, CX
	JGE  k4done
	VMOVUPD (DI), Y12
	VMOVUPD 32(DI), Y13
	VMOVUPD 64(DI), Y14
	VBROADCASTSD (SI)(AX*8), Y15
	FMA3(Y0, Y1, Y2)
	VBROADCASTSD (R8)(AX*8), Y15
	FMA3(Y3, Y4, Y5)
	VBROADCASTSD (R9)(AX*8), Y15
	FMA3(Y6, Y7, Y8)
	VBROADCASTSD (R10)(AX*8), Y15
	FMA3(Y9, Y10, Y11)
	ADDQ $96, DI
	INCQ AX
	JMP  k4loop

k4done:
	MOVQ ldc+40(FP), BX
	SHLQ $3, BX
	VMOVUPD Y0, (DX)
	VMOVUPD Y1, 32(DX)
	VMOVUPD Y2, 64(DX)
	ADDQ BX, DX
	VMOVUPD Y3, (DX)
	VMOVUPD Y4, 32(DX)
	VMOVUPD Y5, 64(DX)
	ADDQ BX, DX
	VMOVUPD Y6, (DX)
	VMOVUPD Y7, 32(DX)
	VMOVUPD Y8, 64(DX)
	ADDQ BX, DX
	VMOVUPD Y9, (DX)
	VMOVUPD Y10, 32(DX)
	VMOVUPD Y11, 64(DX)
	VZEROUPPER
	RET

// func kernT4x12AVX(a *float64, lda int, b *float64, k int, c *float64)
// adds Σ_p a[p·lda+i]·b[12p+j] to c[12i+j] for i < 4, j < 12, p < k: four
// columns of a transposed times a packed block of twelve columns.
TEXT ·kernT4x12AVX(SB), NOSPLIT, $0-40
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), BX
	SHLQ $3, BX
	MOVQ b+16(FP), DI
	MOVQ k+24(FP), CX
	MOVQ c+32(FP), DX
	VMOVUPD (DX), Y0
	VMOVUPD 32(DX), Y1
	VMOVUPD 64(DX), Y2
	VMOVUPD 96(DX), Y3
	VMOVUPD 128(DX), Y4
	VMOVUPD 160(DX), Y5
	VMOVUPD 192(DX), Y6
	VMOVUPD 224(DX), Y7
	VMOVUPD 256(DX), Y8
	VMOVUPD 288(DX), Y9
	VMOVUPD 320(DX), Y10
	VMOVUPD 352(DX), Y11

kt4loop:
	TESTQ CX, CX
	JLE   kt4done
	VMOVUPD (DI), Y12
	VMOVUPD 32(DI), Y13
	VMOVUPD 64(DI), Y14
	VBROADCASTSD (SI), Y15
	FMA3(Y0, Y1, Y2)
	VBROADCASTSD 8(SI), Y15
	FMA3(Y3, Y4, Y5)
	VBROADCASTSD 16(SI), Y15
	FMA3(Y6, Y7, Y8)
	VBROADCASTSD 24(SI), Y15
	FMA3(Y9, Y10, Y11)
	ADDQ $96, DI
	ADDQ BX, SI
	DECQ CX
	JMP  kt4loop

kt4done:
	VMOVUPD Y0, (DX)
	VMOVUPD Y1, 32(DX)
	VMOVUPD Y2, 64(DX)
	VMOVUPD Y3, 96(DX)
	VMOVUPD Y4, 128(DX)
	VMOVUPD Y5, 160(DX)
	VMOVUPD Y6, 192(DX)
	VMOVUPD Y7, 224(DX)
	VMOVUPD Y8, 256(DX)
	VMOVUPD Y9, 288(DX)
	VMOVUPD Y10, 320(DX)
	VMOVUPD Y11, 352(DX)
	VZEROUPPER
	RET

// HSUM1 sums the lanes of z (y and x its lower halves) into x's first
// lane and stores it at off(DX); Z25 is scratch.
#define HSUM1(z, y, x, off) \
	VEXTRACTF64X4 $1, z, Y25 \
	VADDPD Y25, y, y \
	VEXTRACTF32X4 $1, y, X25 \
	VADDPD X25, x, x \
	VPERMILPD $1, x, X25 \
	VADDSD X25, x, x \
	VMOVSD x, off(DX)

// HSUM5 stores the lane sums of five accumulators at DX, DX+8, …, DX+32.
#define HSUM5(z0, z1, z2, z3, z4, y0, y1, y2, y3, y4, x0, x1, x2, x3, x4) \
	HSUM1(z0, y0, x0, 0) \
	HSUM1(z1, y1, x1, 8) \
	HSUM1(z2, y2, x2, 16) \
	HSUM1(z3, y3, x3, 24) \
	HSUM1(z4, y4, x4, 32)

// LOAD4 and STORE4 move four vectors of eight between r and z0–z3.
#define LOAD4(r, z0, z1, z2, z3) \
	VMOVUPD (r), z0 \
	VMOVUPD 64(r), z1 \
	VMOVUPD 128(r), z2 \
	VMOVUPD 192(r), z3

#define STORE4(r, z0, z1, z2, z3) \
	VMOVUPD z0, (r) \
	VMOVUPD z1, 64(r) \
	VMOVUPD z2, 128(r) \
	VMOVUPD z3, 192(r)

// FMA4 multiplies the four vectors Z20–Z23 by the broadcast Z24 into
// c0–c3.
#define FMA4(c0, c1, c2, c3) \
	VFMADD231PD Z20, Z24, c0 \
	VFMADD231PD Z21, Z24, c1 \
	VFMADD231PD Z22, Z24, c2 \
	VFMADD231PD Z23, Z24, c3

// The AVX-512 kernels: 32 vector registers of eight float64.

// The AVX-512 product kernels (their bodies are the macros at the top of
// the file).

// func kernDot4x5AVX512(a *float64, lda int, bt *float64, ldb int, k int, c *float64, ldc int, tail int)
TEXT ·kernDot4x5AVX512(SB), NOSPLIT, $0-64
	DOT45(3, LDA64, PFA64)

// func kernDot4x5F32AVX512(a *float32, lda int, bt *float64, ldb int, k int, c *float64, ldc int, tail int)
TEXT ·kernDot4x5F32AVX512(SB), NOSPLIT, $0-64
	DOT45(2, LDA32, PFA32)

// func kernT32x5AVX512(a *float64, lda int, b *float64, k int, c *float64, ldc int)
TEXT ·kernT32x5AVX512(SB), NOSPLIT, $0-48
	T325(3, LDT64, PFT64)

// func kernT32x5F32AVX512(a *float32, lda int, b *float64, k int, c *float64, ldc int)
TEXT ·kernT32x5F32AVX512(SB), NOSPLIT, $0-48
	T325(2, LDT32, PFT32)

// func kernT8x5AVX512(a *float64, lda int, b *float64, k int, c *float64, ldc int, mask int)
TEXT ·kernT8x5AVX512(SB), NOSPLIT, $0-56
	T85(3, LDM64)

// func kernT8x5F32AVX512(a *float32, lda int, b *float64, k int, c *float64, ldc int, mask int)
TEXT ·kernT8x5F32AVX512(SB), NOSPLIT, $0-56
	T85(2, LDM32)

// func expAVX512(dst, src *float64, n int) int
// is expAVX eight at a time, n a multiple of 8.
TEXT ·expAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

exp8loop:
	CMPQ AX, CX
	JGE  exp8done
	VMOVUPD (SI)(AX*8), Z0
	VANDPD.BCST expAbs<>(SB), Z0, Z1
	VCMPPD.BCST $6, expBound<>(SB), Z1, K1 // !(|x| <= 700), true for NaN
	KORTESTW K1, K1
	JNZ  exp8done
	VMULPD.BCST expLog2e<>(SB), Z0, Z2
	VRNDSCALEPD $0, Z2, Z2                  // k
	VMOVAPD Z0, Z3
	VFNMADD231PD.BCST expLn2Hi<>(SB), Z2, Z3 // r = x − k·ln2Hi
	VFNMADD231PD.BCST expLn2Lo<>(SB), Z2, Z3 // r −= k·ln2Lo
	VBROADCASTSD expC13<>(SB), Z4
	VFMADD213PD.BCST expC12<>(SB), Z3, Z4
	VFMADD213PD.BCST expC11<>(SB), Z3, Z4
	VFMADD213PD.BCST expC10<>(SB), Z3, Z4
	VFMADD213PD.BCST expC9<>(SB), Z3, Z4
	VFMADD213PD.BCST expC8<>(SB), Z3, Z4
	VFMADD213PD.BCST expC7<>(SB), Z3, Z4
	VFMADD213PD.BCST expC6<>(SB), Z3, Z4
	VFMADD213PD.BCST expC5<>(SB), Z3, Z4
	VFMADD213PD.BCST expC4<>(SB), Z3, Z4
	VFMADD213PD.BCST expC3<>(SB), Z3, Z4
	VFMADD213PD.BCST expC2<>(SB), Z3, Z4
	VFMADD213PD.BCST expOne<>(SB), Z3, Z4
	VFMADD213PD.BCST expOne<>(SB), Z3, Z4   // exp(r)
	VCVTPD2DQ Z2, Y5
	VPMOVSXDQ Y5, Z5
	VPSLLQ  $52, Z5, Z5
	VPADDQ  Z5, Z4, Z4                      // ·2^k
	VMOVUPD Z4, (DI)(AX*8)
	ADDQ    $8, AX
	JMP     exp8loop

exp8done:
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET

CONST4(logMinNormal, 0x0010000000000000) // the smallest normal number
CONST4(logMax, 0x7fefffffffffffff) // the largest finite number
CONST4(logC3, 0x3fd5555555555555) // 1/3
CONST4(logC5, 0x3fc999999999999a) // 1/5
CONST4(logC7, 0x3fc2492492492492) // 1/7
CONST4(logC9, 0x3fbc71c71c71c71c) // 1/9
CONST4(logC11, 0x3fb745d1745d1746) // 1/11
CONST4(logC13, 0x3fb3b13b13b13b14) // 1/13
CONST4(logC15, 0x3fb1111111111111) // 1/15
CONST4(logC17, 0x3fae1e1e1e1e1e1e) // 1/17
CONST4(logC19, 0x3faaf286bca1af28) // 1/19
CONST4(logC21, 0x3fa8618618618618) // 1/21
CONST4(logC23, 0x3fa642c8590b2164) // 1/23
CONST4(logC25, 0x3fa47ae147ae147b) // 1/25

// func logAVX512(dst, src *float64, n int) int
// writes log(src[i]) to dst[i] eight at a time while every element of a
// group is a positive normal finite number, n a multiple of 8, and returns
// the number of elements written. log(x) = e·ln 2 + log(1+f) with
// x = (1+f)·2^e, 1+f in [3/4, 3/2) (VGETMANTPD, VGETEXPPD), and, with
// s = f/(2+f) (|s| ≤ 1/5), log(1+f) = 2·atanh(s) = f − s(f − R),
// R = 2s²/3 + 2s⁴/5 + … to the term 2s²⁴/25 (truncation below 2^−60): the
// exact f leads and the rounded terms are corrections.
TEXT ·logAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

log8loop:
	CMPQ AX, CX
	JGE  log8done
	VMOVUPD (SI)(AX*8), Z0
	VCMPPD.BCST $13, logMinNormal<>(SB), Z0, K1 // x ≥ the smallest normal
	VCMPPD.BCST $2, logMax<>(SB), Z0, K2        // x ≤ the largest finite
	KANDW K1, K2, K1
	KMOVW K1, DX
	CMPQ DX, $0xff
	JNE  log8done
	VGETMANTPD $3, Z0, Z1                       // m in [3/4, 3/2)
	VGETEXPPD Z0, Z2                            // ⌊log2 x⌋
	VCMPPD.BCST $1, expOne<>(SB), Z1, K3        // m < 1: x = m·2^(⌊log2 x⌋+1)
	VADDPD.BCST expOne<>(SB), Z2, K3, Z2        // e
	VSUBPD.BCST expOne<>(SB), Z1, Z3            // f = m − 1, exact
	VADDPD.BCST expOne<>(SB), Z1, Z4            // 2 + f
	VDIVPD Z4, Z3, Z6                           // s = f/(2+f)
	VMULPD Z6, Z6, Z4                           // z = s²
	VBROADCASTSD logC25<>(SB), Z5
	VFMADD213PD.BCST logC23<>(SB), Z4, Z5
	VFMADD213PD.BCST logC21<>(SB), Z4, Z5
	VFMADD213PD.BCST logC19<>(SB), Z4, Z5
	VFMADD213PD.BCST logC17<>(SB), Z4, Z5
	VFMADD213PD.BCST logC15<>(SB), Z4, Z5
	VFMADD213PD.BCST logC13<>(SB), Z4, Z5
	VFMADD213PD.BCST logC11<>(SB), Z4, Z5
	VFMADD213PD.BCST logC9<>(SB), Z4, Z5
	VFMADD213PD.BCST logC7<>(SB), Z4, Z5
	VFMADD213PD.BCST logC5<>(SB), Z4, Z5
	VFMADD213PD.BCST logC3<>(SB), Z4, Z5
	VADDPD Z4, Z4, Z4
	VMULPD Z4, Z5, Z5                           // R = 2z/3 + 2z²/5 + …
	VSUBPD Z5, Z3, Z5                           // f − R
	VFNMADD213PD Z3, Z6, Z5                     // log(m) = f − s(f − R)
	VFMADD231PD.BCST expLn2Lo<>(SB), Z2, Z5     // + e·ln2Lo
	VFMADD231PD.BCST expLn2Hi<>(SB), Z2, Z5     // + e·ln2Hi (exact product)
	VMOVUPD Z5, (DI)(AX*8)
	ADDQ    $8, AX
	JMP     log8loop

log8done:
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET

// func widenAVX(dst *float64, src *float32, n int) int
// Sets dst[i] = float64(src[i]) for i < n rounded down to a multiple of 16
// and returns that count.
TEXT ·widenAVX(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	ANDQ $-16, CX
	XORQ AX, AX

widenLoop:
	CMPQ AX, CX
	JGE  widenDone
	VCVTPS2PD (SI)(AX*4), Y0
	VCVTPS2PD 16(SI)(AX*4), Y1
	VCVTPS2PD 32(SI)(AX*4), Y2
	VCVTPS2PD 48(SI)(AX*4), Y3
	VMOVUPD   Y0, (DI)(AX*8)
	VMOVUPD   Y1, 32(DI)(AX*8)
	VMOVUPD   Y2, 64(DI)(AX*8)
	VMOVUPD   Y3, 96(DI)(AX*8)
	ADDQ      $16, AX
	JMP       widenLoop

widenDone:
	VZEROUPPER
	MOVQ CX, ret+24(FP)
	RET

// func kernT16x10AVX512(a *float64, lda int, b *float64, k int, c *float64, ldc int, mask int)
TEXT ·kernT16x10AVX512(SB), NOSPLIT, $0-56
	T1610(3, LD16F64, PF16F64)

// func kernT16x10F32AVX512(a *float32, lda int, b *float64, k int, c *float64, ldc int, mask int)
TEXT ·kernT16x10F32AVX512(SB), NOSPLIT, $0-56
	T1610(2, LD16F32, PF16F32)
